"""The one image preprocessing of DIGITS Core: decode, channels, DIGITS's four resize modes, cast.

Dataset plugins (``digits_data_images`` re-exports these names from
``digits_data_images.resize``) and inference (:mod:`digits_core.inference.imageio`,
hence ``digits infer``, the web UI and the API) call these functions, so a
model is served exactly the pixels it was trained on. Public API::

    from digits_core.resize import RESIZE_MODES, open_image, image_to_array, convert_channels,
                                   resize_image, resize_plan, seeded_rng, cast_to, prepare_array,
                                   pad_value

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

**Numbers.** Resizing is Pillow's bilinear filter (antialiased when
shrinking), in two passes, horizontal then vertical (so exported models
rebuild it exactly): uint8 gray/RGB through Pillow's 8-bit path, every other dtype
per channel in float32, then rounded half to even (``np.rint``) and clipped
for integer dtypes. Intermediate sizes and crop offsets round half away from
zero, as DIGITS (Python 2's ``round``). Noise pixels are uniform over the
dtype's range (0–255 for uint8, as DIGITS; 0–65535 for uint16); float images
are padded with zeros; label masks (``is_label``) are resized with nearest
neighbour and padded with class 0. Noise comes from a generator the caller
passes (:func:`seeded_rng` gives one per file and seed, so a dataset rebuilt
from the same files is identical). Inference and exported models pad with a
constant instead (``constant_pad``: :func:`pad_value`, mid-grey 128 / 32768,
0 for floats), so an export, which cannot replay numpy's generator, and
``digits infer`` give the same pixels.

**Channels.** RGB → grayscale with Pillow's ``convert("L")`` weights (0.299,
0.587, 0.114; uint8 arrays go through Pillow itself, so the bytes match the
decode path); grayscale → RGB repeats the channel; 16-bit grayscale asked for
3 channels becomes 8-bit (``value >> 8``) first; transparency is composited
over white, as DIGITS did.
"""

from __future__ import annotations

import io
import math
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO, NamedTuple

import numpy as np

RESIZE_MODES = ("squash", "crop", "fill", "half_crop")
#: Pillow modes read as 16-bit grayscale (kept as uint16).
MODES_16BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I")

_PIL_IMAGE = None


def _pil() -> Any:
    """Pillow's Image module, imported on first use (kept out of module import time)."""
    global _PIL_IMAGE
    if _PIL_IMAGE is None:
        from PIL import Image

        _PIL_IMAGE = Image
    return _PIL_IMAGE


# -- decoding and channels ---------------------------------------------------------------------


def open_image(source: str | bytes | BinaryIO) -> Any:
    """Open an image file (path, bytes or file object) with Pillow and load its pixels.

    Raises:
        ValueError: The file is not an image Pillow can read, or is truncated; the message says which.
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


def _flatten_alpha(image: Any) -> Any:
    Image = _pil()
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def image_to_array(image: Any, channels: int | None) -> np.ndarray:
    """Convert a Pillow image to an ``H×W×C`` array with ``channels`` (1 or 3; ``None``: as stored).

    8-bit images give uint8. 16-bit grayscale images give uint16 (asked for 3
    channels they become 8-bit, ``value >> 8``, repeated). ``None`` keeps gray
    as 1 channel and gives RGB otherwise (inference, before :func:`convert_channels`).

    Raises:
        ValueError: Bad ``channels``, a 32-bit image outside 0..65535, or a float image.
    """
    if channels not in (1, 3, None):
        raise ValueError(f"channels must be 1 or 3, not {channels}")
    mode = image.mode
    if mode in MODES_16BIT:
        arr = np.asarray(image)
        if mode == "I" and arr.size and (arr.min() < 0 or arr.max() > 65535):
            raise ValueError("32-bit integer image with values outside 0..65535")
        return convert_channels(arr.astype(np.uint16)[:, :, None], channels or 1)
    if mode == "F":
        raise ValueError("floating-point image files are not supported; store float data as .npy arrays")
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in image.info):
        image, mode = _flatten_alpha(image), "RGB"
    if channels is None:
        channels = 1 if mode in ("L", "1") else 3
    if channels == 1:
        if mode != "L":
            image = image.convert("L") if mode in ("RGB", "1") else image.convert("RGB").convert("L")
        return np.asarray(image)[:, :, None]
    if mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image)


def convert_channels(arr: np.ndarray, channels: int) -> np.ndarray:
    """Convert an ``H×W×C`` array to ``channels`` channels, exactly as :func:`image_to_array` does.

    4 channels lose the 4th (already composited); 3 → 1 uses Pillow's
    ``convert("L")`` (uint8) or its weights rounded half to even (other
    dtypes); 1 → 3 repeats (uint16 becomes ``>> 8`` uint8 first).

    Raises:
        ValueError: A conversion that does not exist (e.g. 2 → 3 channels).
    """
    if arr.ndim == 2:
        arr = arr[:, :, None]
    have = arr.shape[2]
    if have == 4 and channels != 4:
        arr, have = arr[:, :, :3], 3
    if have == channels:
        return arr
    if channels == 1 and have == 3:
        if arr.dtype == np.uint8:
            return np.asarray(_pil().fromarray(np.ascontiguousarray(arr)).convert("L"))[:, :, None]
        gray = arr.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
        return cast_to(gray, arr.dtype)[:, :, None]
    if channels == 3 and have == 1:
        if arr.dtype == np.uint16:
            arr = (arr >> 8).astype(np.uint8)
        return np.repeat(arr, 3, axis=2)
    raise ValueError(f"cannot convert an image with {have} channels to {channels} channels")


def cast_to(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Cast to ``dtype``; integers are rounded half to even and clipped to the dtype's range."""
    dtype = np.dtype(dtype)
    values = np.asarray(values)
    if values.dtype == dtype:
        return values
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.rint(values.astype(np.float64)), info.min, info.max).astype(dtype)
    return values.astype(dtype)


