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

from typing import NamedTuple

import numpy as np

from ..resize import resize_plan


class Geometry(NamedTuple):
    """``x_out = x_in * sx + ox``, ``y_out = y_in * sy + oy``; ``width``/``height`` is the output size."""

    sx: float
    sy: float
    ox: float
    oy: float
    width: int
    height: int


def resize_geometry(src_h: int, src_w: int, height: int, width: int, mode: str = "squash") -> Geometry:
    """The coordinate map of resizing a ``src_w × src_h`` image to ``width × height`` with ``mode``.

    Built from :func:`digits_core.resize.resize_plan`, the plan the image
    resize itself follows (intermediate size, centre crop, padding).

    Args:
        src_h, src_w: Source image size in pixels.
        height, width: Target size.
        mode: ``squash``, ``crop``, ``fill`` or ``half_crop``.

    Raises:
        ValueError: Unknown mode or non-positive size.
    """
    if min(src_h, src_w) < 1:
        raise ValueError(f"cannot resize a {src_w}x{src_h} image")
    plan = resize_plan(src_h, src_w, height, width, mode)
    return Geometry(
        plan.resize_w / src_w,
        plan.resize_h / src_h,
        float(plan.pad_x - plan.crop_x),
        float(plan.pad_y - plan.crop_y),
        width,
        height,
    )


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
