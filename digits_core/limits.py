"""Sizes a file may declare before a reader allocates anything for it (the bundled DICOM readers use these).

A DICOM header states its frame count and geometry; pydicom allocates the
whole decoded array from them before it looks at the pixel data, so a small
hostile (or damaged) file with ``NumberOfFrames`` of 10⁹ would take the
worker's memory. :func:`dicom_pixels_problem` answers "is this too big?" from
the header alone; each reader raises its own error naming the file.
"""

from __future__ import annotations

#: Frames one DICOM file may declare (``NumberOfFrames``); a multi-frame CT or DICOM-SEG rarely has 2,000.
MAX_DICOM_FRAMES = 10_000
#: Bytes the decoded pixels of one DICOM file may need (all its frames): 2 GiB.
MAX_DICOM_DECODED_BYTES = 2 * 1024**3


def _header_int(ds, keyword: str, default: int) -> int:
    try:
        return int(ds.get(keyword) or default)
    except (TypeError, ValueError, OverflowError):
        return default


def dicom_pixels_problem(ds, *, frames_read: int | None = None) -> str | None:
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


__all__ = ["MAX_DICOM_DECODED_BYTES", "MAX_DICOM_FRAMES", "dicom_pixels_problem"]
