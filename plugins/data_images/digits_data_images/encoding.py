"""Turn one image file into the feature a dataset stores (shared by both plugins).

Encodings (the ``encoding`` form field):

* ``none``: the raw ``H×W×C`` array.
* ``png``: lossless PNG of the resized image (DIGITS's default). A source
  PNG that already has the target size and channels is decoded (to check it
  and for the mean image) and its own bytes are stored instead of a
  re-encoding: the decoded pixels are the same.
* ``jpg``: JPEG of the resized image (8-bit images only; 16-bit ones fall back to PNG).
* ``passthrough``: the original file's bytes, when the file is a PNG or
  JPEG that already has the target size and channels (and is not cut
  short); the worker then only reads the file and parses its header.
  Any other file is decoded, resized and stored as PNG.
"""

from __future__ import annotations

import io
import os
import struct

import numpy as np

from digits_core import EncodedImage

from .png_decode import decode_plain_png
from .resize import RESIZE_MODES, image_to_array, open_image, resize_image, seeded_rng

ENCODINGS = ("none", "png", "jpg", "passthrough")
#: Pillow format name -> EncodedImage format, for pass-through.
_PASSTHROUGH_FORMATS = {"PNG": "png", "JPEG": "jpg"}


#: First read of a file: most dataset images fit (and it stays under malloc's mmap threshold).
_FIRST_READ = 64 << 10


def read_file(path: str) -> bytes:
    """Read a file's bytes, with an error that names the file.

    Plain ``os.read`` calls: a Python file object costs more than reading a
    small image.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            chunks = [os.read(fd, _FIRST_READ)]
            while chunks[-1]:
                chunks.append(os.read(fd, 1 << 20))
        finally:
            os.close(fd)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    return chunks[0] if len(chunks) == 2 else b"".join(chunks)


def _looks_complete(data: bytes, fmt: str) -> bool:
    """Cheap check that an encoded file is not cut short (no decoding)."""
    if fmt == "JPEG":
        return data.rstrip(b"\x00")[-2:] == b"\xff\xd9"
    if fmt == "PNG":
        return b"IEND" in data[-16:]
    return False


_SOF_MARKERS = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def probe_header(data: bytes) -> tuple[str, int, int, str] | None:
    """Read format, width, height and Pillow mode from a PNG or JPEG header without Pillow.

    Only the layouts pass-through keeps are recognised: 8-bit grayscale or
    RGB and 16-bit grayscale PNGs (not interlaced, no palette or alpha), and
    8-bit baseline/progressive JPEGs with 1 or 3 components.

    Returns:
        ``("PNG" | "JPEG", width, height, "L" | "RGB" | "I;16")`` or ``None``.
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 33:
        width, height = struct.unpack(">II", data[16:24])
        depth, color, interlace = data[24], data[25], data[28]
        if interlace != 0:
            return None
        if color == 0 and depth == 8:
            return "PNG", width, height, "L"
        if color == 0 and depth == 16:
            return "PNG", width, height, "I;16"
        if color == 2 and depth == 8:
            return "PNG", width, height, "RGB"
        return None
    if data[:2] != b"\xff\xd8":
        return None
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:
            i += 2
            continue
        length = (data[i + 2] << 8) | data[i + 3]
        if marker in _SOF_MARKERS:
            if i + 10 > n or data[i + 4] != 8:
                return None
            height = (data[i + 5] << 8) | data[i + 6]
            width = (data[i + 7] << 8) | data[i + 8]
            components = data[i + 9]
            mode = {1: "L", 3: "RGB"}.get(components)
            return ("JPEG", width, height, mode) if mode and width and height else None
        if marker == 0xDA:  # start of scan before any frame header
            return None
        i += 2 + length
    return None


def passthrough(data: bytes, channels: int, width: int, height: int) -> EncodedImage | None:
    """Return the original bytes as an :class:`EncodedImage` when no decoding is needed, else ``None``.

    Only the header is parsed (:func:`probe_header`), and the end of the file
    is checked for the format's end marker, so a cut file is not kept.
    """
    probed = probe_header(data)
    if probed is None:
        return None
    fmt, w, h, mode = probed
    if (w, h) != (width, height):
        return None
    if channels == 1 and mode == "L":
        dtype = "uint8"
    elif channels == 1 and mode == "I;16":
        dtype = "uint16"
    elif channels == 3 and mode == "RGB":
        dtype = "uint8"
    else:
        return None
    if not _looks_complete(data, fmt):
        return None
    return EncodedImage(data, _PASSTHROUGH_FORMATS[fmt], (height, width, channels), dtype)


def load_resized(
    source, path: str, *, channels: int, width: int, height: int, resize_mode: str, seed: int
) -> np.ndarray:
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
    return resize_image(arr, height, width, resize_mode, rng=lambda: seeded_rng(seed, path))


def _decode_plain(data: bytes, path: str, channels: int) -> np.ndarray | None:
    """The pixels of a plain 8-bit PNG with ``channels`` channels (fast path), or ``None`` for Pillow to decode."""
    try:
        return decode_plain_png(data, channels)
    except ValueError as exc:
        raise ValueError(f"{path}: cannot decode image ({exc})") from None


def encode_image_file(
    path: str,
    *,
    channels: int,
    width: int,
    height: int,
    resize_mode: str = "squash",
    encoding: str = "png",
    seed: int = 0,
    jpg_quality: int = 90,
    data: bytes | None = None,
):
    """Return the stored feature of image ``path``: an ``H×W×C`` array or an :class:`EncodedImage`.

    ``data``, when given, is the file's content already fetched (e.g. from S3); ``path`` then only names it.

    Raises:
        ValueError: The file cannot be read or decoded (the message names it).
    """
    data = read_file(path) if data is None else data
    kept = None
    if encoding in ("passthrough", "png"):
        kept = passthrough(data, channels, width, height)
        if kept is not None and encoding == "passthrough":
            return kept
        if kept is not None and kept.format != "png":
            kept = None
    arr = _decode_plain(data, path, channels)
    if arr is None:
        arr = load_resized(
            io.BytesIO(data), path, channels=channels, width=width, height=height, resize_mode=resize_mode, seed=seed
        )
    elif arr.shape[:2] != (height, width) or resize_mode not in RESIZE_MODES:  # else resizing is a no-op
        arr = resize_image(arr, height, width, resize_mode, rng=lambda: seeded_rng(seed, path))
    if encoding == "none":
        return arr
    if kept is not None and arr.shape == kept.shape and arr.dtype.name == kept.dtype:
        # Already a PNG of the right size and mode: its bytes are what re-encoding would store
        # (PNG is lossless), so keep them; the decoded pixels still feed the exact mean image.
        kept.array = arr
        return kept
    fmt = "jpg" if encoding == "jpg" and arr.dtype == np.uint8 else "png"
    return EncodedImage.from_array(arr, fmt, quality=jpg_quality)
