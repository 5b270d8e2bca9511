"""Sizes an input may declare before anything is allocated for it: image pixels, volume voxels, DICOM frames.

A small file can declare a huge array: a 220 KB ``.nii.gz`` of zeros whose
header says 768×768×384, a 274 KB deflated DICOM slice of 30,000² pixels, a
PNG of 7,500² that compresses to 200 KB. Every reader here asks "is this too
big?" from the header alone, before the decoder allocates anything, and
refuses with a message that names the limit and the setting that raises it.

The limits are server settings, read from the environment of the process
that reads the file (``digits serve`` passes its environment to its
inference worker and to the processes that build datasets), never from a
request:

======================================  ===============  ============================================
setting (environment variable)          default          what it bounds
======================================  ===============  ============================================
``DIGITS_MAX_IMAGE_PIXELS``             40,000,000       width × height of one image (PNG, JPEG, ...)
``DIGITS_MAX_REQUEST_PIXELS``           100,000,000      all images of one web request together
``DIGITS_MAX_VOLUME_VOXELS``            134,217,728      one volume (NIfTI file or DICOM series),
                                                         voxels × channels (512³)
======================================  ===============  ============================================

Per DICOM file (constants): at most :data:`MAX_DICOM_FRAMES` frames and
:data:`MAX_DICOM_DECODED_BYTES` decoded bytes; :func:`dicom_pixels_problem`
answers from the header alone, and each reader raises its own error naming
the file.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import math
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from .errors import ConfigurationError, InferenceError

#: Frames one DICOM file may declare (``NumberOfFrames``); a multi-frame CT or DICOM-SEG rarely has 2,000.
MAX_DICOM_FRAMES = 10_000
#: Bytes the decoded pixels of one DICOM file may need (all its frames): 2 GiB.
MAX_DICOM_DECODED_BYTES = 2 * 1024**3


@dataclass(frozen=True)
class Limit:
    """One size limit: its environment variable, default and what it counts.

    Attributes:
        env: The environment variable that sets it (a whole number ≥ 1).
        default: The value without the variable.
        unit: What it counts ("pixels", "voxels").
        scope: What one limit applies to, as a sentence part ("per image").
    """

    env: str
    default: int
    unit: str
    scope: str

    def value(self) -> int:
        """The limit in force: the environment variable's value, else the default.

        Raises:
            ConfigurationError: The variable is set but not a whole number ≥ 1.
        """
        raw = os.environ.get(self.env, "").strip().replace("_", "").replace(",", "")
        if not raw:
            return self.default
        try:
            number = int(raw)
        except ValueError:
            number = 0
        if number < 1:
            raise ConfigurationError(
                f"{self.env}={os.environ.get(self.env)!r} is not a whole number of {self.unit} >= 1; "
                f"unset it for the default ({self.default:,})."
            )
        return number

    def named(self) -> str:
        """The limit as an error states it: ``"the limit of 40,000,000 pixels per image (DIGITS_MAX_IMAGE_PIXELS)"``."""
        return f"the limit of {self.value():,} {self.unit} {self.scope} ({self.env})"


#: Width × height of one image read for inference or prediction.
IMAGE_PIXELS = Limit("DIGITS_MAX_IMAGE_PIXELS", 40_000_000, "pixels", "per image")
#: Width × height of all images of one web request (upload, TF Serving predict, server path) together.
REQUEST_PIXELS = Limit("DIGITS_MAX_REQUEST_PIXELS", 100_000_000, "pixels", "per request, all images together")
#: Voxels × channels of one volume (a NIfTI file, a DICOM series: all its slices together).
VOLUME_VOXELS = Limit("DIGITS_MAX_VOLUME_VOXELS", 512**3, "voxels", "per volume (all slices and channels)")

#: Every configurable limit (the docs page lists them; a test checks it does).
LIMITS = (IMAGE_PIXELS, REQUEST_PIXELS, VOLUME_VOXELS)


class InputTooLargeError(InferenceError):
    """An input declares more than a size limit allows; nothing was decoded (the web answers HTTP 413).

    Attributes:
        limit: The :class:`Limit` it exceeds.
    """

    def __init__(self, message: str, limit: Limit):
        super().__init__(message)
        self.limit = limit


# -- images ------------------------------------------------------------------------------------------------------


class PixelBudget:
    """The pixels one request may still decode (:data:`REQUEST_PIXELS`), spent image by image from headers."""

    def __init__(self, total: int | None = None):
        self.total = REQUEST_PIXELS.value() if total is None else int(total)
        self.spent = 0

    def take(self, width: int, height: int, what: str) -> None:
        """Count one image of ``width × height`` (its header's size) against the budget.

        Raises:
            InputTooLargeError: The request's images together declare more than the budget.
        """
        pixels = int(width) * int(height)
        if self.spent + pixels > self.total:
            raise InputTooLargeError(
                f"{what}: this request's images declare {self.spent + pixels:,} pixels together, "
                f"more than {REQUEST_PIXELS.named()}; send fewer or smaller images per request.",
                REQUEST_PIXELS,
            )
        self.spent += pixels


_budget: contextvars.ContextVar[PixelBudget | None] = contextvars.ContextVar("digits_pixel_budget", default=None)


@contextlib.contextmanager
def request_pixel_budget(total: int | None = None) -> Iterator[PixelBudget]:
    """Within the block, every image :func:`check_image_size` admits is counted against one :class:`PixelBudget`.

    The web server's inference worker runs each request in one (a folder of images on the server counts
    like an upload); the command line and the Python API have none, so only the per-image limit applies.
    """
    budget = PixelBudget(total)
    token = _budget.set(budget)
    try:
        yield budget
    finally:
        _budget.reset(token)


def current_pixel_budget() -> PixelBudget | None:
    """The budget of the enclosing :func:`request_pixel_budget` block, else ``None``."""
    return _budget.get()


def check_image_size(width: int, height: int, what: str, budget: PixelBudget | None = None) -> None:
    """Refuse an image whose header declares more pixels than :data:`IMAGE_PIXELS`, or than the request's budget.

    Args:
        width: Declared width.
        height: Declared height.
        what: Names the image in the error ("instances[3]", "Input cat.png").
        budget: The request's budget (default: the one of :func:`request_pixel_budget`, if any).

    Raises:
        InputTooLargeError: Naming the image, its size and the limit with its setting.
    """
    pixels = int(width) * int(height)
    if pixels > IMAGE_PIXELS.value():
        raise InputTooLargeError(
            f"{what}: its header declares {width}x{height} pixels ({pixels:,}), more than {IMAGE_PIXELS.named()}; "
            "nothing was decoded. Send a smaller image.",
            IMAGE_PIXELS,
        )
    budget = budget if budget is not None else _budget.get()
    if budget is not None:
        budget.take(width, height, what)


def image_header(source: str | os.PathLike | bytes | BinaryIO) -> tuple[str, int, int]:
    """``(format, width, height)`` of an image file from its header; no pixel is decoded.

    Args:
        source: A path, the file's bytes, or a binary file object (its position is restored).

    Raises:
        ValueError: Not an image Pillow can identify.
    """
    from PIL import Image, UnidentifiedImageError

    stream: Any = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else source
    start = stream.tell() if hasattr(stream, "tell") else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our own limit decides, below
            try:
                with Image.open(stream) as image:
                    return str(image.format or ""), int(image.size[0]), int(image.size[1])
            except Image.DecompressionBombError as exc:  # over 2x Pillow's own limit: the size is in its message
                width, height = _size_in(str(exc))
                return "", width, height
    except UnidentifiedImageError:
        raise ValueError("not an image file Pillow can read") from None
    except (OSError, SyntaxError) as exc:
        raise ValueError(f"cannot read the image header ({exc})") from None
    finally:
        if start is not None:
            stream.seek(start)


def _size_in(message: str) -> tuple[int, int]:
    """Pillow's DecompressionBombError says "Image size (N pixels) exceeds ..." : N as N x 1."""
    found = re.search(r"\((\d+) pixels\)", message)
    return (int(found.group(1)), 1) if found else (2**31, 2**31)


