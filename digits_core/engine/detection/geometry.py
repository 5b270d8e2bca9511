"""Where a box lands when its image is resized with a DIGITS resize mode, and back.

Every resize mode of the image plugins (``squash``, ``crop``, ``fill``,
``half_crop``; see ``digits_data_images.resize``) maps a source pixel
coordinate ``x`` to ``x * sx + ox`` (and ``y * sy + oy``): a scale per axis
followed by a crop (negative offset) or a padding (positive offset).
:func:`resize_geometry` returns that map using the same rounding as the
image resize, so boxes follow their pixels exactly; :func:`transform_boxes`
applies it to a boxes label and :func:`invert_boxes` takes predicted boxes
back to the input image's coordinates.

No TensorFlow here: the data plugin and inference import this.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Geometry(NamedTuple):
    """``x_out = x_in * sx + ox``, ``y_out = y_in * sy + oy``; ``width``/``height`` is the output size."""

    sx: float
    sy: float
    ox: float
    oy: float
    width: int
    height: int


def _round(value: float) -> int:
    """Round half away from zero (DIGITS's Python 2 ``round``), as the image resize does."""
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def resize_geometry(src_h: int, src_w: int, height: int, width: int, mode: str = "squash") -> Geometry:
    """The coordinate map of resizing a ``src_w × src_h`` image to ``width × height`` with ``mode``.

    Args:
        src_h, src_w: Source image size in pixels.
        height, width: Target size.
        mode: ``squash``, ``crop``, ``fill`` or ``half_crop``.

    Raises:
        ValueError: Unknown mode or non-positive size.
    """
    if min(src_h, src_w, height, width) < 1:
        raise ValueError(f"cannot resize {src_w}x{src_h} to {width}x{height}")
    if mode not in ("squash", "crop", "fill", "half_crop"):
        raise ValueError(f'unknown resize mode "{mode}"')
    wr, hr = src_w / width, src_h / height
    if (src_h, src_w) == (height, width):
        return Geometry(1.0, 1.0, 0.0, 0.0, width, height)
    if mode == "squash" or wr == hr:
        return Geometry(width / src_w, height / src_h, 0.0, 0.0, width, height)
    if mode == "crop":
        if wr > hr:
            rw = _round(src_w / hr)
            return Geometry(rw / src_w, height / src_h, -float(_round((rw - width) / 2.0)), 0.0, width, height)
        rh = _round(src_h / wr)
        return Geometry(width / src_w, rh / src_h, 0.0, -float(_round((rh - height) / 2.0)), width, height)
    if mode == "fill":
        if wr > hr:
            rw, rh = width, _round(src_h / wr)
            if (height - rh) % 2 == 1:
                rh += 1
        else:
            rw, rh = _round(src_w / hr), height
            if (width - rw) % 2 == 1:
                rw += 1
        ox, oy = 0.0, 0.0
    else:  # half_crop
        ratio = (wr + hr) / 2.0
        rw, rh = _round(src_w / ratio), _round(src_h / ratio)
        if wr > hr and (height - rh) % 2 == 1:
            rh += 1
        elif wr < hr and (width - rw) % 2 == 1:
            rw += 1
        ox = -float(_round((rw - width) / 2.0)) if wr > hr else 0.0
        oy = -float(_round((rh - height) / 2.0)) if wr <= hr else 0.0
    if wr > hr:
        oy = float(max((height - rh) // 2, 0))
    else:
        ox = float(max((width - rw) // 2, 0))
    return Geometry(rw / src_w, rh / src_h, ox, oy, width, height)


def transform_boxes(boxes: np.ndarray, geometry: Geometry, min_size: float = 0.0) -> np.ndarray:
    """Move ``N×5`` boxes ``(class, x1, y1, x2, y2)`` with their resized image.

    Boxes are clipped to the output image; boxes cropped away entirely are
    dropped; boxes narrower or lower than ``min_size`` pixels after the
    resize become ``dontcare`` (class 0): neither trained on nor counted.

    Returns:
        float32 ``M×5`` (``M <= N``).
    """
    out = np.asarray(boxes, np.float32).reshape(-1, 5).copy()
    g = geometry
    out[:, [1, 3]] = np.clip(out[:, [1, 3]] * g.sx + g.ox, 0, g.width)
    out[:, [2, 4]] = np.clip(out[:, [2, 4]] * g.sy + g.oy, 0, g.height)
    keep = (out[:, 3] > out[:, 1]) & (out[:, 4] > out[:, 2])
    out = out[keep]
    if min_size > 0:
        small = ((out[:, 3] - out[:, 1]) < min_size) | ((out[:, 4] - out[:, 2]) < min_size)
        out[small, 0] = 0
    return out


def invert_boxes(boxes: np.ndarray, geometry: Geometry, src_h: int, src_w: int) -> np.ndarray:
    """Take ``N×4`` boxes ``(x1, y1, x2, y2)`` in resized-image pixels back to the source image (clipped)."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4).copy()
    g = geometry
    b[:, [0, 2]] = np.clip((b[:, [0, 2]] - g.ox) / g.sx, 0, src_w)
    b[:, [1, 3]] = np.clip((b[:, [1, 3]] - g.oy) / g.sy, 0, src_h)
    return b
