"""Turn one image file into the feature a dataset stores (shared by both plugins).

Encodings (the ``encoding`` form field):

* ``none``: the raw ``H×W×C`` array.
* ``png``: lossless PNG of the resized image (DIGITS's default).
* ``jpg``: JPEG of the resized image (8-bit images only; 16-bit ones fall back to PNG).
* ``passthrough``: the original file's bytes, when the file is a PNG or
  JPEG that already has the target size and channels (and is not cut
  short); the worker then only reads the file and parses its header.
  Any other file is decoded, resized and stored as PNG.
"""

from __future__ import annotations

import io

import numpy as np

from digits_core import EncodedImage

from .resize import MODES_16BIT, image_to_array, open_image, resize_image, seeded_rng

ENCODINGS = ("none", "png", "jpg", "passthrough")
#: Pillow format name -> EncodedImage format, for pass-through.
_PASSTHROUGH_FORMATS = {"PNG": "png", "JPEG": "jpg"}


def read_file(path: str) -> bytes:
    """Read a file's bytes, with an error that names the file."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read file ({exc.strerror or exc})") from None


def _looks_complete(data: bytes, fmt: str) -> bool:
    """Cheap check that an encoded file is not cut short (no decoding)."""
    if fmt == "JPEG":
        return data.rstrip(b"\x00")[-2:] == b"\xff\xd9"
    if fmt == "PNG":
        return b"IEND" in data[-16:]
    return False


def passthrough(data: bytes, channels: int, width: int, height: int) -> EncodedImage | None:
    """Return the original bytes as an :class:`EncodedImage` when no decoding is needed, else ``None``."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:  # parses the header only
            fmt, mode, size = image.format, image.mode, image.size
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None
    if fmt not in _PASSTHROUGH_FORMATS or size != (width, height):
        return None
    if channels == 1 and mode == "L":
        dtype = "uint8"
    elif channels == 1 and mode in MODES_16BIT and fmt == "PNG" and mode != "I":
        dtype = "uint16"
    elif channels == 3 and mode == "RGB":
        dtype = "uint8"
    else:
        return None
    if not _looks_complete(data, fmt):
        return None
    return EncodedImage(data, _PASSTHROUGH_FORMATS[fmt], (height, width, channels), dtype)


def load_resized(source, path: str, *, channels: int, width: int, height: int, resize_mode: str,
                 seed: int) -> np.ndarray:
    """Decode, convert and resize one image to ``height × width × channels``.

    Raises:
        ValueError: Unreadable image; the message names ``path``.
    """
    try:
        image = open_image(source)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    try:
        arr = image_to_array(image, channels)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return resize_image(arr, height, width, resize_mode, rng=seeded_rng(seed, path))


def encode_image_file(path: str, *, channels: int, width: int, height: int, resize_mode: str = "squash",
                      encoding: str = "png", seed: int = 0, jpg_quality: int = 90, data: bytes | None = None):
    """Return the stored feature of image ``path``: an ``H×W×C`` array or an :class:`EncodedImage`.

    ``data``, when given, is the file's content already fetched (e.g. from S3); ``path`` then only names it.

    Raises:
        ValueError: The file cannot be read or decoded (the message names it).
    """
    data = read_file(path) if data is None else data
    if encoding == "passthrough":
        kept = passthrough(data, channels, width, height)
        if kept is not None:
            return kept
    arr = load_resized(io.BytesIO(data), path, channels=channels, width=width, height=height,
                       resize_mode=resize_mode, seed=seed)
    if encoding == "none":
        return arr
    fmt = "jpg" if encoding == "jpg" and arr.dtype == np.uint8 else "png"
    return EncodedImage.from_array(arr, fmt, quality=jpg_quality)
