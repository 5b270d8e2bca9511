"""Pictures and statistics of tensors for the layer visualizations (numpy only).

:func:`tensor_statistics` summarises a whole tensor (mean, std, min, max, a
20-bin histogram, as DIGITS did). :func:`draw_activation` and
:func:`draw_weights` turn one layer's output or weights into a bounded
picture (:class:`Picture`): feature maps and conv filters tiled in a grid
with 1 px white gaps, dense kernels as a matrix with one row per output unit,
vectors as a square. Values are drawn with DIGITS's "jet" heat map scaled
from the lowest value shown (blue) to the highest (red), one scale per
picture; colour first-layer filters (3 input channels) are drawn in RGB. The
PNGs are palette images, so a picture costs a few KB. :class:`VisLimits`
bounds what is drawn.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

#: Histogram bins of every statistic (as DIGITS).
HISTOGRAM_BINS = 20
#: Vectors up to this long are drawn as one row.
SHORT_VECTOR = 32
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
    stats.update(
        mean=float(finite.mean()),
        std=float(finite.std()),
        min=float(finite.min()),
        max=float(finite.max()),
        histogram={"counts": counts.tolist(), "edges": edges.tolist()},
    )
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
        grid[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = tiles[i]
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


def _picture(kind: str, image: np.ndarray, shown: int, total: int, stride: tuple[int, int] = (1, 1)) -> Picture:
    return Picture(
        kind, int(shown), int(total), [int(v) for v in stride], int(image.shape[1]), int(image.shape[0]), image
    )


def _vector_picture(values: np.ndarray, limits: VisLimits) -> Picture:
    flat = values.reshape(-1)
    shown = flat[: limits.max_vector]
    # A short vector (class scores) reads best as one row; a long one as a square.
    side = shown.size if shown.size <= SHORT_VECTOR else math.ceil(math.sqrt(shown.size))
    side = max(1, side)
    rows = math.ceil(shown.size / side)
    image = np.full(rows * side, _GAP, np.uint8)
    image[: shown.size] = _to_levels(shown)
    return _picture("vector", image.reshape(rows, side), shown.size, flat.size)


def _matrix_picture(matrix: np.ndarray, limits: VisLimits) -> Picture:
    stride = (_stride(matrix.shape[0], limits.max_matrix), _stride(matrix.shape[1], limits.max_matrix))
    sampled = matrix[:: stride[0], :: stride[1]]
    return _picture("matrix", _to_levels(sampled), sampled.size, matrix.size, stride)


def _maps_picture(maps: np.ndarray, limits: VisLimits) -> Picture:
    """``H×W×C`` maps → the first ``max_channels`` tiled, one colour scale over the tiles shown."""
    h, w, c = maps.shape
    stride = _stride(max(h, w), limits.max_tile)
    shown = np.moveaxis(maps[::stride, ::stride, : limits.max_channels], -1, 0)
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
            tiles = np.moveaxis(kernel[:, :, :, : limits.max_filters], -1, 0)  # [out, kh, kw, 3]
            levels = np.rint(_to_levels(tiles) * (255.0 / 254.0)).astype(np.uint8)
            return _picture("rgb-filters", tile_grid(levels, gap_value=255), tiles.shape[0], cout, (stride, stride))
        pairs = np.transpose(kernel, (3, 2, 0, 1)).reshape(-1, kernel.shape[0], kernel.shape[1])  # out-major
        tiles = pairs[: limits.max_filters]
        return _picture("filters", tile_grid(_to_levels(tiles)), tiles.shape[0], pairs.shape[0], (stride, stride))
    if weights.ndim == 3:  # 1-D conv kernels [k, in, out]: one row per output filter
        return _matrix_picture(weights.reshape(-1, weights.shape[-1]).T, limits)
    if weights.ndim == 2:  # dense kernels [in, out]: one row per output unit
        return _matrix_picture(weights.T, limits)
    return _vector_picture(np.atleast_1d(weights), limits)
