"""Writing the serving function (:mod:`~digits_core.inference.export_signature`) in each format.

* ``savedmodel``: a TensorFlow SavedModel in TF Serving's folder layout,
  ``serving/<model id>/<version>/saved_model.pb`` (version: the epoch, or the
  epoch × 1000 for fractional epochs), so ``tensorflow_model_server
  --model_base_path=.../serving/<model id>`` loads it unchanged;
  ``saved_model/`` is the same folder again, hard-linked (no second copy on disk or in the archive).
* ``onnx``: ``model.onnx`` through ``tf2onnx`` (opset 17), the same float64
  preparation graph; runs in ``onnxruntime``. ``Erfc`` and depthwise convolutions that Keras
  routes through XLA are translated as :mod:`~digits_core.inference.onnx_ops` says.
* ``tflite``: ``model.tflite`` through ``tf.lite.TFLiteConverter`` (TFLite
  has no float64 kernels: the preparation graph runs in float32); float32
  weights by default, ``quantize="dynamic"`` (int8 weights) or ``"float16"``.

Converters that cannot translate an op raise :class:`InferenceError` naming it and the network layer it is in
(from the node's name scope), so a custom network's author knows what to replace; tf2onnx, which writes a
TensorFlow op it cannot translate into the file and carries on, is checked node by node afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from ..errors import InferenceError
from .model import InferenceModel
from .onnx_ops import CUSTOM_OP_HANDLERS, depthwise_without_xla

QUANTIZE = ("dynamic", "float16")
ONNX_OPSET = 17


#: What a function-call op left in a graph usually is, for the refusal's message.
_CALLS = dict.fromkeys(
    ("StatefulPartitionedCall", "PartitionedCall"),
    " (a function call the converter cannot inline: Keras runs grouped convolutions other than depthwise ones "
    "through XLA)",
)


def serving_version(epoch: int | float) -> int:
    """TF Serving's integer version of an epoch (fractional epochs × 1000)."""
    return int(epoch) if float(epoch).is_integer() else int(round(float(epoch) * 1000))


def export_archive(network, serve, signature: list, folder: Path) -> None:
    """Write ``serve`` (tracking the Keras ``network`` it calls) as a SavedModel's ``serving_default`` into ``folder``."""
    import keras

    archive = keras.export.ExportArchive()
    archive.track(network)
    archive.add_endpoint("serving_default", serve, input_signature=signature)
    archive.write_out(str(folder), verbose=False)


def write_savedmodel(loaded: InferenceModel, folder: Path, channels_in: int | None = None) -> Path:
    """Write ``serving/<id>/<version>/`` and its hard-linked twin ``saved_model/`` into ``folder``; return the first."""
    from .export_signature import serving_function

    target = folder / "serving" / loaded.id / str(serving_version(loaded.epoch))
    target.parent.mkdir(parents=True)
    serve, signature = serving_function(loaded, channels_in=channels_in)
    export_archive(loaded.model, serve, signature, target)
    hard_link_tree(target, folder / "saved_model")
    return target


def hard_link_tree(source: Path, dest: Path) -> None:
    """Mirror ``source`` at ``dest`` with hard links: both paths are real folders (also once archived, where
    tarfile stores the second as links, not twice), unlike a symbolic link that an archive keeps as a link."""
    for path in sorted(source.rglob("*")):
        twin = dest / path.relative_to(source)
        if path.is_dir():
            twin.mkdir(parents=True, exist_ok=True)
            continue
        twin.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, twin)
        except OSError:  # a file system without hard links: a copy
            shutil.copy2(path, twin)


def _layer_of(scope: str, layer_names: set[str]) -> str | None:
    """The network layer a graph node belongs to, from its name scope (``functional_1/odd_layer_1/Svd``).

    Keras 3 suffixes a layer's TensorFlow name scope (``odd_layer`` → ``odd_layer_1``): both spellings are tried.
    """
    for part in scope.split("/")[1:]:  # the first part is the model itself
        for name in (part, re.sub(r"_\d+$", "", part)):
            if name in layer_names:
                return name
    return None


def _layer_names(loaded: InferenceModel) -> set[str]:
    names: set[str] = set()
    for layer in getattr(loaded.model, "layers", ()):
        names.add(layer.name)
        names.update(sub.name for sub in getattr(layer, "layers", ()))
    return names


