"""Layer visualizations and statistics for one image (DIGITS's "Classify One" extras).

For one input, every layer of the network gets:

* **activations**: the layer's output for that image, tiled feature maps
  drawn as one image (a heat map, blue = the lowest value shown, red = the
  highest), with mean, standard deviation, min, max and a 20-bin histogram;
* **weights** (layers that have their own weights): the layer's first
  weight tensor (the kernel of Conv/Dense layers, gamma of BatchNorm...),
  drawn as filters (conv kernels), a matrix (dense kernels) or a strip of
  values, with the same statistics.

Statistics always cover the whole tensor. Pictures are bounded
(:class:`VisLimits`): at most ``max_channels`` feature maps and
``max_filters`` filter tiles per layer, maps larger than ``max_tile`` px
sampled every k-th row and column, dense matrices sampled to
``max_matrix`` px a side, vectors cut after ``max_vector`` values, and
pictures for the first ``max_layers`` layers only (statistics for all).
Each entry says how much it shows (``shown``/``total``, ``stride``). The
statistics and pictures are drawn by :mod:`~digits_core.inference.vis_pictures`.

Activations come from ONE forward pass through a Keras model whose outputs
are every layer's output, fed the same network input :func:`~digits_core.inference.infer`
uses (the engine's preprocessing: mean subtraction, scale, centre crop),
so the last layer's activations are the prediction. Only functional and
Sequential Keras models have per-layer outputs; a subclassed model gets
weights only, and a layer called more than once shows its first call, each
with a note.

::

    from digits_core.inference.visualize import visualize
    vis = visualize("20261202-120000-ab12", "seven.png")
    vis.layers[1]["activations"]["stats"]["mean"]
    vis.to_json()                      # images as PNG data URIs

TensorFlow is imported when a model runs, not when this module is.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InferenceError
from .vis_pictures import HISTOGRAM_BINS, Picture, VisLimits, draw_activation, draw_weights, tensor_statistics

if TYPE_CHECKING:
    from .model import InferenceModel
    from .result import InferenceResult

__all__ = [
    "HISTOGRAM_BINS",
    "LayerVisualizations",
    "Picture",
    "VisLimits",
    "draw_activation",
    "draw_weights",
    "layer_visualizations",
    "network_input",
    "tensor_statistics",
    "visualize",
    "visualize_result",
]


def network_input(model: InferenceModel, raw: np.ndarray) -> np.ndarray:
    """The network's input for one raw image as the model's compiled function prepares it.

    Args:
        model: An :class:`~digits_core.inference.model.InferenceModel`.
        raw: The image as the network sees it, still raw (``InferenceSample.input_data``:
            the dataset's dtype, already centre-cropped when the model crops).

    Returns:
        ``[1, H, W, C]`` float32: (raw − mean) × scale, the mean cropped like the image.
    """
    from ..engine.preprocessing import center_crop_offsets

    prep = model.preprocessing
    mean = prep.mean_array()
    if isinstance(mean, np.ndarray) and mean.ndim == 3 and mean.shape[:2] != raw.shape[:2]:
        top, left = center_crop_offsets(mean.shape[0], mean.shape[1], raw.shape[0])
        mean = mean[top : top + raw.shape[0], left : left + raw.shape[1]]
    x = np.asarray(raw).astype(np.float32)
    if x.ndim == 2:
        x = x[:, :, None]
    return ((x - mean) * np.float32(prep.scale))[None]


def _layer_weights(layer: Any) -> tuple[str, np.ndarray] | None:
    """The layer's own first weight tensor (kernel, embeddings, gamma...), or None (no weights, nested model)."""
    import keras

    if isinstance(layer, keras.Model) or not layer.weights:
        return None
    variable = next(
        (v for v in (getattr(layer, "kernel", None), getattr(layer, "depthwise_kernel", None)) if v is not None),
        layer.weights[0],
    )
    name = str(getattr(variable, "path", None) or variable.name).rsplit("/", 1)[-1]
    return name, np.asarray(keras.ops.convert_to_numpy(variable))


def _activations(keras_model: Any, x: np.ndarray) -> tuple[list, list[str]]:
    """Every layer's output for ``x`` from one forward pass; ``None`` where a layer has no single output."""
    import keras

    notes: list[str] = []
    layers = keras_model.layers
    if not getattr(keras_model, "inputs", None):
        notes.append(
            f"{type(keras_model).__name__} is a subclassed Keras model: it has no per-layer outputs, "
            "so only weights are shown (build the network with the functional API or Sequential "
            "to see activations)."
        )
        return [None] * len(layers), notes
    outputs, wanted = [], []
    for i, layer in enumerate(layers):
        try:
            out = layer.output
        except (AttributeError, ValueError):  # a layer outside the graph has no output tensor
            notes.append(f'Layer "{layer.name}" has no output in the model\'s graph: activations left out.')
            continue
        calls = len(getattr(layer, "_inbound_nodes", ()))
        if calls > 1:  # Keras's layer.output is the first call's
            notes.append(f'Layer "{layer.name}" is called {calls} times: its activations are those of the first call.')
        flat = keras.tree.flatten(out)
        outputs.append(flat[0])
        wanted.append(i)
    probe = keras.Model(keras_model.inputs, outputs)
    values = probe([x], training=False)
    values = [values] if not isinstance(values, (list, tuple)) else values
    found: list = [None] * len(layers)
    for i, value in zip(wanted, values):
        found[i] = np.asarray(keras.ops.convert_to_numpy(value))[0]
    return found, notes


@dataclass
class LayerVisualizations:
    """What :func:`layer_visualizations` returns.

    Attributes:
        model: ``InferenceModel.describe()`` of the model.
        input_id: The image's name.
        layers: One dict per layer, in the model's order: ``index``, ``name``, ``type``,
            ``params``, ``activations`` (``shape``, ``stats``, ``picture``) and ``weights``
            (``name``, ``shape``, ``stats``, ``picture``) or ``None``; ``picture`` is a
            :class:`Picture` or ``None`` (past ``max_layers``).
        limits: The :class:`VisLimits` used.
        notes: What was left out and why.
        seconds: Time taken (forward pass, statistics and pictures).
    """

    model: dict
    input_id: str
    layers: list[dict]
    limits: VisLimits
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self, include_images: bool = True) -> dict:
        """JSON-serializable data; pictures as PNG data URIs (``uri``) unless ``include_images`` is False."""

        def part(entry: dict | None) -> dict | None:
            if entry is None:
                return None
            data = dict(entry)
            picture = data.get("picture")
            data["picture"] = None if picture is None else picture.to_json(include_images)
            return data

        layers = [
            {**layer, "activations": part(layer["activations"]), "weights": part(layer["weights"])}
            for layer in self.layers
        ]
        return {
            "model": self.model,
            "input_id": self.input_id,
            "limits": asdict(self.limits),
            "layers": layers,
            "notes": list(self.notes),
            "seconds": round(self.seconds, 4),
        }


