"""Image loading, channel conversion and DIGITS's four resize modes.

``resize_image`` follows DIGITS's ``digits.utils.image.resize_image``. With
``wr = src_w / w`` and ``hr = src_h / h`` for a target of ``w × h``:

* nothing is done when the size already matches; when ``wr == hr`` every
  mode is a plain resize;
* ``squash``: bilinear resize to ``w × h``, aspect ratio ignored (default);
* ``crop``: keep the aspect ratio, scale so the *shorter* relative side fits
  (by ``min(wr, hr)``), then centre-crop the longer side;
* ``fill``: keep the aspect ratio, scale so the *longer* relative side fits
  (by ``max(wr, hr)``), bump the short side by one pixel when needed so the
  padding splits evenly, then pad both ends with uniform random noise;
* ``half_crop``: keep the aspect ratio, scale by the average of the two
  ratios, centre-crop the side that is too long and noise-fill the side that
  is too short.

Noise pixels are uniform over the dtype's range (0–255 for 8-bit images, as
DIGITS; 0–65535 for 16-bit ones) and come from a generator the caller seeds,
so a dataset rebuilt from the same files is identical. Labels (segmentation
masks) are resized with nearest neighbour and padded with class 0.

Rounding of the intermediate sizes and crop offsets is half away from zero,
as in DIGITS (Python 2's ``round``).

Channel conversion: RGB → grayscale with the weights 0.299, 0.587, 0.114
(Pillow's ``convert("L")``), grayscale → RGB by repeating the channel;
images with transparency are composited over white first, as DIGITS did.
"""

from __future__ import annotations

import io
import math
from typing import BinaryIO

import numpy as np

RESIZE_MODES = ("squash", "crop", "fill", "half_crop")
#: Pillow modes read as 16-bit grayscale (kept as uint16).
MODES_16BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I")


_PIL_IMAGE = None


def _pil():
    """Pillow's Image module, imported on first use (kept out of module import time)."""
    global _PIL_IMAGE
    if _PIL_IMAGE is None:
        from PIL import Image

        _PIL_IMAGE = Image
    return _PIL_IMAGE


def open_image(source: str | bytes | BinaryIO):
    """Open an image file (path, bytes or file object) with Pillow and load its pixels.

    Raises:
        ValueError: The file is not an image Pillow can read, or is truncated;
            the message says which.
    """
    Image = _pil()
    stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    try:
        image = Image.open(stream)
        image.load()
    except Image.UnidentifiedImageError:
        raise ValueError("not an image file Pillow can read") from None
    except (OSError, SyntaxError) as exc:
        raise ValueError(f"cannot decode image ({exc})") from None
    return image


def image_to_array(image, channels: int) -> np.ndarray:
    """Convert a Pillow image to an ``H×W×C`` array with ``channels`` (1 or 3).

    8-bit images give uint8. 16-bit grayscale images give uint16 when
    ``channels`` is 1; asked for 3 channels they are scaled to 8 bits first
    (``value >> 8``) and repeated.

    Args:
        image: A loaded Pillow image.
        channels: 1 (grayscale) or 3 (RGB).
    """
    Image = _pil()
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, not {channels}")
    mode = image.mode
    if mode in MODES_16BIT:
        arr = np.asarray(image)
        if mode == "I":
            if arr.size and (arr.min() < 0 or arr.max() > 65535):
                raise ValueError("32-bit integer image with values outside 0..65535")
        arr = arr.astype(np.uint16)
        if channels == 1:
            return arr[:, :, None]
        arr8 = (arr >> 8).astype(np.uint8)
        return np.repeat(arr8[:, :, None], 3, axis=2)
    if mode == "F":
        raise ValueError("floating-point images are not supported by this plugin")
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(background, rgba).convert("RGB")
        mode = "RGB"
    if channels == 1:
        if mode != "L":
            image = image.convert("L") if mode in ("RGB", "1") else image.convert("RGB").convert("L")
        return np.asarray(image)[:, :, None]
    if mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image)


def _resize_array(arr: np.ndarray, height: int, width: int, nearest: bool = False) -> np.ndarray:
    """Resize an ``H×W×C`` array (bilinear, or nearest for labels) with Pillow."""
    Image = _pil()
    resample = Image.NEAREST if nearest else Image.BILINEAR
    if arr.dtype == np.uint8 and arr.shape[2] in (1, 3):
        src = arr[:, :, 0] if arr.shape[2] == 1 else arr
        out = np.asarray(Image.fromarray(src).resize((width, height), resample))
        return out.reshape(height, width, arr.shape[2])
    channels = []
    for c in range(arr.shape[2]):
        plane = arr[:, :, c]
        if nearest:
            image = Image.fromarray(plane.astype(np.int32))
            channels.append(np.asarray(image.resize((width, height), resample)).astype(arr.dtype))
        else:
            image = Image.fromarray(plane.astype(np.float32))
            res = np.asarray(image.resize((width, height), resample))
            if np.issubdtype(arr.dtype, np.integer):
                info = np.iinfo(arr.dtype)
                res = np.clip(np.rint(res), info.min, info.max)
            channels.append(res.astype(arr.dtype))
    return np.stack(channels, axis=2)


