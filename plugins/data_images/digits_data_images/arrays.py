"""Memory-mapped access to ``.npy`` files and to the members of ``.npz`` archives.

``.npy`` files are opened with ``numpy.load(mmap_mode="r")``. Members of an
``.npz`` archive written by ``numpy.savez`` (stored, not deflated) are
memory-mapped at their offset inside the zip file, so reading row ``i`` of a
larger-than-RAM array touches only that row's pages. Members of a
``numpy.savez_compressed`` archive cannot be mapped and are refused with a
message saying how to convert them.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np


class ArrayFileError(ValueError):
    """A features/labels file cannot be read as an array (the message names it)."""


def _npz_member(path: str, key: str) -> np.ndarray:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f"{path} is not a readable .npz archive ({exc})") from None
    with archive:
        names = [n[:-4] for n in archive.namelist() if n.endswith(".npy")]
        if key not in names:
            raise ArrayFileError(f'{path} has no array "{key}" (it has: {", ".join(names) or "none"})')
        info = archive.getinfo(key + ".npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ArrayFileError(f'array "{key}" of {path} is compressed (numpy.savez_compressed) and cannot be '
                             "memory-mapped; save it with numpy.save or numpy.savez instead")
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)
        if local[:4] != b"PK\x03\x04":
            raise ArrayFileError(f"{path}: corrupt zip entry for {key}")
        name_len = int.from_bytes(local[26:28], "little")
        extra_len = int.from_bytes(local[28:30], "little")
        start = info.header_offset + 30 + name_len + extra_len
        handle.seek(start)
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        else:  # format 3.0 (utf-8 field names) has no public reader
            shape, fortran, dtype = np.lib.format._read_array_header(handle, version)  # noqa: SLF001
        offset = handle.tell()
    if dtype.hasobject:
        raise ArrayFileError(f'array "{key}" of {path} holds Python objects; use a numeric array')
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def open_array(path: str, key: str | None = None) -> np.ndarray:
    """Open an array read-only and memory-mapped.

    Args:
        path: A ``.npy`` file, or a ``.npz`` archive.
        key: The member of a ``.npz`` archive.

    Raises:
        ArrayFileError: Unreadable file, missing member, compressed member or object array.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if path.lower().endswith(".npz"):
        return _npz_member(path, key or "")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ArrayFileError(f"{path} is not a readable .npy file ({exc})") from None
    if not isinstance(array, np.ndarray):
        raise ArrayFileError(f"{path} is not a .npy array file")
    return array
