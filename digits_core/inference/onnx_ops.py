"""What the ONNX export does for TensorFlow ops that tf2onnx does not translate as traced (used by
:func:`digits_core.inference.export_formats.write_onnx`).

* ``Erfc`` (the exact GELU, e.g. ConvNeXt): written as ``1 - Erf(x)``. ONNX has ``Erf`` but no
  ``Erfc``; the identity is exact, so the parity report's bounds hold unchanged (only far in the
  negative tail, where GELU's output is below 1e-30, do the two round differently).
* Depthwise convolutions written as grouped ``Conv2D`` (``groups`` = channels, e.g. ConvNeXt's 7×7
  blocks): Keras's TensorFlow backend runs every grouped convolution inside an XLA-compiled function
  (``jit_compile=True``), which tf2onnx cannot inline (it is left as a ``StatefulPartitionedCall``).
  While the export traces, :func:`depthwise_without_xla` computes those as ``tf.nn.depthwise_conv2d``
  with the same kernel (reshaped from ``(kh, kw, 1, C·m)`` to ``(kh, kw, C, m)``): the same arithmetic,
  an op tf2onnx translates. Other grouped convolutions keep the XLA call and are refused, named.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_PATCH_LOCK = threading.Lock()


def erfc_as_one_minus_erf(ctx: Any, node: Any, name: str, args: list) -> None:
    """tf2onnx handler (its ``custom_op_handlers`` form) of TensorFlow's ``Erfc``: ``1 - Erf(x)``."""
    import numpy as np
    from tf2onnx import utils

    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(utils.make_name(f"{name}_one"), np.array(1, dtype=dtype))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


#: The handlers :func:`~digits_core.inference.export_formats.write_onnx` gives tf2onnx.
CUSTOM_OP_HANDLERS: dict[str, tuple[Any, list]] = {"Erfc": (erfc_as_one_minus_erf, [])}


@contextlib.contextmanager
def depthwise_without_xla() -> Iterator[None]:
    """While the block runs (an export tracing its graph), Keras's TensorFlow ``conv`` computes depthwise
    convolutions (2-D, channels last, one input channel per group) with ``tf.nn.depthwise_conv2d``."""
    import tensorflow as tf
    from keras.src.backend.tensorflow import nn as keras_tf_nn

    original = keras_tf_nn.conv

    def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
        depthwise = (
            len(inputs.shape) == 4
            and data_format in (None, "channels_last")
            and kernel.shape[-2] == 1
            and inputs.shape[-1] not in (None, 1)
            and kernel.shape[-1] % inputs.shape[-1] == 0
        )
        if not depthwise:
            return original(inputs, kernel, strides, padding, data_format, dilation_rate)
        channels = int(inputs.shape[-1])
        size = (int(kernel.shape[0]), int(kernel.shape[1]))
        weights = tf.reshape(kernel, (*size, channels, int(kernel.shape[-1]) // channels))
        step = (strides, strides) if isinstance(strides, int) else tuple(strides)
        rate = (dilation_rate, dilation_rate) if isinstance(dilation_rate, int) else tuple(dilation_rate)
        return tf.nn.depthwise_conv2d(
            inputs, weights, (1, *step, 1), padding.upper(), dilations=rate if rate != (1, 1) else None
        )

    with _PATCH_LOCK:
        keras_tf_nn.conv = conv
        try:
            yield
        finally:
            keras_tf_nn.conv = original
