"""Robust DICOM image reading for DIGITS data plugins (reusable by any plugin).

``pydicom``'s ``pixel_array`` returns *stored* values only. This module turns
one DICOM file into the array a DIGITS dataset should store, and turns every
way a file can be unusable into one :class:`DicomReadError` naming the file::

    from digits_data_sunnybrook.dicom import read_dicom_image, check_decoders, DicomReadError

    check_decoders(paths)               # once, before the job: fails early if a codec is missing
    image = read_dicom_image(path)      # H x W x C numpy array, native byte order

What :func:`read_dicom_image` does, in this order:

1. Reads the file (a file without the 128-byte preamble is retried with
   ``force=True``) and checks the tags pixel decoding needs: pixel data
   (``PixelData``, or ``FloatPixelData``/``DoubleFloatPixelData``),
   ``Rows``, ``Columns``, ``BitsAllocated``, ``SamplesPerPixel`` and
   ``PhotometricInterpretation``. ``force=True`` "reads" text files, PNGs
   and files cut short without error, so this check is what rejects them.
2. Decodes the pixels (compressed transfer syntaxes need a decoder plugin,
   see :func:`check_decoders`), keeps only the ``BitsStored`` low bits
   (sign-extended when ``PixelRepresentation`` is 1) and converts big-endian
   data to native byte order (the raw bytes of a ``>u2`` array are wrong in
   LMDB).
3. Applies the Modality LUT: ``RescaleSlope``/``RescaleIntercept`` (e.g.
   CT stored values to Hounsfield units) or a Modality LUT Sequence.
4. Optionally applies a linear window (VOI), giving float32 in ``[0, 1]``.
5. Inverts ``MONOCHROME1`` so that higher values are always brighter.

Output dtype (deterministic per acquisition, so every file of a series gets
the same dtype; it never squashes to ``uint8``):

* The range of possible values is taken from the header (``BitsStored`` and
  ``PixelRepresentation``, through the rescale), not from the pixel data.
* Rescale with slope 1 and an integral intercept (or no rescale): the
  smallest of ``uint8`` (8-bit data only), ``uint16``, ``int16`` that holds
  that range; otherwise ``float32``. Any other slope gives ``float32``.
  32-bit integer data gives ``float32`` (exact up to 2**24).
* Windowed output is ``float32`` in ``[0, 1]``.
* Color (``SamplesPerPixel`` 3; YBR is converted to RGB) keeps its stored
  ``uint8``/``uint16``; ``PALETTE COLOR`` is expanded to RGB.

``MONOCHROME1`` inversion maps value ``v`` to ``lo + hi - v`` where
``[lo, hi]`` is the header range above (after rescale), e.g. ``4095 - v``
for 12-bit unsigned data, so the dtype is kept; windowed data maps to
``1 - v``.

Multi-frame files (``NumberOfFrames`` > 1): :func:`read_dicom_image` rejects
them with a clear :class:`DicomReadError` unless a ``frame`` index is given;
:func:`read_dicom_frames` returns all frames as ``N x H x W x C``, and
:func:`count_frames` lets a plugin make one dataset entry per frame.

Truncated files: pydicom reads a file cut short inside its pixel data as a
dataset without pixel data (or without any element), with only a warning.
:func:`read_dicom` then re-reads the header alone and, when it is intact,
says "pixel data truncated" instead of listing tags as missing.
:func:`check_pixel_data_length` is the cheap version of that test (header
plus the file's size and last bytes, no decoding) for a plugin's
``itemize_entries``. pydicom's warnings while reading a file are not printed
to stderr: a failing file's :class:`DicomReadError` carries them (once).

pydicom is imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, Union

import numpy as np

from digits_core.errors import DigitsError
from digits_core.limits import dicom_pixels_problem

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]

#: Tags that must be present for the pixel data to be decodable (one of the
#: three pixel data keywords is enough).
REQUIRED_TAGS = ("PixelData", "Rows", "Columns", "BitsAllocated", "SamplesPerPixel", "PhotometricInterpretation")
_PIXEL_KEYWORDS = ("PixelData", "FloatPixelData", "DoubleFloatPixelData")

#: The pip command suggested when a decoder is missing (plugins reusing this
#: module pass their own to :func:`check_decoders`).
DEFAULT_INSTALL_HINT = 'pip install "digits-data-sunnybrook[codecs]"'

_UID_RE = re.compile(r"^[0-9]+(\.[0-9]+)+$")


class DicomReadError(DigitsError):
    """A DICOM file could not be turned into an image.

    The message always starts with the file's path.

    Args:
        path: The file (path or name of the stream).
        reason: What is wrong with it and, when possible, what to do.

    Attributes:
        path: The file, as a string.
        reason: The reason without the path.
    """

    def __init__(self, path: Any, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self):  # picklable across worker processes
        return (type(self), (self.path, self.reason))


class MissingDecoderError(DicomReadError):
    """Files use a compressed transfer syntax whose decoder is not installed.

    Args:
        path: The first affected file (or the transfer syntax UID when no
            file was given).
        reason: The full explanation.
        transfer_syntax: The transfer syntax UID.
        packages: What pydicom says would provide a decoder, e.g.
            ``["pylibjpeg - requires pylibjpeg>=2.0 and pylibjpeg-libjpeg>=2.1", ...]``.
        count: How many of the checked files use this transfer syntax.
    """

    def __init__(self, path: Any, reason: str, transfer_syntax: str = "", packages: Iterable[str] = (), count: int = 1):
        self.transfer_syntax = str(transfer_syntax)
        self.packages = list(packages)
        self.count = count
        super().__init__(path, reason)

    def __reduce__(self):
        return (type(self), (self.path, self.reason, self.transfer_syntax, self.packages, self.count))


# -- reading ------------------------------------------------------------------


def _name_of(src: PathOrFile) -> str:
    if isinstance(src, (str, os.PathLike)):
        return str(src)
    return str(getattr(src, "name", "<stream>"))


def _dcmread(src: PathOrFile, *, stop_before_pixels: bool, notes: list[str] | None = None):
    """dcmread strictly, then with force=True for files without a preamble.

    pydicom's warnings are collected into ``notes`` (deduplicated) instead
    of being printed.
    """
    from pydicom import dcmread
    from pydicom.errors import InvalidDicomError

    name = _name_of(src)
    if isinstance(src, (str, os.PathLike)):
        path = Path(src)
        if not path.exists():
            raise DicomReadError(name, "file not found")
        if not path.is_file():
            raise DicomReadError(name, "not a file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            try:
                return dcmread(src, stop_before_pixels=stop_before_pixels)
            except InvalidDicomError:
                if hasattr(src, "seek"):
                    src.seek(0)
                return dcmread(src, stop_before_pixels=stop_before_pixels, force=True)
        except DicomReadError:
            raise
        except Exception as exc:  # pydicom raises builtins for most problems
            raise DicomReadError(name, f"not a readable DICOM file ({type(exc).__name__}: {exc})") from exc
        finally:
            if notes is not None:
                for item in caught:
                    text = str(item.message).replace(name, "").strip()
                    if text not in notes:
                        notes.append(text)


def _with_notes(reason: str, notes: list[str]) -> str:
    return reason + (f" (pydicom: {'; '.join(notes)})" if notes else "")


def _pixel_data_start(path: str) -> int | None:
    """Byte offset of the pixel data element of a file (read up to it only), or ``None``."""
    from pydicom import dcmread

    with open(path, "rb") as handle, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dcmread(handle, stop_before_pixels=True, force=True)
        except Exception:  # noqa: BLE001 - the caller reports the header itself
            return None
        return handle.tell()


def _fragments_complete(path: str, start: int, size: int) -> bool:
    """Walk the item headers of encapsulated pixel data (seeks only); False when the file ends first."""
    import struct

    with open(path, "rb") as handle:
        handle.seek(start + 4)
        explicit = handle.read(2) in (b"OB", b"OW", b"UN")  # (7FE0,0010) [OB 00 00] FFFFFFFF
        handle.seek(start + (12 if explicit else 8))
        while True:
            header = handle.read(8)
            if len(header) < 8:
                return False
            group, element, length = struct.unpack("<HHI", header)
            if (group, element) == (0xFFFE, 0xE0DD):
                return True
            if (group, element) != (0xFFFE, 0xE000) or handle.tell() + length > size:
                return False
            handle.seek(length, os.SEEK_CUR)


def check_pixel_data_length(src: str | os.PathLike, ds=None) -> None:
    """Cheaply check that a file's pixel data is complete, without decoding it.

    Native (uncompressed) data must hold ``Rows × Columns × SamplesPerPixel ×
    BitsAllocated / 8 × NumberOfFrames`` bytes; encapsulated (compressed)
    data must end with its sequence delimiter. Reads the header and the
    file's last bytes only: fast enough for ``itemize_entries``.

    Args:
        src: The file.
        ds: Its header, if already read (``read_dicom_header``).

    Raises:
        DicomReadError: The pixel data is truncated (the message gives the
            byte counts), or the header is unusable.
    """
    name = str(src)
    ds = ds if ds is not None else read_dicom_header(src)
    tsyntax = ds.file_meta.TransferSyntaxUID
    if tsyntax.is_deflated:
        return  # the whole dataset is deflated: only decompressing tells
    size = os.path.getsize(src)
    start = _pixel_data_start(name)
    if start is None or start >= size:
        raise DicomReadError(
            name,
            "pixel data missing: the file ends where the pixel data should start "
            f"(header intact: {ds.Rows}x{ds.Columns})",
        )
    if tsyntax.is_compressed:
        if not _fragments_complete(name, start, size):
            raise DicomReadError(
                name,
                f"pixel data truncated: the compressed ({tsyntax.name}) pixel data has no "
                "end marker, the file was cut short (header intact: "
                f"{ds.Rows}x{ds.Columns}); copy the file again",
            )
        return
    explicit = not tsyntax.is_implicit_VR
    element_header = 12 if explicit else 8
    frames = count_frames(ds)
    samples = int(ds.SamplesPerPixel)
    if str(ds.get("PhotometricInterpretation", "")) == "YBR_FULL_422":
        samples = 2  # chroma subsampled horizontally: 4 values per 2 pixels
    expected = (int(ds.Rows) * int(ds.Columns) * samples * int(ds.BitsAllocated) * frames + 7) // 8
    available = size - start - element_header
    if available < expected:
        raise DicomReadError(
            name,
            f"pixel data truncated: {max(available, 0)} of {expected} bytes "
            f"({ds.Rows}x{ds.Columns}, {frames} frame(s), {ds.BitsAllocated} bits); "
            "the file was cut short, copy it again",
        )


def _ensure_transfer_syntax(ds) -> None:
    """Give a dataset read without file meta the transfer syntax it was read with."""
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRBigEndian, ExplicitVRLittleEndian, ImplicitVRLittleEndian

    meta = getattr(ds, "file_meta", None)
    if meta is not None and meta.get("TransferSyntaxUID"):
        return
    implicit, little = getattr(ds, "original_encoding", (None, None))
    if implicit is None:
        implicit, little = True, True
    uid = ImplicitVRLittleEndian if implicit else (ExplicitVRLittleEndian if little else ExplicitVRBigEndian)
    if meta is None:
        ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = uid


def _check_required(ds, name: str) -> None:
    missing = [kw for kw in REQUIRED_TAGS[1:] if ds.get(kw) in (None, "")]
    if not any(kw in ds for kw in _PIXEL_KEYWORDS):
        missing.insert(0, "PixelData")
    if missing:
        what = "no DICOM image data" if len(missing) == len(REQUIRED_TAGS) else "not a usable DICOM image"
        sop = ds.get("SOPClassUID")
        sop_text = f" (SOP class: {getattr(sop, 'name', sop)})" if sop else ""
        raise DicomReadError(name, f"{what}{sop_text}: missing {', '.join(missing)}")
    if int(ds.Rows) <= 0 or int(ds.Columns) <= 0:
        raise DicomReadError(name, f"image size is {ds.Rows}x{ds.Columns}")
    spp = int(ds.SamplesPerPixel)
    if spp not in (1, 3):
        raise DicomReadError(name, f"SamplesPerPixel is {spp}; only 1 (grayscale) and 3 (color) are supported")


def read_dicom(src: PathOrFile, *, stop_before_pixels: bool = False):
    """Read a DICOM file and check it holds a decodable image.

    Args:
        src: Path or binary file object.
        stop_before_pixels: Read the header only (fast); the pixel data tag
            is then not checked.

    Returns:
        The ``pydicom.Dataset`` (its file meta always has a
        ``TransferSyntaxUID``, guessed from the encoding for files without
        file meta).

    Raises:
        DicomReadError: Missing or unreadable file, not DICOM, or a required
            tag (:data:`REQUIRED_TAGS`) is missing.
    """
    name = _name_of(src)
    notes: list[str] = []
    ds = _dcmread(src, stop_before_pixels=stop_before_pixels, notes=notes)
    try:
        _ensure_transfer_syntax(ds)
        if stop_before_pixels:
            missing = [kw for kw in REQUIRED_TAGS[1:] if ds.get(kw) in (None, "")]
            if missing:
                raise DicomReadError(name, f"not a usable DICOM image: missing {', '.join(missing)}")
        else:
            try:
                _check_required(ds, name)
            except DicomReadError as exc:
                _raise_if_truncated(src, name, notes)
                raise DicomReadError(name, _with_notes(exc.reason, notes)) from None
    except DicomReadError:
        raise
    except Exception as exc:  # malformed values (e.g. a text Rows)
        raise DicomReadError(name, _with_notes(f"malformed DICOM header ({type(exc).__name__}: {exc})", notes)) from exc
    return ds


def _raise_if_truncated(src: PathOrFile, name: str, notes: list[str]) -> None:
    """After a full read lacked tags: if the header alone is intact, the pixel data was cut short."""
    if not isinstance(src, (str, os.PathLike)):
        return
    try:
        header = read_dicom_header(src)
    except DicomReadError:
        return  # the header itself is broken: the "missing ..." message is right
    try:
        check_pixel_data_length(src, header)
    except DicomReadError as exc:
        raise DicomReadError(name, _with_notes(exc.reason, notes)) from None
    raise DicomReadError(
        name,
        _with_notes(f"pixel data unreadable although the header is intact ({header.Rows}x{header.Columns})", notes),
    )


def read_dicom_header(src: PathOrFile):
    """Read only the header of a DICOM image file (no pixel data): fast.

    Equivalent to ``read_dicom(src, stop_before_pixels=True)``.

    Raises:
        DicomReadError: As :func:`read_dicom`.
    """
    return read_dicom(src, stop_before_pixels=True)


def count_frames(ds_or_src) -> int:
    """Return the number of frames of a DICOM image (1 when ``NumberOfFrames`` is absent).

    Args:
        ds_or_src: A ``pydicom.Dataset`` or a path / binary file object.

    Raises:
        DicomReadError: The file cannot be read.
    """
    ds = (
        ds_or_src
        if hasattr(ds_or_src, "get") and not isinstance(ds_or_src, (str, os.PathLike))
        else read_dicom_header(ds_or_src)
    )
    try:
        return max(1, int(ds.get("NumberOfFrames") or 1))
    except (TypeError, ValueError):
        return 1


def _float(value, default: float) -> float:
    if value is None or value == "":
        return default
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        value = value[0]
    return float(value)


def _stored_range(ds) -> tuple[int, int]:
    bits_stored = int(ds.get("BitsStored") or ds.BitsAllocated)
    if int(ds.get("PixelRepresentation") or 0) == 1:
        return -(2 ** (bits_stored - 1)), 2 ** (bits_stored - 1) - 1
    return 0, 2**bits_stored - 1


def _plan(ds, apply_rescale: bool) -> dict:
    """Decide what to do with the decoded array: dtype, rescale, value range."""
    photometric = str(ds.PhotometricInterpretation).strip().upper()
    spp = int(ds.SamplesPerPixel)
    float_data = "PixelData" not in ds
    plan: dict[str, Any] = {"photometric": photometric, "rescale": None, "modality_lut": False}
    if float_data:
        plan.update(dtype=np.float32, lo=None, hi=None)
        return plan
    if spp == 3 or photometric == "PALETTE COLOR":
        plan.update(dtype=None, lo=None, hi=None)  # keep the decoded color dtype
        return plan
    lo, hi = _stored_range(ds)
    dtype = np.float32 if int(ds.BitsAllocated) > 16 else None
    if apply_rescale and ds.get("ModalityLUTSequence"):
        depth = int(ds.ModalityLUTSequence[0].LUTDescriptor[2])
        plan.update(modality_lut=True, dtype=np.uint8 if depth <= 8 else np.uint16, lo=0, hi=2**depth - 1)
        return plan
    slope, intercept = 1.0, 0.0
    if apply_rescale:
        slope = _float(ds.get("RescaleSlope"), 1.0)
        intercept = _float(ds.get("RescaleIntercept"), 0.0)
    if (slope, intercept) != (1.0, 0.0):
        plan["rescale"] = (slope, intercept)
        lo, hi = sorted((lo * slope + intercept, hi * slope + intercept))
        if slope != 1.0 or intercept != int(intercept):
            dtype = np.float32
    if dtype is None:
        if int(ds.BitsAllocated) <= 8 and lo >= 0 and hi <= 255:
            dtype = np.uint8
        elif lo >= 0 and hi <= 65535:
            dtype = np.uint16
        elif lo >= -32768 and hi <= 32767:
            dtype = np.int16
        else:
            dtype = np.float32
    plan.update(dtype=dtype, lo=lo, hi=hi)
    return plan


def image_dtype(ds, *, apply_rescale: bool = True, window=None) -> np.dtype:
    """Return the dtype :func:`read_dicom_image` gives for a dataset's pixels.

    Decided from the header alone (see the module docstring), so a plugin can
    check that all files of a dataset agree before encoding them.

    Args:
        ds: A ``pydicom.Dataset`` (a header read is enough).
        apply_rescale: As in :func:`read_dicom_image`.
        window: As in :func:`read_dicom_image`.
    """
    if window is not None:
        return np.dtype(np.float32)
    plan = _plan(ds, apply_rescale)
    if plan["dtype"] is None:
        return np.dtype(np.uint8 if int(ds.get("BitsAllocated") or 8) <= 8 else np.uint16)
    return np.dtype(plan["dtype"])


def _window_values(ds, window) -> tuple[float, float]:
    if isinstance(window, str):
        if window != "file":
            raise ValueError(f'window must be None, "file" or (center, width), not {window!r}')
        if ds.get("WindowCenter") in (None, "") or ds.get("WindowWidth") in (None, ""):
            raise KeyError("window='file' but the file has no WindowCenter/WindowWidth")
        return _float(ds.WindowCenter, 0.0), _float(ds.WindowWidth, 1.0)
    center, width = window
    return float(center), float(width)


def _apply_window(arr: np.ndarray, center: float, width: float) -> np.ndarray:
    """DICOM linear VOI function (PS3.3 C.11.2.1.2.1) mapped to [0, 1]."""
    if width < 1:
        raise ValueError(f"window width must be >= 1, got {width}")
    x = arr.astype(np.float64)
    if width == 1:
        out = (x > center - 0.5).astype(np.float64)
    else:
        out = np.clip(((x - (center - 0.5)) / (width - 1)) + 0.5, 0.0, 1.0)
    return out.astype(np.float32)


def _fix_bits(arr: np.ndarray, ds) -> np.ndarray:
    """Native byte order; only the BitsStored low bits, sign-extended if signed."""
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype.kind not in "iu":
        return arr
    bits_alloc = arr.dtype.itemsize * 8
    bits_stored = int(ds.get("BitsStored") or ds.BitsAllocated)
    if bits_stored >= bits_alloc:
        return arr
    arr = np.array(arr, copy=True)
    shift = bits_alloc - bits_stored
    signed = int(ds.get("PixelRepresentation") or 0) == 1
    work = arr.view(arr.dtype.str.replace("u", "i") if signed else arr.dtype.str.replace("i", "u"))
    np.left_shift(work, shift, out=work)
    np.right_shift(work, shift, out=work)
    return work


def _to_image(arr: np.ndarray, ds, plan: dict, window, name: str) -> np.ndarray:
    """Turn one decoded frame (H x W or H x W x 3) into the stored H x W x C array."""
    from pydicom.pixels import apply_color_lut, apply_modality_lut

    arr = _fix_bits(np.asarray(arr), ds)
    photometric = plan["photometric"]
    if photometric == "PALETTE COLOR":
        arr = apply_color_lut(arr, ds)
        return np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("="), copy=False))
    if arr.ndim == 3:  # color
        if window is not None:
            raise ValueError("windowing applies to grayscale images only")
        return np.ascontiguousarray(arr)
    if plan["modality_lut"]:
        arr = apply_modality_lut(arr, ds)
    elif plan["rescale"] is not None:
        slope, intercept = plan["rescale"]
        arr = arr.astype(np.float64) * slope + intercept
    lo, hi = plan["lo"], plan["hi"]
    if window is not None:
        center, width = _window_values(ds, window)
        arr = _apply_window(arr, center, width)
        lo, hi = 0.0, 1.0
        dtype = np.float32
    else:
        dtype = plan["dtype"]
    if photometric == "MONOCHROME1":
        if lo is None:
            lo, hi = float(np.min(arr)), float(np.max(arr))
        arr = (lo + hi) - arr.astype(np.float64)
    if np.dtype(dtype).kind in "iu":
        arr = np.rint(arr) if arr.dtype.kind == "f" else arr
        info = np.iinfo(dtype)
        arr = np.clip(arr, info.min, info.max)
    return np.ascontiguousarray(arr.astype(dtype)[..., np.newaxis])


def _decode(ds, name: str, frame: int | None):
    from pydicom.pixels import pixel_array

    too_big = dicom_pixels_problem(ds, frames_read=None if frame is None else 1)
    if too_big:  # before pydicom allocates the whole decoded array from the header's numbers
        raise DicomReadError(name, too_big)
    tsyntax = ds.file_meta.TransferSyntaxUID
    if tsyntax.is_compressed:
        _require_decoder(tsyntax, [name])
    with warnings.catch_warnings(record=True) as caught:  # decoder warnings belong to this file's error, not stderr
        warnings.simplefilter("always")
        try:
            return pixel_array(ds, index=frame)
        except Exception as exc:
            notes = list(dict.fromkeys(str(w.message).replace(name, "").strip() for w in caught))
            if os.path.isfile(name):
                try:
                    check_pixel_data_length(name, ds)
                except DicomReadError as truncated:
                    raise DicomReadError(name, _with_notes(truncated.reason, notes)) from exc
            text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or "no details"
            if len(text) > 400:
                text = text[:400] + "..."
            raise DicomReadError(
                name, _with_notes(f"cannot decode the pixel data ({type(exc).__name__}: {text})", notes)
            ) from exc


def dataset_to_image(
    ds, *, apply_rescale: bool = True, window=None, frame: int | None = None, name: str = "<dataset>"
) -> np.ndarray:
    """Convert an already read ``pydicom.Dataset`` to an image, as :func:`read_dicom_image` does.

    Args:
        ds: The dataset (read with pixel data).
        apply_rescale: As in :func:`read_dicom_image`.
        window: As in :func:`read_dicom_image`.
        frame: As in :func:`read_dicom_image`.
        name: Names the source in error messages.

    Returns:
        ``H x W x C`` numpy array in native byte order.

    Raises:
        DicomReadError: As :func:`read_dicom_image`.
    """
    try:
        _ensure_transfer_syntax(ds)
        _check_required(ds, name)
        nframes = count_frames(ds)
        if frame is None and nframes > 1:
            raise DicomReadError(
                name,
                f"multi-frame file ({nframes} frames): read one frame with frame=0..{nframes - 1} "
                "or all of them with read_dicom_frames()",
            )
        if frame is not None and not 0 <= frame < nframes:
            raise DicomReadError(name, f"frame {frame} out of range: the file has {nframes} frame(s)")
        plan = _plan(ds, apply_rescale)
        if window is not None:
            _window_values(ds, window)  # validate before decoding
        arr = _decode(ds, name, None if nframes == 1 else frame)
        return _to_image(arr, ds, plan, window, name)
    except DicomReadError:
        raise
    except Exception as exc:
        raise DicomReadError(name, f"cannot convert the pixel data ({type(exc).__name__}: {exc})") from exc


def read_dicom_image(
    src: PathOrFile, *, apply_rescale: bool = True, window=None, frame: int | None = None
) -> np.ndarray:
    """Read one DICOM image as the array a DIGITS dataset stores.

    Args:
        src: Path (``str`` or ``pathlib.Path``) or binary file object.
        apply_rescale: Apply ``RescaleSlope``/``RescaleIntercept`` (or the
            Modality LUT Sequence). False keeps the stored values.
        window: ``None`` (no windowing, the default), ``(center, width)``, or
            ``"file"`` to use the file's first ``WindowCenter``/``WindowWidth``.
            Windowed output is float32 in ``[0, 1]``.
        frame: Frame index for multi-frame files. ``None`` reads a
            single-frame file and rejects a multi-frame one.

    Returns:
        ``H x W x C`` numpy array (C is 1 for grayscale, 3 for color) in
        native byte order; dtype as described in the module docstring
        (``uint8``/``uint16``/``int16``/``float32``).

    Raises:
        MissingDecoderError: Compressed pixel data without an installed decoder.
        DicomReadError: Any other reason the file is not a usable image; the
            message starts with the file's path.
    """
    name = _name_of(src)
    ds = read_dicom(src)
    return dataset_to_image(ds, apply_rescale=apply_rescale, window=window, frame=frame, name=name)


def read_dicom_frames(src: PathOrFile, *, apply_rescale: bool = True, window=None) -> np.ndarray:
    """Read every frame of a DICOM image as ``N x H x W x C`` (N is 1 for single-frame files).

    Args:
        src: Path or binary file object.
        apply_rescale: As in :func:`read_dicom_image`.
        window: As in :func:`read_dicom_image`.

    Raises:
        DicomReadError: As :func:`read_dicom_image`.
    """
    name = _name_of(src)
    ds = read_dicom(src)
    nframes = count_frames(ds)
    if nframes == 1:
        return dataset_to_image(ds, apply_rescale=apply_rescale, window=window, name=name)[np.newaxis]
    try:
        plan = _plan(ds, apply_rescale)
        arr = _decode(ds, name, None)
        return np.stack([_to_image(a, ds, plan, window, name) for a in arr])
    except DicomReadError:
        raise
    except Exception as exc:
        raise DicomReadError(name, f"cannot convert the pixel data ({type(exc).__name__}: {exc})") from exc


# -- decoders -----------------------------------------------------------------


def _require_decoder(uid, paths: list, install_hint: str = DEFAULT_INSTALL_HINT) -> None:
    from pydicom.pixels import get_decoder
    from pydicom.uid import UID

    uid = UID(str(uid))
    if not uid.is_compressed:
        return
    first = paths[0] if paths else uid
    count = max(1, len(paths))
    files = f"{count} file(s) use" if count > 1 else "uses"
    try:
        decoder = get_decoder(uid)
    except NotImplementedError:
        raise MissingDecoderError(
            first, f"{files} transfer syntax {uid.name} ({uid}), which pydicom cannot decode", uid, [], count
        ) from None
    if decoder.is_available:
        return
    packages = list(decoder.missing_dependencies)
    options = "; ".join(packages) if packages else "a pydicom pixel data plugin"
    raise MissingDecoderError(
        first,
        f"{files} compressed transfer syntax {uid.name} ({uid}) but no decoder is installed. "
        f"Install the optional codecs: {install_hint} (any of: {options})",
        uid,
        packages,
        count,
    )


def check_decoders(paths_or_transfer_syntaxes: Iterable, *, install_hint: str = DEFAULT_INSTALL_HINT) -> dict[str, int]:
    """Check that every transfer syntax used can be decoded; call it before a job starts.

    Reads only file headers. Files that cannot be read are skipped here (they
    fail on their own when read). Uncompressed syntaxes and RLE need nothing
    but numpy; JPEG, JPEG-LS and JPEG 2000 need a decoder plugin
    (``pydicom.pixels.get_decoder(uid).is_available``).

    Args:
        paths_or_transfer_syntaxes: File paths and/or transfer syntax UID
            strings (e.g. ``"1.2.840.10008.1.2.4.80"``).
        install_hint: The command suggested in the error message.

    Returns:
        Transfer syntax UID to the number of items using it.

    Raises:
        MissingDecoderError: A syntax has no available decoder; the message
            names the syntax, the first file using it and how many do, and
            the packages to install.
    """
    by_uid: dict[str, list] = {}
    for item in paths_or_transfer_syntaxes:
        text = str(item)
        if isinstance(item, str) and _UID_RE.match(text) and not os.path.exists(text):
            by_uid.setdefault(text, []).append(None)
            continue
        try:
            ds = read_dicom_header(item)
        except DicomReadError:
            continue
        by_uid.setdefault(str(ds.file_meta.TransferSyntaxUID), []).append(text)
    for uid, items in by_uid.items():
        _require_decoder(uid, [p for p in items if p is not None], install_hint)
    return {uid: len(items) for uid, items in by_uid.items()}


# -- series helpers and display ------------------------------------------------


def series_key(ds) -> tuple:
    """Return ``(SeriesInstanceUID, orientation)`` that groups the slices of one series.

    The orientation is ``ImageOrientationPatient`` rounded to 3 decimals (or
    ``None``), so files of one series acquired in different planes are not
    mixed.
    """
    orientation = ds.get("ImageOrientationPatient")
    if orientation is not None and len(orientation) == 6:
        orientation = tuple(round(float(v), 3) for v in orientation)
    else:
        orientation = None
    return str(ds.get("SeriesInstanceUID", "")), orientation


def slice_position(ds) -> float | None:
    """Return the position of a slice along its normal (for sorting a series).

    Computed as ``ImagePositionPatient · (row direction × column direction)``;
    sort by this, not by ``InstanceNumber`` or file name. ``None`` when the
    geometry tags are missing.
    """
    orientation = ds.get("ImageOrientationPatient")
    position = ds.get("ImagePositionPatient")
    if orientation is None or position is None or len(orientation) != 6 or len(position) != 3:
        return None
    o = np.asarray([float(v) for v in orientation])
    normal = np.cross(o[:3], o[3:])
    return float(np.dot(normal, np.asarray([float(v) for v in position])))


def to_uint8(image: np.ndarray, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """Scale an image to uint8 for display (previews, thumbnails), never for storage.

    Normalises by the data (its min and max) unless ``lo``/``hi`` are given:
    12-bit data in a 16-bit container would be almost black if divided by
    2**16.

    Args:
        image: Any numeric array.
        lo: Value mapped to 0 (default: the minimum of ``image``).
        hi: Value mapped to 255 (default: the maximum of ``image``).
    """
    data = np.asarray(image, dtype=np.float64)
    lo = float(np.min(data)) if lo is None else float(lo)
    hi = float(np.max(data)) if hi is None else float(hi)
    if hi <= lo:
        return np.zeros(data.shape, dtype=np.uint8)
    return np.clip(np.rint((data - lo) * (255.0 / (hi - lo))), 0, 255).astype(np.uint8)


__all__ = [
    "DicomReadError",
    "MissingDecoderError",
    "REQUIRED_TAGS",
    "DEFAULT_INSTALL_HINT",
    "read_dicom",
    "read_dicom_header",
    "read_dicom_image",
    "read_dicom_frames",
    "dataset_to_image",
    "image_dtype",
    "count_frames",
    "check_pixel_data_length",
    "check_decoders",
    "series_key",
    "slice_position",
    "to_uint8",
]
