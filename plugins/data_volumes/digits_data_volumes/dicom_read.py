"""Reading one DICOM file with its memory bounded, deflated files included.

``pydicom.dcmread`` inflates a *Deflated Explicit VR Little Endian* file whole
before it parses a single element, even with ``stop_before_pixels``: a 274 KB
file of zeros declaring 30,000² pixels becomes 1.8 GB before anyone looks at
its header. :func:`read_dicom` reads such a file's header from at most
:data:`HEADER_BYTES` of inflated data, and its pixels from at most what its
header declares (plus the header), refusing anything longer. Other transfer
syntaxes go to ``dcmread`` as they are: their size on disk bounds what it reads.

Importing this module imports no pydicom.
"""

from __future__ import annotations

import zlib
from typing import Any

#: Inflated bytes a deflated file's header (everything before its pixel data) may take.
HEADER_BYTES = 16 * 1024**2
_CHUNK = 1 << 16
_DEFLATED = "1.2.840.10008.1.2.1.99"


class DicomTooLargeError(ValueError):
    """A deflated file inflates to more than its header allows; the message says how much."""


def read_dicom(path: str, *, header_only: bool, pixel_bytes: int = 0) -> Any:
    """``pydicom.dcmread(path, stop_before_pixels=header_only)``, a deflated file inflated only so far.

    Args:
        path: The file.
        header_only: Stop before the pixel data.
        pixel_bytes: For a full read of a deflated file: the decoded pixel bytes its header declared
            (:func:`digits_core.limits.dicom_values` × bytes per value); it may inflate to at most
            that plus :data:`HEADER_BYTES`.

    Raises:
        DicomTooLargeError: A deflated file inflates past its bound.
        Exception: What ``dcmread`` raises for a file that is not DICOM or is damaged.
    """
    import pydicom

    meta = pydicom.filereader.read_file_meta_info(path)  # the preamble and group 2 only
    if str(meta.get("TransferSyntaxUID", "")) != _DEFLATED:
        return pydicom.dcmread(path, stop_before_pixels=header_only)
    return _read_deflated(path, header_only, HEADER_BYTES if header_only else pixel_bytes + HEADER_BYTES)


def _inflate(handle: Any, cap: int) -> tuple[bytes, bool]:
    """At most ``cap`` inflated bytes of the raw deflate stream from ``handle``; and whether more followed."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    out = bytearray()
    while not inflater.eof:
        pending = inflater.unconsumed_tail or handle.read(_CHUNK)
        if not pending:
            break
        out += inflater.decompress(pending, cap + 1 - len(out))
        if len(out) > cap:
            return bytes(out[:cap]), True
    return bytes(out), False


def _read_deflated(path: str, header_only: bool, cap: int) -> Any:
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.filebase import DicomBytesIO
    from pydicom.filereader import read_dataset, read_preamble

    with open(path, "rb") as handle:
        preamble = read_preamble(handle, False)
        meta = read_dataset(handle, False, True, stop_when=lambda tag, vr, length: tag.group != 2)
        inflated, more = _inflate(handle, cap)
    if more and not header_only:
        raise DicomTooLargeError(
            f"it inflates to more than {cap:,} bytes, more than its header's pixels need; the file is damaged or hostile"
        )
    reached = []

    def at_pixels(tag: Any, vr: Any, length: int) -> bool:
        if tag == 0x7FE00010:
            reached.append(True)
            return True
        return False

    buffer = DicomBytesIO(inflated)
    dataset = read_dataset(buffer, False, True, stop_when=at_pixels if header_only else None)
    if more and not reached:
        raise DicomTooLargeError(f"its header inflates to more than {cap:,} bytes before the pixel data")
    return FileDataset(
        path, dataset, preamble=preamble, file_meta=FileMetaDataset(meta), is_implicit_VR=False, is_little_endian=True
    )


__all__ = ["HEADER_BYTES", "DicomTooLargeError", "read_dicom"]
