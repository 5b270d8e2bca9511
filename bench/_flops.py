"""FLOPs counted from a traced TensorFlow graph: the convolutions and matrix products it really runs.

:func:`graph_flops` walks every op of a concrete function's graph (and of the functions it calls) and
counts ``2 × multiply-adds`` for the ops that hold a network's arithmetic: ``MatMul``, ``BatchMatMul*``,
``Conv2D``/``Conv3D``, their input and filter gradients (``Conv*BackpropInput``/``...Filter``, which is
also how a transposed convolution runs forward) and the depthwise convolutions. Shapes come from the
graph (trace with fixed shapes: a ``None`` dimension makes an op uncountable; it is reported in
``uncounted``). Element-wise work (activations, normalization, the optimizer's update) is left out on
purpose: it is a few percent of a convolutional network's arithmetic and runs at memory speed, so the
figure compares with the machine's measured matmul peak.

TensorFlow's own profiler (``tf.compat.v1.profiler`` with ``float_operation()``) counts the same way for
the 2-D ops it knows; :func:`profiler_flops` returns its per-op-type count, which the test suite compares
with this one (it has no statistics for the 3-D gradients, hence this counter).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

#: Op types whose FLOPs are counted (everything else is element-wise or data movement).
COUNTED = frozenset(
    {
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Conv2D",
        "Conv3D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
    }
)
#: Ops that call another graph function (their bodies are counted too).
CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})


@dataclass
class FlopCount:
    """FLOPs by op type, and the counted ops whose shapes were not static (named, not counted)."""

    by_type: dict = field(default_factory=lambda: defaultdict(int))
    uncounted: list = field(default_factory=list)

    @property
    def total(self) -> int:
        return int(sum(self.by_type.values()))


def _dims(shape) -> list[int] | None:
    dims = shape.as_list() if shape.rank is not None else None
    if dims is None or any(d is None for d in dims):
        return None
    return [int(d) for d in dims]


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def op_flops(op) -> int | None:
    """FLOPs of one op (``None``: a counted type whose shapes are not static)."""
    kind = op.type
    out = _dims(op.outputs[0].shape)
    if kind == "MatMul":
        a = _dims(op.inputs[0].shape)
        if a is None or out is None:
            return None
        k = a[0] if op.get_attr("transpose_a") else a[1]
        return 2 * _prod(out) * k
    if kind.startswith("BatchMatMul"):
        a = _dims(op.inputs[0].shape)
        if a is None or out is None:
            return None
        k = a[-2] if op.get_attr("adj_x") else a[-1]
        return 2 * _prod(out) * k
    if kind in ("Conv2D", "Conv3D", "DepthwiseConv2dNative"):
        kernel = _dims(op.inputs[1].shape)
        if kernel is None or out is None:
            return None
        # Conv: each output value sums kernel-spatial × input-channels products (the filter's in axis already
        # holds in/groups); depthwise: each output value sums one channel's kernel-spatial products
        reach = _prod(kernel[:-2]) * (1 if kind.startswith("Depthwise") else kernel[-2])
        return 2 * _prod(out) * reach
    if "Backprop" in kind:
        # (input or its sizes, filter or its sizes, gradient of the forward output): the same products as
        # the forward convolution, which has the output gradient's shape
        grad = _dims(op.inputs[2].shape)
        kernel = _dims(op.inputs[1].shape) if "BackpropInput" in kind else out
        if grad is None or kernel is None:
            return None
        reach = _prod(kernel[:-2]) * (1 if kind.startswith("Depthwise") else kernel[-2])
        return 2 * _prod(grad) * reach
    return 0


def _body_graph(op):
    name = op.get_attr("f").name
    graph = op.graph
    while graph is not None:
        found = graph._get_function(name)  # noqa: SLF001 - the only way to a called function's body graph
        if found is not None:
            return found.graph
        graph = getattr(graph, "outer_graph", None)
    return None


def graph_flops(graph, count: FlopCount | None = None) -> FlopCount:
    """Count the FLOPs of every op in ``graph`` (a ``tf.Graph`` or ``FuncGraph``) and the functions it calls."""
    count = count if count is not None else FlopCount()
    for op in graph.get_operations():
        if op.type in COUNTED:
            if not any(out.consumers() for out in op.outputs):
                continue  # a gradient nobody uses (the first layer's input gradient): pruned before it runs
            value = op_flops(op)
            if value is None:
                count.uncounted.append(f"{op.type} {op.name}")
            else:
                count.by_type[op.type] += value
        elif op.type in CALLS:
            body = _body_graph(op)
            if body is not None:
                graph_flops(body, count)
    return count


def concrete_flops(function, *specs) -> FlopCount:
    """FLOPs of ``function`` (a ``tf.function``) traced for ``specs`` (``tf.TensorSpec`` or tensors)."""
    return graph_flops(function.get_concrete_function(*specs).graph)


def profiler_flops(graph) -> dict:
    """TensorFlow's profiler's float_ops per op name for ``graph`` (the ops it has statistics for)."""
    import tensorflow as tf

    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    report = tf.compat.v1.profiler.profile(graph, cmd="scope", options=options)
    found: dict = {}

    def walk(node) -> None:
        if node.float_ops:
            found[node.name] = int(node.float_ops)
        for child in node.children:
            walk(child)

    walk(report)
    return found
