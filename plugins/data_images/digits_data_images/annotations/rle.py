"""Run-length encoded masks: COCO RLE (compressed strings or count lists) and Label Studio brushes.

COCO RLE (``pycocotools.mask``): run lengths over the image in column-major
order, starting with a run of 0s; the compressed form writes each count (after
the second, as the difference to the count two before) in 5-bit groups as
characters from ``'0'`` (48), bit 0x20 meaning "more groups follow" and bit
0x10 of the last group the sign.

Label Studio brush RLE (``value.rle``, a list of bytes; the rle-pack format
label-studio-converter reads): a bit stream, most significant bit first:
32 bits the number of values (``height × width × 4``, RGBA), 5 bits the word
size − 1, four 4-bit run-length sizes − 1, then blocks: 1 bit (1 = a run of
one repeated value), 2 bits choosing a run-length size, that many bits the
block length − 1, then one word (a run) or one word per value. The mask is
the alpha channel (non-zero = labelled).
"""

from __future__ import annotations

import numpy as np


def coco_counts(counts) -> list[int]:
    """Run lengths from a COCO ``counts`` value (a compressed string or a list of ints).

    Raises:
        ValueError: Not a string or a list of non-negative ints, or a malformed string.
    """
    if isinstance(counts, list):
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise ValueError("RLE counts must be non-negative integers")
        return list(counts)
    if isinstance(counts, bytes):
        counts = counts.decode("ascii", "replace")
    if not isinstance(counts, str):
        raise ValueError("RLE counts must be a string or a list of integers")
    result: list[int] = []
    position = 0
    text = counts.encode("ascii", "replace")
    while position < len(text):
        value = shift = 0
        more = True
        while more:
            if position >= len(text):
                raise ValueError("RLE string ends inside a count")
            c = text[position] - 48
            if c < 0 or c > 63:
                raise ValueError("RLE string holds a character outside '0'..'o'")
            value |= (c & 0x1F) << (5 * shift)
            more = bool(c & 0x20)
            position += 1
            shift += 1
            if not more and c & 0x10:
                value |= -1 << (5 * shift)
        if len(result) > 2:
            value += result[-2]
        if value < 0:
            raise ValueError("RLE string decodes to a negative count")
        result.append(value)
    return result


def decode_coco(height: int, width: int, counts: list[int]) -> np.ndarray:
    """An ``H×W`` bool mask from COCO run lengths.

    Raises:
        ValueError: The runs do not cover exactly ``height × width`` pixels.
    """
    total = sum(counts)
    if total != height * width:
        raise ValueError(f"RLE covers {total} pixels, the image has {height * width} ({width}x{height})")
    values = np.zeros(len(counts), bool)
    values[1::2] = True
    flat = np.repeat(values, counts)
    return flat.reshape(width, height).T


def encode_coco(mask: np.ndarray) -> list[int]:
    """Uncompressed COCO run lengths of a bool ``H×W`` mask (column-major, starting with 0s)."""
    flat = np.asarray(mask, bool).T.reshape(-1)
    if flat.size == 0:
        return [0]
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate([[0], changes, [flat.size]])
    runs = np.diff(bounds).tolist()
    return ([0] + runs) if flat[0] else runs


class _Bits:
    def __init__(self, data: bytes):
        self.bits = np.unpackbits(np.frombuffer(data, np.uint8))
        self.position = 0

    def read(self, size: int) -> int:
        end = self.position + size
        if end > self.bits.size:
            raise ValueError("brush RLE ends early")
        value = 0
        for bit in self.bits[self.position : end]:
            value = (value << 1) | int(bit)
        self.position = end
        return value


def brush_length(data: bytes) -> int:
    """The number of values a Label Studio brush RLE declares (its first 32 bits)."""
    if len(data) < 4:
        raise ValueError("brush RLE is shorter than its header")
    return int.from_bytes(bytes(data[:4]), "big")


def decode_brush(data: bytes, height: int, width: int) -> np.ndarray:
    """An ``H×W`` bool mask from a Label Studio brush RLE.

    Raises:
        ValueError: The stream declares another size than ``height × width × 4``, or is malformed.
    """
    total = height * width * 4
    if brush_length(data) != total:
        raise ValueError(
            f"brush RLE holds {brush_length(data)} values, the image needs {total} ({width}x{height} RGBA)"
        )
    bits = _Bits(bytes(data))
    bits.read(32)
    word = bits.read(5) + 1
    sizes = [bits.read(4) + 1 for _ in range(4)]
    out = np.zeros(total, np.uint32)
    i = 0
    while i < total:
        repeat = bits.read(1)
        j = i + 1 + bits.read(sizes[bits.read(2)])
        if j > total:
            raise ValueError("brush RLE runs past the image")
        if repeat:
            out[i:j] = bits.read(word)
        else:
            for k in range(i, j):
                out[k] = bits.read(word)
        i = j
    return out.reshape(height, width, 4)[:, :, 3] > 0
