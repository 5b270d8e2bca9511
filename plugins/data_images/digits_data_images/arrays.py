"""Memory-mapped access to ``.npy`` files and to the members of ``.npz`` archives.

``.npy`` files are opened with ``numpy.load(mmap_mode="r")``. Members of an
``.npz`` archive written by ``numpy.savez`` (stored, not deflated) are
memory-mapped at their offset inside the zip file, so reading row ``i`` of a
larger-than-RAM array touches only that row's pages. Members of a
``numpy.savez_compressed`` archive cannot be mapped and are refused with a
message saying how to convert them.
"""

from __future__ import annotations

import math
import os
import zipfile

import numpy as np


class ArrayFileError(ValueError):
    """A features/labels file cannot be read as an array (the message names it)."""


def _npz_member(path: str, key: str) -> np.ndarray:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, EOFError, ValueError, NotImplementedError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise ArrayFileError(f"{path} is not a readable .npz archive ({type(exc).__name__})") from None
    with archive:
        names = [n[:-4] for n in archive.namelist() if n.endswith(".npy")]
        if key not in names:
            raise ArrayFileError(f'{path} has no array "{key}" (it has: {", ".join(names) or "none"})')
        info = archive.getinfo(key + ".npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ArrayFileError(
            f'array "{key}" of {path} is compressed (numpy.savez_compressed) and cannot be '
            "memory-mapped; save it with numpy.save or numpy.savez instead"
        )
    try:
        return _map_member(path, key, info)
    except (OSError, EOFError, OverflowError, NotImplementedError, zipfile.BadZipFile) as exc:
        raise ArrayFileError(f'array "{key}" of {path}: a damaged .npz archive ({type(exc).__name__})') from None


def _map_member(path: str, key: str, info: zipfile.ZipInfo) -> np.ndarray:
    with open(path, "rb") as handle:
        handle.seek(info.header_offset)
        local = handle.read(30)
        if local[:4] != b"PK\x03\x04":
            raise ArrayFileError(f"{path}: corrupt zip entry for {key}")
        name_len = int.from_bytes(local[26:28], "little")
        extra_len = int.from_bytes(local[28:30], "little")
        start = info.header_offset + 30 + name_len + extra_len
        handle.seek(start)
        shape, fortran, dtype = _read_header(handle, f'array "{key}" of {path}')
        offset = handle.tell()
    _check_declared_size(shape, dtype, info.file_size - (offset - start), f'array "{key}" of {path}')
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def _read_header(handle, what: str) -> tuple[tuple, bool, np.dtype]:
    """A ``.npy`` header's (shape, Fortran order, dtype), with a named error for anything malformed."""
    try:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
        else:  # format 3.0 (utf-8 field names) has no public reader
            shape, fortran, dtype = np.lib.format._read_array_header(handle, version)  # noqa: SLF001
    except Exception:  # noqa: BLE001 - numpy parses the header as a Python literal: any error means "not a header"
        raise ArrayFileError(f"{what} has no valid .npy header") from None
    if dtype.hasobject:
        raise ArrayFileError(f"{what} holds Python objects; use a numeric array")
    return shape, fortran, dtype


def _check_declared_size(shape: tuple, dtype: np.dtype, available: int, what: str) -> None:
    """Refuse a header whose shape needs more bytes than the file holds (before anything is mapped)."""
    needed = math.prod(int(n) for n in shape) * dtype.itemsize  # Python ints: no overflow
    if needed > available:
        raise ArrayFileError(
            f"{what}: its header declares shape {tuple(shape)} of {dtype} ({needed:,} bytes) but "
            f"only {max(available, 0):,} bytes follow it; the file is cut short or damaged"
        )


def open_array(path: str, key: str | None = None) -> np.ndarray:
    """Open an array read-only and memory-mapped.

    Args:
        path: A ``.npy`` file, or a ``.npz`` archive.
        key: The member of a ``.npz`` archive.

    Raises:
        ArrayFileError: Unreadable file, missing member, compressed member, object array,
            or a header declaring a shape larger than the file.
    """
    path = os.path.abspath(os.path.expanduser(path))
    if path.lower().endswith(".npz"):
        return _npz_member(path, key or "")
    try:
        with open(path, "rb") as handle:
            shape, fortran, dtype = _read_header(handle, path)
            offset = handle.tell()
            size = os.fstat(handle.fileno()).st_size
    except OSError as exc:
        raise ArrayFileError(f"{path} is not a readable .npy file ({exc.strerror or exc})") from None
    _check_declared_size(shape, dtype, size - offset, path)
    if math.prod(shape) == 0:
        return np.empty(shape, dtype)  # mmap cannot map zero bytes
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")