# -- volumes -----------------------------------------------------------------------------------------------------


def volume_voxels_problem(shape: Sequence[int]) -> str | None:
    """Why a volume declaring ``shape`` (all axes, channels included) is refused, else ``None``.

    Returns:
        A sentence without the file's name, e.g. ``"its header declares 768x768x384 voxels (226,492,416), more
        than the limit of 134,217,728 voxels per volume ... (DIGITS_MAX_VOLUME_VOXELS)"``.
    """
    dims = [max(int(n), 0) for n in shape]
    voxels = math.prod(dims)  # Python ints: an absurd header cannot overflow
    if voxels <= VOLUME_VOXELS.value():
        return None
    return (
        f"its header declares {'x'.join(str(n) for n in dims)} voxels ({voxels:,}), more than "
        f"{VOLUME_VOXELS.named()}; nothing was read. Crop or resample it, or ask the operator to raise the limit"
    )


def series_voxels_problem(slice_values: Sequence[int]) -> str | None:
    """Why a DICOM series whose slices declare ``slice_values`` pixel values each is refused, else ``None``.

    The series is one volume: its slices count together against :data:`VOLUME_VOXELS`, so many slices that
    each pass cannot add up to more than one volume may hold.
    """
    total = sum(max(int(n), 0) for n in slice_values)
    if total <= VOLUME_VOXELS.value():
        return None
    return (
        f"its {len(slice_values)} slices declare {total:,} voxels together, more than {VOLUME_VOXELS.named()}; "
        "nothing was decoded. Crop or resample the series, or ask the operator to raise the limit"
    )


