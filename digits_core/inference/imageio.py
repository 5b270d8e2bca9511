"""Reading inference inputs from files the way image datasets are built.

For models whose data plugin has no inference form, each input file goes
through the dataset's own image preprocessing before the engine's (mean,
crop, scaling):

1. read: PNG/JPEG/BMP/GIF/TIFF/WebP/PPM with Pillow (16-bit PNG/TIFF keep
   their 16 bits), or ``.npy`` arrays;
2. channels: to the dataset's C (RGB → gray with weights 0.299, 0.587,
   0.114; gray → RGB by repeating; transparency composited over white);
3. resize to the dataset's H×W with its ``resize_mode`` (DIGITS's
   ``squash``, ``crop``, ``fill``, ``half_crop``; see :func:`resize_image`);
4. cast to the dataset's feature dtype (rounded and clipped for integers).

``fill`` and ``half_crop`` pad with uniform noise as DIGITS did; inference
draws that noise from a generator seeded with 0, so repeated runs give the
same result.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..errors import InferenceError

#: File name suffixes read as images (``.npy`` is read as an array).
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm", ".npy"}
RESIZE_MODES = ("squash", "crop", "fill", "half_crop")


def is_image_file(path: str | os.PathLike) -> bool:
    """True when ``path``'s suffix is one of :data:`IMAGE_SUFFIXES`."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Read an image file (or ``.npy`` array) into an ``H×W×C`` array, keeping its bit depth.

    Raises:
        InferenceError: The file is missing or not a readable image; the message names it.
    """
    path = Path(path)
    if not path.is_file():
        raise InferenceError(f"Input {path} does not exist or is not a file.")
    if path.suffix.lower() == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InferenceError(f"Input {path} is not a readable .npy array: {exc}") from exc
    else:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(path) as image:
                image.load()
                if image.mode in ("I;16", "I;16B", "I;16L"):
                    array = np.asarray(image).astype(np.uint16)
                elif image.mode in ("I", "F"):
                    array = np.asarray(image)
                elif image.mode in ("L", "RGB"):
                    array = np.asarray(image)
                elif image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
                    # transparency composited over white, as DIGITS and the image data plugins do
                    rgba = image.convert("RGBA")
                    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
                    array = np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))
                else:
                    array = np.asarray(image.convert("RGB"))
        except (OSError, UnidentifiedImageError, ValueError) as exc:
            raise InferenceError(f"Input {path} is not a readable image: {exc}") from exc
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3:
        raise InferenceError(f"Input {path} has shape {array.shape}; expected H×W or H×W×C.")
    return array


def convert_channels(image: np.ndarray, channels: int) -> np.ndarray:
    """Convert an ``H×W×C`` image to ``channels`` channels (1 or 3; others must already match)."""
    have = image.shape[2]
    if have == 4 and channels != 4:
        image, have = image[:, :, :3], 3
    if have == channels:
        return image
    if channels == 1 and have == 3:
        gray = image.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
        return _cast(gray, image.dtype)[:, :, None]
    if channels == 3 and have == 1:
        return np.repeat(image, 3, axis=2)
    raise InferenceError(f"Cannot convert an image with {have} channels to {channels} channels.")


def _cast(values: np.ndarray, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.floor(np.asarray(values, dtype=np.float64) + 0.5), info.min, info.max).astype(dtype)
    return np.asarray(values).astype(dtype)


def _round(x: float) -> int:
    return int(math.floor(x + 0.5))


def _plain_resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of an ``H×W×C`` array (uint8 through Pillow's 8-bit path, others as float)."""
    from PIL import Image

    if image.shape[:2] == (height, width):
        return image
    if image.dtype == np.uint8 and image.shape[2] in (1, 3):
        pil = Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image)
        out = np.asarray(pil.resize((width, height), Image.Resampling.BILINEAR))
        return out[:, :, None] if out.ndim == 2 else out
    planes = [
        np.asarray(Image.fromarray(image[:, :, c].astype(np.float32), mode="F").resize((width, height), Image.Resampling.BILINEAR))
        for c in range(image.shape[2])
    ]
    return _cast(np.stack(planes, axis=2), image.dtype)


def _noise(shape, dtype, rng) -> np.ndarray:
    return rng.integers(0, 255, size=shape, endpoint=True).astype(dtype)