def _round(value: float) -> int:
    """Round half away from zero, as Python 2's ``round`` in DIGITS did (Python 3 rounds half to even)."""
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _noise(rng: np.random.Generator, shape: tuple, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint16).astype(np.uint8)
    if dtype == np.uint16:
        return rng.integers(0, 65536, shape, dtype=np.uint32).astype(np.uint16)
    return np.zeros(shape, dtype)


def resize_image(arr: np.ndarray, height: int, width: int, resize_mode: str = "squash", *,
                 rng=None, is_label: bool = False) -> np.ndarray:
    """Resize an ``H×W×C`` array to ``height × width`` with a DIGITS resize mode.

    Args:
        arr: The pixels (uint8 or uint16; for labels any integer dtype).
        height: Target height.
        width: Target width.
        resize_mode: ``squash``, ``crop``, ``fill`` or ``half_crop``.
        rng: Noise source for ``fill``/``half_crop`` (default: seeded with 0), or
            a function returning one, called only when noise is needed.
        is_label: Resize with nearest neighbour and pad with zeros (masks).

    Returns:
        The resized ``height × width × C`` array, same dtype.

    Raises:
        ValueError: Unknown resize mode or bad size.
    """
    if resize_mode not in RESIZE_MODES:
        raise ValueError(f'unknown resize mode "{resize_mode}" (choose from {", ".join(RESIZE_MODES)})')
    if height < 1 or width < 1:
        raise ValueError(f"target size {width}x{height} is not positive")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    src_h, src_w, channels = arr.shape
    if (src_h, src_w) == (height, width):
        return arr
    width_ratio = src_w / width
    height_ratio = src_h / height
    if resize_mode == "squash" or width_ratio == height_ratio:
        return _resize_array(arr, height, width, is_label)
    if resize_mode == "crop":
        if width_ratio > height_ratio:
            resize_height = height
            resize_width = _round((src_w / height_ratio))
        else:
            resize_width = width
            resize_height = _round((src_h / width_ratio))
        out = _resize_array(arr, resize_height, resize_width, is_label)
        if width_ratio > height_ratio:
            start = _round(((resize_width - width) / 2.0))
            return np.ascontiguousarray(out[:, start:start + width])
        start = _round(((resize_height - height) / 2.0))
        return np.ascontiguousarray(out[start:start + height, :])
    if resize_mode == "fill":
        if width_ratio > height_ratio:
            resize_width = width
            resize_height = _round((src_h / width_ratio))
            if (height - resize_height) % 2 == 1:
                resize_height += 1
        else:
            resize_height = height
            resize_width = _round((src_w / height_ratio))
            if (width - resize_width) % 2 == 1:
                resize_width += 1
        out = _resize_array(arr, resize_height, resize_width, is_label)
    else:  # half_crop
        new_ratio = (width_ratio + height_ratio) / 2.0
        resize_width = _round((src_w / new_ratio))
        resize_height = _round((src_h / new_ratio))
        if width_ratio > height_ratio and (height - resize_height) % 2 == 1:
            resize_height += 1
        elif width_ratio < height_ratio and (width - resize_width) % 2 == 1:
            resize_width += 1
        out = _resize_array(arr, resize_height, resize_width, is_label)
        if width_ratio > height_ratio:
            start = _round(((resize_width - width) / 2.0))
            out = out[:, start:start + width]
        else:
            start = _round(((resize_height - height) / 2.0))
            out = out[start:start + height, :]
    if rng is None:
        rng = np.random.default_rng(0)
    elif not isinstance(rng, np.random.Generator):
        rng = rng()  # a factory: seeding costs more than most resizes, so only when noise is needed
    fill = (lambda shape: np.zeros(shape, out.dtype)) if is_label else (lambda shape: _noise(rng, shape, out.dtype))
    if width_ratio > height_ratio:
        padding = (height - out.shape[0]) // 2
        if padding > 0:
            out = np.concatenate((fill((padding, width, channels)), out, fill((padding, width, channels))), axis=0)
    else:
        padding = (width - out.shape[1]) // 2
        if padding > 0:
            out = np.concatenate((fill((height, padding, channels)), out, fill((height, padding, channels))), axis=1)
    return np.ascontiguousarray(out)


def seeded_rng(seed: int, key: str) -> np.random.Generator:
    """Return a noise generator that depends only on ``seed`` and ``key`` (e.g. the file path)."""
    import zlib

    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(key.encode("utf-8", "surrogateescape"))])