# -- DICOM -------------------------------------------------------------------------------------------------------


def _header_int(ds: Any, keyword: str, default: int) -> int:
    try:
        return int(ds.get(keyword) or default)
    except (TypeError, ValueError, OverflowError):
        return default


def dicom_values(ds: Any) -> int:
    """Pixel values one DICOM dataset's header declares: Rows × Columns × SamplesPerPixel × NumberOfFrames."""
    rows, columns = _header_int(ds, "Rows", 0), _header_int(ds, "Columns", 0)
    samples, frames = _header_int(ds, "SamplesPerPixel", 1), _header_int(ds, "NumberOfFrames", 1)
    return max(rows, 0) * max(columns, 0) * max(samples, 1) * max(frames, 1)


def dicom_pixels_problem(ds: Any, *, frames_read: int | None = None) -> str | None:
    """Why decoding this DICOM dataset's pixels is refused (its header declares too much), else ``None``.

    Args:
        ds: A ``pydicom.Dataset`` (the header is enough: nothing is decoded).
        frames_read: Frames the caller decodes (one frame of a multi-frame file), default all of them.

    Returns:
        A sentence without the file's name, e.g. ``"its header declares 2000000000 frames (NumberOfFrames); at
        most 10000 are read"``; the caller's error names the file.
    """
    frames = _header_int(ds, "NumberOfFrames", 1)
    if frames > MAX_DICOM_FRAMES:
        return (
            f"its header declares {frames} frames (NumberOfFrames); at most {MAX_DICOM_FRAMES} frames per "
            "file are read: the file is damaged, or split it into several files"
        )
    rows, columns = _header_int(ds, "Rows", 0), _header_int(ds, "Columns", 0)
    samples, bits = _header_int(ds, "SamplesPerPixel", 1), _header_int(ds, "BitsAllocated", 8)
    needed = rows * columns * samples * max(bits, 8) // 8 * (frames if frames_read is None else frames_read)
    if needed > MAX_DICOM_DECODED_BYTES:
        return (
            f"its header declares {frames} frame(s) of {rows}x{columns}x{samples} at {bits} bits "
            f"({needed:,} bytes decoded); at most {MAX_DICOM_DECODED_BYTES:,} bytes per file are decoded"
        )
    return None


__all__ = [
    "IMAGE_PIXELS",
    "LIMITS",
    "MAX_DICOM_DECODED_BYTES",
    "MAX_DICOM_FRAMES",
    "REQUEST_PIXELS",
    "VOLUME_VOXELS",
    "InputTooLargeError",
    "Limit",
    "PixelBudget",
    "check_image_size",
    "current_pixel_budget",
    "dicom_pixels_problem",
    "dicom_values",
    "image_header",
    "request_pixel_budget",
    "series_voxels_problem",
    "volume_voxels_problem",
]
