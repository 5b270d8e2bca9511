"""Readers for the published file formats: MNIST IDX and CIFAR python pickles.

* IDX (``*-idx3-ubyte.gz``): big-endian header ``0 0 TYPE NDIM`` then
  ``NDIM`` int32 sizes, then the values; type ``0x08`` is unsigned bytes.
* CIFAR "python version": a tar.gz of pickles written by Python 2. Each batch
  is a dict with ``data`` (``N×3072`` uint8, the red, green then blue planes
  of 32×32 images), ``labels`` (CIFAR-10) or ``fine_labels``/``coarse_labels``
  (CIFAR-100) and ``filenames``; ``batches.meta``/``meta`` hold the class names.

The pickles are read with a restricted unpickler that can only rebuild numpy
arrays, so an archive from a mirror cannot run code.
"""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import tarfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DownloadError

_IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not) into a native-endian numpy array.

    Raises:
        DownloadError: The file is not a valid IDX file (the message names it).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as exc:
        raise DownloadError(f"cannot read {path}: {exc}") from exc
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise DownloadError(f"{path} is not an IDX file (bad magic number).")
    dtype = _IDX_TYPES[data[2]]
    ndim = data[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise DownloadError(f"{path} is not an IDX file (bad header).")
    shape = struct.unpack(f">{ndim}i", data[4:header])
    count = int(np.prod(shape))
    if len(data) - header != count * dtype.itemsize:
        raise DownloadError(
            f"{path} is truncated or padded: header says {shape} ({count * dtype.itemsize} bytes of data), "
            f"file has {len(data) - header}."
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """An unpickler that rebuilds numpy arrays and nothing else that could run code."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset pickle")
        if module.startswith("numpy"):
            if name in ("_reconstruct", "scalar"):
                return _np_multiarray(name)
            return getattr(np, name)
        return super().find_class(module, name)


def _np_multiarray(name: str):
    import importlib

    try:
        multiarray = importlib.import_module("numpy._core.multiarray")  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.x
        multiarray = importlib.import_module("numpy.core.multiarray")
    return getattr(multiarray, name)


def _str_keys(obj: dict) -> dict:
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def load_pickle(data: bytes, name: str) -> dict:
    """Load one CIFAR pickle (a dict) safely; keys and names become ``str``.

    Raises:
        DownloadError: The member is not a CIFAR pickle.
    """
    try:
        obj = _NumpyOnlyUnpickler(io.BytesIO(data), encoding="latin1").load()
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise DownloadError(f"{name} is not a readable CIFAR pickle: {exc}") from exc
    if not isinstance(obj, dict):
        raise DownloadError(f"{name} is not a CIFAR pickle (holds {type(obj).__name__}, not a dict).")
    return _str_keys(obj)


class CifarArchive:
    """The members of a CIFAR python tar.gz, read without extracting to disk.

    Args:
        path: The ``cifar-10-python.tar.gz`` or ``cifar-100-python.tar.gz`` file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def read(self, *members: str) -> dict[str, dict]:
        """Return ``{member: unpickled dict}`` for the members whose names end with ``/member``.

        The archive is read once, in order, however many members are asked for.

        Raises:
            DownloadError: The archive is unreadable or lacks a member.
        """
        wanted = set(members)
        found: dict[str, dict] = {}
        try:
            with tarfile.open(self.path, "r:gz") as tar:
                for info in tar:
                    if not info.isfile():
                        continue
                    base = info.name.rsplit("/", 1)[-1]
                    if base in wanted and base not in found:
                        handle = tar.extractfile(info)
                        if handle is None:  # not a regular file after all (checked above)
                            continue
                        found[base] = load_pickle(handle.read(), f"{self.path.name}:{info.name}")
                        if len(found) == len(wanted):
                            break
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise DownloadError(f"cannot read {self.path}: {exc}") from exc
        missing = sorted(wanted - set(found))
        if missing:
            raise DownloadError(f"{self.path} has no member {', '.join(missing)}; is it the right archive?")
        return found


def cifar_batch(
    batch: dict, name: str, label_keys: tuple[str, ...]
) -> tuple[np.ndarray, dict[str, np.ndarray], list[str]]:
    """Decode one CIFAR batch dict into images (``N×32×32×3`` uint8), labels and file names.

    Args:
        batch: From :meth:`CifarArchive.read`.
        name: Names the batch in error messages.
        label_keys: The label lists to return (``("labels",)`` or ``("fine_labels", "coarse_labels")``).

    Raises:
        DownloadError: A key is missing or sizes disagree.
    """
    for key in ("data", "filenames", *label_keys):
        if key not in batch:
            raise DownloadError(f"CIFAR batch {name} has no {key!r} entry.")
    data = np.asarray(batch["data"])
    if data.ndim != 2 or data.shape[1] != 3072:
        raise DownloadError(f"CIFAR batch {name}: data has shape {data.shape}, expected N×3072.")
    count = data.shape[0]
    labels = {}
    for key in label_keys:
        values = np.asarray(batch[key], dtype=np.int64)
        if values.shape != (count,):
            raise DownloadError(f"CIFAR batch {name}: {len(values)} {key} for {count} images.")
        labels[key] = values
    filenames = [_text(f) for f in batch["filenames"]]
    if len(filenames) != count:
        raise DownloadError(f"CIFAR batch {name}: {len(filenames)} filenames for {count} images.")
    images = data.astype(np.uint8, copy=False).reshape(count, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels, filenames


def names(meta: dict, key: str, name: str) -> list[str]:
    """Return the class names list ``meta[key]`` as ``str``."""
    if key not in meta:
        raise DownloadError(f"CIFAR meta file {name} has no {key!r} entry.")
    return [_text(v) for v in meta[key]]


def write_idx(path: str | Path, array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzip-compressed when ``path`` ends with ``.gz``).

    The inverse of :func:`read_idx`, for building test data and mirrors.
    """
    array = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_TYPES.items()}
    code = codes.get(array.dtype.newbyteorder("="))
    if code is None:
        raise ValueError(f"IDX cannot hold dtype {array.dtype}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    payload = header + array.astype(_IDX_TYPES[code]).tobytes()
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as handle:
            handle.write(payload)
    else:
        path.write_bytes(payload)