def _unsupported_error(converter: str, found: list[tuple[str, str | None]], fallback: str) -> InferenceError:
    """``found``: (op, layer or None) pairs the converter could not take; ``fallback``: its message otherwise."""
    if found:
        what = "it has no equivalent for " + ", ".join(
            f"the op {op}" + (f' in layer "{layer}"' if layer else "") + _CALLS.get(op, "")
            for op, layer in dict.fromkeys(found)
        )
        advice = "replace that layer in the network"
    else:
        what, advice = f"the graph ({fallback})", "replace the layer that uses it in the network"
    return InferenceError(
        f"{converter} cannot convert this model: {what}. Export it as savedmodel or keras instead, or {advice}."
    )


def _unsupported(exc: Exception, converter: str, loaded: InferenceModel) -> InferenceError:
    """The converter's exception as an error naming the ops it lacks and the layers they are in."""
    text = str(exc)
    ops = set(re.findall(r"'tf\.([A-Za-z0-9_]+)' op is neither", text))
    ops |= {
        op.strip()
        for group in re.findall(r"[Uu]nsupported ops?:?\s*\[?([A-Za-z0-9_, ]+)", text)
        for op in group.split(",")
        if op.strip()
    }
    names = _layer_names(loaded)
    found = [
        (op, _layer_of(scope, names))
        for op, scope in re.findall(r'fused\["([A-Za-z0-9_]+):", "([^"@]+)@', text)
        if op in ops
    ]
    found += [(op, None) for op in sorted(ops - {op for op, _ in found})]
    return _unsupported_error(converter, found, text.splitlines()[0][:300] if text else type(exc).__name__)


def _onnx_unsupported_nodes(path: Path, loaded: InferenceModel) -> list[tuple[str, str | None]]:
    """Nodes tf2onnx left as TensorFlow ops (it logs them and writes the file anyway): (op, layer) pairs."""
    import onnx
    import onnx.defs

    names = _layer_names(loaded)
    found = []

    def walk(graph) -> None:
        for node in graph.node:
            if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type, node.domain):
                found.append((node.op_type, _layer_of(node.name, names)))
            for attribute in node.attribute:
                for sub in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                    walk(sub)

    walk(onnx.load(str(path), load_external_data=False).graph)
    return found


def write_onnx(loaded: InferenceModel, path: Path, channels_in: int | None = None) -> None:
    """Convert the serving function to ONNX at ``path``.

    Raises:
        InferenceError: ``tf2onnx`` is not installed, or cannot convert an op (named).
    """
    import tensorflow as tf

    from .export_signature import serving_function

    try:
        import tf2onnx
    except ImportError:
        raise InferenceError('ONNX export needs tf2onnx and onnx: pip install "digits-core[export]".') from None
    serve, signature = serving_function(loaded, channels_in=channels_in)
    function = tf.function(serve, input_signature=signature)
    try:
        with depthwise_without_xla():  # traced inside from_function
            tf2onnx.convert.from_function(
                function,
                input_signature=signature,
                opset=ONNX_OPSET,
                output_path=str(path),
                custom_op_handlers=dict(CUSTOM_OP_HANDLERS),
            )
    except Exception as exc:  # noqa: BLE001 - tf2onnx raises many types; the message names the op
        raise _unsupported(exc, "tf2onnx", loaded) from None
    left = _onnx_unsupported_nodes(path, loaded)
    if left:
        path.unlink()
        raise _unsupported_error("tf2onnx", left, "")


def write_tflite(
    loaded: InferenceModel, path: Path, channels_in: int | None = None, quantize: str | None = None
) -> None:
    """Convert the serving function (float32 preparation) to TFLite at ``path``.

    Raises:
        InferenceError: Unknown ``quantize``, or an op TFLite's builtins lack (named).
    """
    import tensorflow as tf

    from .export_signature import serving_function

    if quantize not in (None, *QUANTIZE):
        raise InferenceError(f'Unknown TFLite quantization "{quantize}"; choose one of {", ".join(QUANTIZE)}.')
    serve, signature = serving_function(loaded, channels_in=channels_in, float_type=tf.float32)
    # Through a SavedModel: converting the concrete function directly leaves Keras 3 variables unfrozen (NaN outputs).
    staging = Path(tempfile.mkdtemp(prefix=".tflite-", dir=path.parent))
    try:
        export_archive(loaded.model, serve, signature, staging / "saved_model")
        converter = tf.lite.TFLiteConverter.from_saved_model(str(staging / "saved_model"))
        _convert_tflite(converter, path, quantize, loaded)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _convert_tflite(converter, path: Path, quantize: str | None, loaded: InferenceModel) -> None:
    import tensorflow as tf

    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            converter.target_spec.supported_types = [tf.float16]
    try:
        path.write_bytes(converter.convert())
    except Exception as exc:  # noqa: BLE001 - the converter's errors name the ops it lacks
        raise _unsupported(exc, "The TFLite converter", loaded) from None