def layer_visualizations(
    model: InferenceModel, raw: np.ndarray, input_id: str = "input", limits: VisLimits | None = None
) -> LayerVisualizations:
    """Activations and weights of every layer for one image.

    Args:
        model: An :class:`~digits_core.inference.model.InferenceModel` (``result.model`` of
            :func:`~digits_core.inference.infer`).
        raw: The raw network input of the image (``result.samples[0].input_data``).
        input_id: The image's name.
        limits: What is drawn (default :class:`VisLimits`).

    Returns:
        A :class:`LayerVisualizations`.
    """
    limits = limits or VisLimits()
    start = time.perf_counter()
    keras_model = model.model
    activations, notes = _activations(keras_model, network_input(model, raw))
    layers = []
    for index, (layer, act) in enumerate(zip(keras_model.layers, activations)):
        drawn = index < limits.max_layers
        entry: dict[str, Any] = {
            "index": index,
            "name": layer.name,
            "type": type(layer).__name__,
            "params": int(layer.count_params()) if layer.built else 0,
            "activations": None,
            "weights": None,
        }
        if act is not None:
            entry["activations"] = {
                "shape": list(act.shape),
                "stats": tensor_statistics(act, limits.bins),
                "picture": draw_activation(act, limits) if drawn else None,
            }
        own = _layer_weights(layer)
        if own is not None:
            name, weights = own
            entry["weights"] = {
                "name": name,
                "shape": list(weights.shape),
                "stats": tensor_statistics(weights, limits.bins),
                "picture": draw_weights(weights, limits) if drawn else None,
            }
        layers.append(entry)
    if len(layers) > limits.max_layers:
        notes.append(
            f"Pictures are drawn for the first {limits.max_layers} of {len(layers)} layers; "
            "the others have statistics only."
        )
    return LayerVisualizations(model.describe(), input_id, layers, limits, notes, time.perf_counter() - start)


def visualize(
    model_id: Any, image: Any, *, epoch: float | None = None, jobs_dir: Any = None, limits: VisLimits | None = None
) -> LayerVisualizations:
    """Run a model on ONE image and return every layer's activations and weights with statistics.

    The image is read and prepared exactly as :func:`~digits_core.inference.infer` prepares inputs
    (the dataset's channels, resize mode and dtype, then the engine's preprocessing).

    Args:
        model_id: Model job id (or unique prefix, or job folder).
        image: One image file, numpy array or ``(input_id, array)`` tuple.
        epoch: Snapshot epoch (default: the last).
        jobs_dir: The jobs folder.
        limits: What is drawn (default :class:`VisLimits`).

    Raises:
        InferenceError: Not exactly one readable image, or no snapshot.
        JobNotFoundError: No such model.
    """
    from .runner import infer

    result = infer(model_id, [image], epoch=epoch, jobs_dir=jobs_dir, max_errors=0)
    return visualize_result(result, limits)


def visualize_result(result: InferenceResult, limits: VisLimits | None = None) -> LayerVisualizations:
    """:func:`layer_visualizations` of the one sample of an :class:`~digits_core.inference.InferenceResult`.

    Raises:
        InferenceError: The result has more or fewer than one sample.
    """
    if len(result.samples) != 1:
        raise InferenceError(
            f"Layer visualizations are for one image (DIGITS's Classify One); this request has "
            f"{len(result.samples)} inputs. Give one image, or turn the visualizations off."
        )
    sample = result.samples[0]
    return layer_visualizations(result.model, sample.input_data, sample.input_id, limits)