# -- resizing ------------------------------------------------------------------------------------


def _round(value: float) -> int:
    """Round half away from zero, as Python 2's ``round`` in DIGITS did (Python 3 rounds half to even)."""
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


class ResizePlan(NamedTuple):
    """How :func:`resize_image` gets from ``src`` to the target size.

    Attributes:
        resize_h, resize_w: The intermediate (plain bilinear) size.
        crop_y, crop_x: Centre-crop offsets into the intermediate image (0: none).
        pad_y, pad_x: Rows / columns of padding added at *each* end (0: none).
    """

    resize_h: int
    resize_w: int
    crop_y: int
    crop_x: int
    pad_y: int
    pad_x: int


def resize_plan(src_h: int, src_w: int, height: int, width: int, mode: str = "squash") -> ResizePlan:
    """The geometry of resizing ``src_w × src_h`` to ``width × height`` with ``mode`` (see the module docstring).

    Raises:
        ValueError: Unknown mode or a size that is not positive.
    """
    if mode not in RESIZE_MODES:
        raise ValueError(f'unknown resize mode "{mode}" (choose from {", ".join(RESIZE_MODES)})')
    if height < 1 or width < 1:
        raise ValueError(f"target size {width}x{height} is not positive")
    wr, hr = src_w / width, src_h / height
    if (src_h, src_w) == (height, width) or mode == "squash" or wr == hr:
        return ResizePlan(height, width, 0, 0, 0, 0)
    if mode == "crop":
        if wr > hr:
            rh, rw = height, _round(src_w / hr)
            return ResizePlan(rh, rw, 0, _round((rw - width) / 2.0), 0, 0)
        rh, rw = _round(src_h / wr), width
        return ResizePlan(rh, rw, _round((rh - height) / 2.0), 0, 0, 0)
    crop_y = crop_x = 0
    if mode == "fill":
        if wr > hr:
            rw, rh = width, _round(src_h / wr)
            rh += (height - rh) % 2
        else:
            rh, rw = height, _round(src_w / hr)
            rw += (width - rw) % 2
    else:  # half_crop
        ratio = (wr + hr) / 2.0
        rw, rh = _round(src_w / ratio), _round(src_h / ratio)
        if wr > hr:
            rh += (height - rh) % 2
            crop_x = _round((rw - width) / 2.0)
        else:
            rw += (width - rw) % 2
            crop_y = _round((rh - height) / 2.0)
    if wr > hr:
        return ResizePlan(rh, rw, crop_y, crop_x, max(0, (height - rh) // 2), 0)
    return ResizePlan(rh, rw, crop_y, crop_x, 0, max(0, (width - rw) // 2))


def _resize_array(arr: np.ndarray, height: int, width: int, nearest: bool = False) -> np.ndarray:
    """Resize an ``H×W×C`` array (bilinear, or nearest for labels) with Pillow."""
    Image = _pil()
    if arr.shape[:2] == (height, width):
        return arr
    resample = Image.NEAREST if nearest else Image.BILINEAR

    def resize(image: Any) -> Any:
        if nearest:
            return image.resize((width, height), resample)
        # Two explicit passes, horizontal first: Pillow picks its own pass order for a 2-D resize, which
        # an exported graph (digits_core.inference.export_graph) could not follow bit for bit.
        return image.resize((width, image.size[1]), resample).resize((width, height), resample)

    if arr.dtype == np.uint8 and arr.shape[2] in (1, 3):
        src = arr[:, :, 0] if arr.shape[2] == 1 else arr
        out = np.asarray(resize(Image.fromarray(np.ascontiguousarray(src))))
        return out.reshape(height, width, arr.shape[2])
    channels = []
    for c in range(arr.shape[2]):
        plane = np.ascontiguousarray(arr[:, :, c])
        if nearest:
            image = Image.fromarray(plane.astype(np.int32))
            channels.append(np.asarray(resize(image)).astype(arr.dtype))
        else:
            image = Image.fromarray(plane.astype(np.float32))
            channels.append(cast_to(np.asarray(resize(image)), arr.dtype))
    return np.stack(channels, axis=2)


def _noise(rng: np.random.Generator, shape: tuple, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return rng.integers(0, 256, shape, dtype=np.uint16).astype(np.uint8)
    if dtype == np.uint16:
        return rng.integers(0, 65536, shape, dtype=np.uint32).astype(np.uint16)
    return np.zeros(shape, dtype)


def resize_image(
    arr: np.ndarray,
    height: int,
    width: int,
    resize_mode: str = "squash",
    *,
    rng: np.random.Generator | Callable[[], np.random.Generator] | None = None,
    is_label: bool = False,
    constant_pad: bool = False,
) -> np.ndarray:
    """Resize an ``H×W×C`` array to ``height × width`` with a DIGITS resize mode.

    Args:
        arr: The pixels (uint8, uint16, float32; for labels any integer dtype); ``H×W`` is taken as 1 channel.
        height: Target height.
        width: Target width.
        resize_mode: ``squash``, ``crop``, ``fill`` or ``half_crop``.
        rng: Noise source for ``fill``/``half_crop`` (default: seeded with 0), or
            a function returning one, called only when noise is needed.
        is_label: Resize with nearest neighbour and pad with zeros (masks).
        constant_pad: Pad ``fill``/``half_crop`` with :func:`pad_value` (mid-grey) instead of
            noise: deterministic, as inference and exported models do.

    Returns:
        The resized ``height × width × C`` array, same dtype.

    Raises:
        ValueError: Unknown resize mode or bad size.
    """
    src_h, src_w = np.shape(arr)[:2]
    plan = resize_plan(src_h, src_w, height, width, resize_mode)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.shape[:2] == (height, width):
        return arr
    out = _resize_array(arr, plan.resize_h, plan.resize_w, is_label)
    if plan.crop_x or out.shape[1] > width:
        out = out[:, plan.crop_x : plan.crop_x + width]
    if plan.crop_y or out.shape[0] > height:
        out = out[plan.crop_y : plan.crop_y + height, :]
    if not (plan.pad_x or plan.pad_y):
        return np.ascontiguousarray(out)
    if constant_pad:
        rng = None
    elif rng is None:
        rng = np.random.default_rng(0)
    elif not isinstance(rng, np.random.Generator):
        rng = rng()  # a factory: seeding costs more than most resizes, so only when noise is needed
    channels = arr.shape[2]

    def fill(shape: tuple) -> np.ndarray:
        if is_label:
            return np.zeros(shape, out.dtype)
        if rng is None:
            return np.full(shape, pad_value(out.dtype), out.dtype)
        return _noise(rng, shape, out.dtype)

    if plan.pad_y:
        pad = (plan.pad_y, width, channels)
        out = np.concatenate((fill(pad), out, fill(pad)), axis=0)
    else:
        pad = (height, plan.pad_x, channels)
        out = np.concatenate((fill(pad), out, fill(pad)), axis=1)
    return np.ascontiguousarray(out)


def pad_value(dtype: Any) -> int | float:
    """The constant ``fill``/``half_crop`` padding of inference and exports: mid-grey (128, 32768), 0 for floats."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.unsignedinteger):
        return (int(np.iinfo(dtype).max) + 1) // 2
    return 0


def seeded_rng(seed: int, key: str) -> np.random.Generator:
    """Return a noise generator that depends only on ``seed`` and ``key`` (e.g. the file path)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(key.encode("utf-8", "surrogateescape"))])


def prepare_array(
    arr: np.ndarray,
    shape: tuple,
    dtype: Any,
    resize_mode: str = "squash",
    *,
    rng: np.random.Generator | Callable[[], np.random.Generator] | None = None,
    constant_pad: bool = False,
) -> np.ndarray:
    """Bring an array to a dataset's feature ``shape`` (H, W, C) and ``dtype``: channels, resize, cast.

    The same steps, in the same order, as a dataset plugin applies to an image file
    (``constant_pad``: see :func:`resize_image`).
    """
    height, width, channels = (int(v) for v in shape)
    arr = convert_channels(arr, channels)
    arr = resize_image(arr, height, width, resize_mode or "squash", rng=rng, constant_pad=constant_pad)
    return cast_to(arr, dtype)


__all__ = [
    "MODES_16BIT",
    "RESIZE_MODES",
    "ResizePlan",
    "cast_to",
    "convert_channels",
    "image_to_array",
    "open_image",
    "pad_value",
    "prepare_array",
    "resize_image",
    "resize_plan",
    "seeded_rng",
]
