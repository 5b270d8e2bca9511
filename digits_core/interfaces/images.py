"""Image features kept encoded (PNG, JPEG, original file bytes): :class:`EncodedImage` and its decoding.

Data plugins return an :class:`EncodedImage` from ``encode_entry`` when the
dataset should store compressed images; :func:`decode_image_bytes` turns the
stored bytes back into exactly the declared shape and dtype. Pillow is
imported inside the functions that encode or decode.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class RecordError(ValueError):
    """An ``encode_entry`` result breaks the data contract (the entry is skipped)."""


@dataclass
class EncodedImage:
    """An image feature kept as encoded file bytes (PNG, JPEG or the original file).

    Data plugins return this from ``encode_entry`` instead of a numpy array
    when the dataset should store compressed images; readers decode it back
    to exactly ``shape`` and ``dtype`` (``Dataset.read_batch`` does so by
    default).

    Attributes:
        data: The encoded bytes.
        format: ``"png"``, ``"jpg"`` or ``"other"`` (any format Pillow reads,
            e.g. pass-through original bytes).
        shape: The decoded ``(H, W, C)``; C is 1 (grayscale) or 3 (RGB).
        dtype: The decoded dtype: ``"uint8"`` or (PNG only) ``"uint16"``.
        array: Optional decoded pixels (``H×W×C``) when the plugin has them
            anyway; the core uses them for the mean image and never stores them.
    """

    data: bytes
    format: str
    shape: tuple
    dtype: str = "uint8"
    array: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_array(
        cls, array: np.ndarray, format: str = "png", *, quality: int = 90, keep_array: bool = True
    ) -> EncodedImage:
        """Encode an ``H×W×C`` (or ``H×W``) uint8/uint16 array as PNG or JPEG.

        Args:
            array: The pixels; C must be 1 or 3. uint16 needs PNG and C=1.
            format: ``"png"`` (lossless) or ``"jpg"`` (lossy, uint8 only).
            quality: JPEG quality.
            keep_array: Keep ``array`` on the result for the mean image.

        Raises:
            RecordError: The array cannot be stored in this format.
        """
        from PIL import Image

        arr = np.asarray(array)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3 or arr.shape[2] not in (1, 3):
            raise RecordError(f"cannot encode an array of shape {arr.shape} as an image (need H×W×1 or H×W×3)")
        fmt = "jpg" if format in ("jpg", "jpeg") else format
        if fmt not in ("png", "jpg"):
            raise RecordError(f'unknown image encoding "{format}" (use png or jpg)')
        dtype = arr.dtype.name
        if dtype == "uint16":
            if fmt != "png" or arr.shape[2] != 1:
                raise RecordError("uint16 images can only be stored as 1-channel PNG")
            image = Image.fromarray(np.ascontiguousarray(arr[:, :, 0]).astype(np.uint16))
        elif dtype == "uint8":
            image = Image.fromarray(arr[:, :, 0] if arr.shape[2] == 1 else arr)
        else:
            raise RecordError(f"cannot encode {dtype} pixels as {fmt}; use encoding none")
        out = io.BytesIO()
        if fmt == "png":
            image.save(out, format="PNG", compress_level=1)
        else:
            image.save(out, format="JPEG", quality=quality)
        return cls(out.getvalue(), fmt, tuple(int(s) for s in arr.shape), dtype, arr if keep_array else None)


_PIL_IMAGE = None


def _pil_image() -> Any:
    """Pillow's Image module, imported once on first use."""
    global _PIL_IMAGE
    if _PIL_IMAGE is None:
        from PIL import Image

        _PIL_IMAGE = Image
    return _PIL_IMAGE


def decode_image_bytes(data: bytes, shape: tuple, dtype: str) -> np.ndarray:
    """Decode PNG/JPEG/other image bytes to an ``H×W×C`` array of ``dtype``.

    Raises:
        RecordError: The bytes do not decode to the expected shape.
    """
    Image = _pil_image()
    with Image.open(io.BytesIO(data)) as image:
        want_c = shape[2]
        mode = image.mode
        if dtype == "uint16":
            arr = np.asarray(image)
            if arr.dtype != np.uint16:
                arr = arr.astype(np.uint16)
        else:
            if want_c == 1 and mode != "L":
                image = image.convert("L")
            elif want_c == 3 and mode != "RGB":
                image = image.convert("RGB")
            arr = np.asarray(image)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.shape != tuple(shape):
        raise RecordError(f"encoded image decodes to shape {arr.shape}, record says {tuple(shape)}")
    return arr
