"""Decode plain PNGs quickly: Pillow's own zlib decoder, without Pillow's per-file Python work.

Opening a small PNG through ``Image.open`` costs more Python (format
detection, a chunk parser object, tile set-up) than decoding it. For the
common dataset file, an 8-bit grayscale or RGB PNG that is not interlaced,
:func:`decode_plain_png` walks the chunks itself, checks their CRCs (as
Pillow does for the chunks before the image data) and hands the joined
``IDAT`` data to Pillow's ``zip`` decoder (``Image.frombytes``): the pixels
are Pillow's, bit for bit. Any other file (palette, alpha, 16-bit,
interlaced, animated, malformed, or larger than Pillow's decompression-bomb
limit) gives ``None`` and the caller decodes it with ``Image.open`` as
before, so errors and conversions stay Pillow's.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: PNG colour type -> (Pillow mode, channels) for the layouts decoded here (bit depth 8).
_PLAIN = {0: ("L", 1), 2: ("RGB", 3)}
_IHDR = struct.Struct(">IIBBBBB")
_CHUNK_HEAD = struct.Struct(">I4s")
_CRC = struct.Struct(">I")
#: Chunks that change what the image is (animation): such files go through Pillow.
_REFUSED = {b"acTL", b"fcTL", b"fdAT", b"PLTE"}

_IMAGE = None


def _image_module():
    global _IMAGE
    if _IMAGE is None:
        from PIL import Image

        _IMAGE = Image
    return _IMAGE


def decode_plain_png(data: bytes, channels: int) -> np.ndarray | None:
    """Return the ``H×W×channels`` uint8 pixels of a plain PNG, or ``None`` to let Pillow decode it.

    Args:
        data: The file's bytes.
        channels: The channels wanted (1 or 3): a PNG stored otherwise needs a
            conversion and gives ``None``.

    Raises:
        ValueError: A plain PNG whose image data is cut short or corrupt
            (Pillow's message; the caller adds the file name).
    """
    if data[:8] != _SIGNATURE or data[12:16] != b"IHDR" or len(data) < 33:
        return None
    width, height, depth, color, compression, filtering, interlace = _IHDR.unpack_from(data, 16)
    plain = _PLAIN.get(color)
    if plain is None or plain[1] != channels or depth != 8 or compression or filtering or interlace:
        return None
    Image = _image_module()
    if not width or not height or (Image.MAX_IMAGE_PIXELS and width * height > Image.MAX_IMAGE_PIXELS):
        return None
    idat = []
    pos, end = 8, len(data)
    while pos + 12 <= end:
        length, kind = _CHUNK_HEAD.unpack_from(data, pos)
        body_end = pos + 8 + length
        if body_end + 4 > end or kind in _REFUSED:
            return None
        if kind == b"IDAT":
            idat.append(data[pos + 8 : body_end])
        elif zlib.crc32(memoryview(data)[pos + 4 : body_end]) != _CRC.unpack_from(data, body_end)[0]:
            return None  # a damaged chunk: Pillow names the problem
        pos = body_end + 4
        if kind == b"IEND":
            break
    if not idat:
        return None
    mode = plain[0]
    image = Image.frombytes(mode, (width, height), b"".join(idat), "zip", mode)
    return np.frombuffer(image.tobytes(), np.uint8).reshape(height, width, channels)  # read-only, as np.asarray(image)
