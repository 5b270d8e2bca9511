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
Each entry says how much it shows (``shown``/``total``, ``stride``).

Activations come from ONE forward pass through a Keras model whose outputs
are every layer's output, fed the same network input :func:`~digits_core.infer`
uses (the engine's preprocessing: mean subtraction, scale, centre crop),
so the last layer's activations are the prediction. Only functional and
Sequential Keras models have per-layer outputs; a subclassed model gets
weights only, with a note.

::

    from digits_core.inference.visualize import visualize
    vis = visualize("20261202-120000-ab12", "seven.png")
    vis.layers[1]["activations"]["stats"]["mean"]
    vis.to_json()                      # images as PNG data URIs

TensorFlow is imported when a model runs, not when this module is.
"""

from __future__ import annotations

import base64
import io
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import InferenceError

#: Histogram bins of every statistic (as DIGITS).
HISTOGRAM_BINS = 20
#: Palette index of the gaps between tiles (white).
_GAP = 255


@dataclass(frozen=True)
class VisLimits:
    """How much of each layer is drawn (statistics always cover everything).

    Attributes:
        max_channels: Feature maps tiled per layer (the first ones).
        max_filters: Filter tiles per weight tensor (output-major, as DIGITS tiled them).
        max_tile: Largest side of one tile in px; larger maps are sampled every k-th row/column.
        max_matrix: Largest side of a dense kernel or a 2-D activation picture in px.
        max_vector: Values of a 1-D tensor drawn (as a square).
        max_layers: Layers that get pictures (the first ones); later layers get statistics only.
        bins: Histogram bins.
    """

    max_channels: int = 32
    max_filters: int = 256
    max_tile: int = 48
    max_matrix: int = 128
    max_vector: int = 1024
    max_layers: int = 100
    bins: int = HISTOGRAM_BINS


def tensor_statistics(values: np.ndarray, bins: int = HISTOGRAM_BINS) -> dict:
    """Mean, standard deviation, min, max and a histogram of a tensor (non-finite values left out).

    Args:
        values: Any numeric array (the whole tensor).
        bins: Histogram bins, equal width between min and max.

    Returns:
        ``{"count", "nonfinite", "mean", "std", "min", "max", "histogram": {"counts", "edges"}}``;
        ``counts`` has ``bins`` numbers, ``edges`` ``bins + 1``. Statistics are float64
        (``std`` is the population standard deviation, as numpy's default).
    """
    flat = np.asarray(values).reshape(-1)
    finite = flat[np.isfinite(flat)].astype(np.float64)
    stats: dict[str, Any] = {"count": int(flat.size), "nonfinite": int(flat.size - finite.size)}
    if finite.size == 0:
        stats.update(mean=None, std=None, min=None, max=None, histogram={"counts": [], "edges": []})
        return stats
    counts, edges = np.histogram(finite, bins=bins)
    stats.update(mean=float(finite.mean()), std=float(finite.std()), min=float(finite.min()),
                 max=float(finite.max()), histogram={"counts": counts.tolist(), "edges": edges.tolist()})
    return stats


# -- pictures ---------------------------------------------------------------------------------------------------


def _jet_palette() -> list[int]:
    """DIGITS's 'jet' heat map as a 256-entry PNG palette; the last entry (the gaps) is white."""
    anchors = np.linspace(0.0, 1.0, 9)
    red = [0, 0, 0, 0, 0.5, 1, 1, 1, 0.5]
    green = [0, 0, 0.5, 1, 1, 1, 0.5, 0, 0]
    blue = [0.5, 1, 1, 1, 0.5, 0, 0, 0, 0]
    x = np.linspace(0.0, 1.0, 255)
    rgb = np.stack([np.interp(x, anchors, c) for c in (red, green, blue)], axis=1)
    table = np.rint(rgb * 255).astype(np.uint8).tolist()
    table.append([255, 255, 255])
    return [v for row in table for v in row]


_PALETTE = _jet_palette()


def _to_levels(values: np.ndarray) -> np.ndarray:
    """Scale values to palette levels 0..254 (min → 0, max → 254; a constant tensor → 0; NaN → 0)."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.zeros(values.shape, np.uint8)
    low, high = float(finite.min()), float(finite.max())
    if high <= low:
        return np.zeros(values.shape, np.uint8)
    scaled = (np.nan_to_num(values, nan=low, posinf=high, neginf=low) - low) * (254.0 / (high - low))
    return np.clip(np.rint(scaled), 0, 254).astype(np.uint8)


def _stride(size: int, limit: int) -> int:
    return max(1, math.ceil(size / limit))


def tile_grid(tiles: np.ndarray, gap_value: Any = _GAP) -> np.ndarray:
    """Lay ``[N, h, w(, 3)]`` tiles out in a near-square grid (``ceil(sqrt(N))`` columns), 1 px gaps."""
    count, h, w = tiles.shape[:3]
    cols = max(1, math.ceil(math.sqrt(count)))
    rows = math.ceil(count / cols)
    extra = tiles.shape[3:]
    grid = np.full((rows * (h + 1) - 1, cols * (w + 1) - 1, *extra), gap_value, dtype=tiles.dtype)
    for i in range(count):
        r, c = divmod(i, cols)
        grid[r * (h + 1):r * (h + 1) + h, c * (w + 1):c * (w + 1) + w] = tiles[i]
    return grid


def _png_uri(image: np.ndarray, palette: bool) -> str:
    from PIL import Image

    if palette:
        pil = Image.fromarray(image, mode="P")
        pil.putpalette(_PALETTE)
    else:
        pil = Image.fromarray(image)
    buffer = io.BytesIO()
    pil.save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@dataclass
class Picture:
    """A drawn tensor: the PNG, its pixel size and how much of the tensor it shows.

    Attributes:
        kind: ``"maps"`` (tiled ``H×W`` maps), ``"filters"`` (tiled kernels), ``"rgb-filters"``
            (3-channel first-layer kernels in colour), ``"matrix"`` or ``"vector"``.
        shown: Maps/filters/values drawn.
        total: Maps/filters/values in the tensor.
        stride: ``[rows, columns]``: every ``rows``-th row and ``columns``-th column is drawn (1: all).
        width: Picture width in px.
        height: Picture height in px.
        image: ``uint8`` palette levels (or RGB for ``rgb-filters``); becomes ``uri`` in JSON.
    """

    kind: str
    shown: int
    total: int
    stride: list
    width: int
    height: int
    image: np.ndarray = field(repr=False)

    def to_json(self, include_image: bool = True) -> dict:
        data = {k: v for k, v in asdict(self).items() if k != "image"}
        if include_image:
            data["uri"] = _png_uri(self.image, palette=self.kind != "rgb-filters")
        return data


def _picture(kind: str, image: np.ndarray, shown: int, total: int, stride=(1, 1)) -> Picture:
    return Picture(kind, int(shown), int(total), [int(v) for v in stride], int(image.shape[1]), int(image.shape[0]),
                   image)


def _vector_picture(values: np.ndarray, limits: VisLimits) -> Picture:
    flat = values.reshape(-1)
    shown = flat[:limits.max_vector]
    side = max(1, math.ceil(math.sqrt(shown.size)))
    rows = math.ceil(shown.size / side)
    image = np.full(rows * side, _GAP, np.uint8)
    image[:shown.size] = _to_levels(shown)
    return _picture("vector", image.reshape(rows, side), shown.size, flat.size)


def _matrix_picture(matrix: np.ndarray, limits: VisLimits) -> Picture:
    stride = (_stride(matrix.shape[0], limits.max_matrix), _stride(matrix.shape[1], limits.max_matrix))
    sampled = matrix[::stride[0], ::stride[1]]
    return _picture("matrix", _to_levels(sampled), sampled.size, matrix.size, stride)


def _maps_picture(maps: np.ndarray, limits: VisLimits) -> Picture:
    """``H×W×C`` maps → the first ``max_channels`` tiled, one colour scale over the tiles shown."""
    h, w, c = maps.shape
    stride = _stride(max(h, w), limits.max_tile)
    shown = np.moveaxis(maps[::stride, ::stride, :limits.max_channels], -1, 0)
    return _picture("maps", tile_grid(_to_levels(shown)), shown.shape[0], c, (stride, stride))


def draw_activation(activation: np.ndarray, limits: VisLimits) -> Picture:
    """Picture of one image's layer output (batch axis removed): maps, a matrix or a vector."""
    if activation.ndim >= 3:
        maps = activation.reshape(*activation.shape[:2], -1)  # extra axes (3-D convs) become channels
        return _maps_picture(maps, limits)
    if activation.ndim == 2:
        return _matrix_picture(activation, limits)
    return _vector_picture(np.atleast_1d(activation), limits)


def draw_weights(weights: np.ndarray, limits: VisLimits) -> Picture:
    """Picture of a weight tensor.

    Conv kernels ``[kh, kw, in, out]``: with 3 input channels, one colour tile per
    output filter; else one tile per (output, input) pair, output-major. Dense
    kernels ``[in, out]``: a matrix with one row per output unit. Anything else: a vector.
    """
    if weights.ndim >= 4:
        kh, kw, cout = weights.shape[0], weights.shape[1], weights.shape[-1]
        kernel = weights.reshape(kh, kw, -1, cout)  # 3-D conv kernels: the extra axes join the inputs
        cin = kernel.shape[2]
        stride = _stride(max(kh, kw), limits.max_tile)
        kernel = kernel[::stride, ::stride]
        if cin == 3:
            tiles = np.moveaxis(kernel[:, :, :, :limits.max_filters], -1, 0)  # [out, kh, kw, 3]
            levels = np.rint(_to_levels(tiles) * (255.0 / 254.0)).astype(np.uint8)
            return _picture("rgb-filters", tile_grid(levels, gap_value=255), tiles.shape[0], cout, (stride, stride))
        pairs = np.transpose(kernel, (3, 2, 0, 1)).reshape(-1, kernel.shape[0], kernel.shape[1])  # out-major
        tiles = pairs[:limits.max_filters]
        return _picture("filters", tile_grid(_to_levels(tiles)), tiles.shape[0], pairs.shape[0], (stride, stride))
    if weights.ndim == 3:  # 1-D conv kernels [k, in, out]: one row per output filter
        return _matrix_picture(weights.reshape(-1, weights.shape[-1]).T, limits)
    if weights.ndim == 2:  # dense kernels [in, out]: one row per output unit
        return _matrix_picture(weights.T, limits)
    return _vector_picture(np.atleast_1d(weights), limits)


# -- the network --------------------------------------------------------------------------------------------------


def network_input(model, raw: np.ndarray) -> np.ndarray:
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
        mean = mean[top:top + raw.shape[0], left:left + raw.shape[1]]
    x = np.asarray(raw).astype(np.float32)
    if x.ndim == 2:
        x = x[:, :, None]
    return ((x - mean) * np.float32(prep.scale))[None]


def _layer_weights(layer) -> tuple[str, np.ndarray] | None:
    """The layer's own first weight tensor (kernel, embeddings, gamma...), or None (no weights, nested model)."""
    import keras

    if isinstance(layer, keras.Model) or not layer.weights:
        return None
    variable = next((v for v in (getattr(layer, "kernel", None), getattr(layer, "depthwise_kernel", None))
                     if v is not None), layer.weights[0])
    name = str(getattr(variable, "path", None) or variable.name).rsplit("/", 1)[-1]
    return name, np.asarray(keras.ops.convert_to_numpy(variable))


def _activations(keras_model, x: np.ndarray) -> tuple[list, list[str]]:
    """Every layer's output for ``x`` from one forward pass; ``None`` where a layer has no single output."""
    import keras

    notes: list[str] = []
    layers = keras_model.layers
    if not getattr(keras_model, "inputs", None):
        notes.append(f"{type(keras_model).__name__} is a subclassed Keras model: it has no per-layer outputs, "
                     "so only weights are shown (build the network with the functional API or Sequential "
                     "to see activations).")
        return [None] * len(layers), notes
    outputs, wanted = [], []
    for i, layer in enumerate(layers):
        try:
            out = layer.output
        except (AttributeError, ValueError):  # a shared layer (several outputs) or one outside the graph
            notes.append(f'Layer "{layer.name}" is called more than once or outside the graph: activations left out.')
            continue
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
        def part(entry):
            if entry is None:
                return None
            data = dict(entry)
            picture = data.get("picture")
            data["picture"] = None if picture is None else picture.to_json(include_images)
            return data

        layers = [{**layer, "activations": part(layer["activations"]), "weights": part(layer["weights"])}
                  for layer in self.layers]
        return {"model": self.model, "input_id": self.input_id, "limits": asdict(self.limits),
                "layers": layers, "notes": list(self.notes), "seconds": round(self.seconds, 4)}


def layer_visualizations(model, raw: np.ndarray, input_id: str = "input",
                         limits: VisLimits | None = None) -> LayerVisualizations:
    """Activations and weights of every layer for one image.

    Args:
        model: An :class:`~digits_core.inference.model.InferenceModel` (``result.model`` of
            :func:`~digits_core.infer`).
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
        entry: dict[str, Any] = {"index": index, "name": layer.name, "type": type(layer).__name__,
                                 "params": int(layer.count_params()) if layer.built else 0,
                                 "activations": None, "weights": None}
        if act is not None:
            entry["activations"] = {"shape": list(act.shape), "stats": tensor_statistics(act, limits.bins),
                                    "picture": draw_activation(act, limits) if drawn else None}
        own = _layer_weights(layer)
        if own is not None:
            name, weights = own
            entry["weights"] = {"name": name, "shape": list(weights.shape),
                                "stats": tensor_statistics(weights, limits.bins),
                                "picture": draw_weights(weights, limits) if drawn else None}
        layers.append(entry)
    if len(layers) > limits.max_layers:
        notes.append(f"Pictures are drawn for the first {limits.max_layers} of {len(layers)} layers; "
                     "the others have statistics only.")
    return LayerVisualizations(model.describe(), input_id, layers, limits, notes, time.perf_counter() - start)


def visualize(model_id, image, *, epoch: float | None = None, jobs_dir=None,
              limits: VisLimits | None = None) -> LayerVisualizations:
    """Run a model on ONE image and return every layer's activations and weights with statistics.

    The image is read and prepared exactly as :func:`~digits_core.infer` prepares inputs
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


def visualize_result(result, limits: VisLimits | None = None) -> LayerVisualizations:
    """:func:`layer_visualizations` of the one sample of an :class:`~digits_core.InferenceResult`.

    Raises:
        InferenceError: The result has more or fewer than one sample.
    """
    if len(result.samples) != 1:
        raise InferenceError(
            f"Layer visualizations are for one image (DIGITS's Classify One); this request has "
            f"{len(result.samples)} inputs. Give one image, or turn the visualizations off.")
    sample = result.samples[0]
    return layer_visualizations(result.model, sample.input_data, sample.input_id, limits)
