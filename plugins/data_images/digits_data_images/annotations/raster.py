"""Painting segmentation shapes into a class-index mask (in the worker processes)."""

from __future__ import annotations

import numpy as np

from .rle import decode_brush, decode_coco


def paint(shapes, width: int, height: int, dtype=np.uint8) -> np.ndarray:
    """An ``H×W`` class-index mask of ``shapes`` (``(class_id, kind, data, normalised)``), in order.

    Polygons are filled with Pillow (``ImageDraw.polygon``: inside and
    boundary pixels); later shapes paint over earlier ones; unpainted pixels
    are class 0.

    Raises:
        ValueError: A mask whose size is not the image's (names it).
    """
    from PIL import Image, ImageDraw

    mask = np.zeros((height, width), dtype)
    for cls, kind, data, normalised in shapes:
        if kind == "polygon":
            layer = Image.new("L", (width, height), 0)
            draw = ImageDraw.Draw(layer)
            for flat in data:
                if normalised:
                    flat = [round(v * (width if i % 2 == 0 else height), 6) for i, v in enumerate(flat)]
                draw.polygon([(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)], fill=1)
            region = np.asarray(layer, bool)
        elif kind == "rle":
            h, w, counts = data
            if (h, w) != (height, width):
                raise ValueError(f"an RLE mask is {w}x{h}, the image is {width}x{height}")
            region = decode_coco(h, w, list(counts))
        elif kind == "brush":
            h, w, raw = data
            if (h, w) != (height, width):
                raise ValueError(f"a brush mask is {w}x{h}, the image is {width}x{height}")
            region = decode_brush(raw, h, w)
        elif kind == "cvatmask":
            left, top, w, h, counts = data
            if left + w > width or top + h > height:
                raise ValueError(f"a CVAT mask's rectangle leaves the {width}x{height} image")
            values = np.zeros(len(counts), bool)
            values[1::2] = True
            region = np.zeros((height, width), bool)
            region[top : top + h, left : left + w] = np.repeat(values, counts).reshape(h, w)
        else:
            raise ValueError(f"a {kind} shape cannot be painted into a mask")
        mask[region] = cls
    return mask