def resize_image(image: np.ndarray, height: int, width: int, mode: str = "squash",
                 rng: np.random.Generator | None = None) -> np.ndarray:
    """Resize an ``H×W×C`` image as DIGITS's ``resize_image`` did.

    With ``wr = src_w / width`` and ``hr = src_h / height``: nothing is done
    when the size matches; when ``wr == hr`` every mode is a plain resize.

    * ``squash``: plain bilinear resize, aspect ratio ignored.
    * ``crop``: keep the aspect ratio, scale so the shorter relative side
      fits, centre-crop the other.
    * ``fill``: keep the aspect ratio, scale so the longer relative side
      fits, pad both ends of the other with uniform noise (0–255); the
      resized short side grows by one pixel when needed for even padding.
    * ``half_crop``: scale by the average of the two ratios, centre-crop the
      side that is too long and noise-fill the side that is too short.

    Args:
        image: ``H×W×C`` array.
        height: Target height.
        width: Target width.
        mode: One of :data:`RESIZE_MODES`.
        rng: Noise generator for ``fill``/``half_crop`` (default: seeded with 0).

    Raises:
        InferenceError: Unknown mode.
    """
    if mode not in RESIZE_MODES:
        raise InferenceError(f'Unknown resize mode "{mode}"; choose one of {", ".join(RESIZE_MODES)}.')
    src_h, src_w, channels = image.shape
    if (src_h, src_w) == (height, width):
        return image
    wr, hr = src_w / width, src_h / height
    if mode == "squash" or wr == hr:
        return _plain_resize(image, height, width)
    rng = rng if rng is not None else np.random.default_rng(0)
    if mode == "crop":
        if wr > hr:
            rh, rw = height, _round(src_w / hr)
        else:
            rh, rw = _round(src_h / wr), width
        resized = _plain_resize(image, rh, rw)
        if wr > hr:
            start = _round((rw - width) / 2.0)
            return resized[:, start:start + width]
        start = _round((rh - height) / 2.0)
        return resized[start:start + height, :]
    if mode == "fill":
        if wr > hr:
            rw, rh = width, _round(src_h / wr)
            if (height - rh) % 2 == 1:
                rh += 1
        else:
            rh, rw = height, _round(src_w / hr)
            if (width - rw) % 2 == 1:
                rw += 1
        resized = _plain_resize(image, rh, rw)
    else:  # half_crop
        ratio = (wr + hr) / 2.0
        rw, rh = _round(src_w / ratio), _round(src_h / ratio)
        if wr > hr and (height - rh) % 2 == 1:
            rh += 1
        elif wr < hr and (width - rw) % 2 == 1:
            rw += 1
        resized = _plain_resize(image, rh, rw)
        if wr > hr:
            start = _round((rw - width) / 2.0)
            resized = resized[:, start:start + width]
        else:
            start = _round((rh - height) / 2.0)
            resized = resized[start:start + height, :]
    if wr > hr:
        pad = (height - resized.shape[0]) // 2
        noise = _noise((pad, width, channels), image.dtype, rng)
        return np.concatenate([noise, resized, _noise((pad, width, channels), image.dtype, rng)], axis=0)
    pad = (width - resized.shape[1]) // 2
    noise = _noise((height, pad, channels), image.dtype, rng)
    return np.concatenate([noise, resized, _noise((height, pad, channels), image.dtype, rng)], axis=1)


def prepare_image(image: np.ndarray, shape: tuple, dtype: str, resize_mode: str = "squash") -> np.ndarray:
    """Bring an image to a dataset's feature ``shape`` (H, W, C) and ``dtype``: channels, resize, cast."""
    height, width, channels = (int(v) for v in shape)
    image = convert_channels(image, channels)
    image = resize_image(image, height, width, resize_mode or "squash")
    if image.dtype != np.dtype(dtype):
        image = _cast(image, dtype)
    return image


def read_mask(path: str | os.PathLike, height: int, width: int, palette=None) -> np.ndarray:
    """Read a segmentation ground-truth image as an ``H×W`` int64 class map.

    Palette ('P') images give their indices; grayscale images their values;
    RGB images are mapped through ``palette`` (the dataset's
    ``color_palette``; an unknown colour raises). The map is resized to
    ``height × width`` by nearest neighbour.

    Raises:
        InferenceError: Unreadable file or a colour not in the palette.
    """
    from PIL import Image

    from .images import resize_nearest

    path = Path(path)
    if path.suffix.lower() == ".npy":
        classes = np.load(path, allow_pickle=False)
        if classes.ndim == 3:
            classes = classes[:, :, 0]
    else:
        try:
            with Image.open(path) as image:
                image.load()
                if image.mode in ("P", "L", "I", "I;16"):
                    classes = np.asarray(image).astype(np.int64)
                else:
                    rgb = np.asarray(image.convert("RGB")).astype(np.int64)
                    if not palette:
                        raise InferenceError(f"Ground-truth mask {path} is an RGB image but the dataset has no color_palette.")
                    codes = rgb[:, :, 0] * 65536 + rgb[:, :, 1] * 256 + rgb[:, :, 2]
                    lookup = {r * 65536 + g * 256 + b: i for i, (r, g, b) in enumerate(tuple(c)[:3] for c in palette)}
                    classes = np.full(codes.shape, -1, dtype=np.int64)
                    for code, index in lookup.items():
                        classes[codes == code] = index
                    if (classes < 0).any():
                        raise InferenceError(f"Ground-truth mask {path} has colours that are not in the dataset's color_palette.")
        except (OSError, ValueError) as exc:
            raise InferenceError(f"Ground-truth mask {path} is not a readable image: {exc}") from exc
    return resize_nearest(np.asarray(classes, dtype=np.int64), height, width)
