"""Volume records: 3-D features (``D×H×W×C``) with their geometry, and ``D×H×W`` class-id label volumes.

A data plugin whose class says ``data_layout = "DHWC"`` returns, from
``encode_entry``, a pair ``(Volume, label)``: a :class:`Volume` (the array,
its voxel spacing in mm along D, H and W, and the 4×4 affine that maps voxel
indexes to patient coordinates) and a ``D×H×W`` integer array of class ids.

Each stage's LMDB environment stores a case as slabs, so no case is one
huge value and a patch read touches only the slabs it overlaps::

    key                     value
    b"%08d" % i             JSON: shape, dtypes, spacing, affine, slab depth, name
    b"%08d/f%05d" % (i, s)  feature slices [s*slab, (s+1)*slab) as raw little-endian bytes
    b"%08d/l%05d" % (i, s)  label slices of the same range

A slab holds about :data:`SLAB_BYTES` of feature (at least one slice).
Published volume datasets say ``"layout": "DHWC"`` in ``dataset.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import DatasetError
from ..interfaces.records import add_histograms
from ..interfaces.volume import Volume as Volume
from ..interfaces.volume import check_volume_pair as check_volume_pair
from .storage import REMAP_BYTES

#: The ``dataset.json`` layout of volume datasets.
VOLUME_LAYOUT = "DHWC"
#: Target bytes of one slab of feature slices.
SLAB_BYTES = 4 << 20
#: Map size a new volume stage starts with (doubled when full).
INITIAL_MAP_SIZE = 64 << 20


class VolumeMeta(NamedTuple):
    """What one stored case says about itself (the value under its index key)."""

    shape: tuple
    dtype: str
    label_dtype: str
    spacing: tuple
    affine: list
    slab: int
    name: str

    def to_json(self) -> bytes:
        return json.dumps(self._asdict()).encode()

    @classmethod
    def from_json(cls, data: bytes) -> VolumeMeta:
        raw = json.loads(bytes(data))
        return cls(
            tuple(raw["shape"]),
            raw["dtype"],
            raw["label_dtype"],
            tuple(raw["spacing"]),
            raw["affine"],
            int(raw["slab"]),
            raw.get("name", ""),
        )


def slab_depth(shape: Sequence[int], itemsize: int) -> int:
    """Slices per slab for a ``D×H×W×C`` volume of ``itemsize``-byte voxels."""
    per_slice = int(np.prod(shape[1:])) * itemsize
    return max(1, min(int(shape[0]), SLAB_BYTES // max(per_slice, 1)))


def _slab_key(index: int, part: str, slab: int) -> bytes:
    return b"%08d/%s%05d" % (index, part.encode(), slab)


class VolumeStageWriter:
    """Writes the cases of one stage (one transaction per slab; the map grows when full).

    Attributes:
        count: Cases written so far (the next case's index).
    """

    def __init__(self, path: str | os.PathLike):
        import lmdb

        self._lmdb = lmdb
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.env: Any = self._open(INITIAL_MAP_SIZE)
        self.count = 0
        self._written = 0

    def _open(self, map_size: int) -> Any:
        return self._lmdb.open(
            str(self.path), map_size=map_size, subdir=True, sync=False, metasync=False, readahead=False, max_dbs=0
        )

    def append(self, volume: Volume, label: np.ndarray) -> VolumeMeta:
        """Store one checked case (see :func:`check_volume_pair`) as the next index; return its metadata.

        The case goes in slab by slab, one transaction each, and its index key last: memory stays at one
        slab's bytes whatever the case's size, and a case is visible only once all its slabs are in.
        """
        arr = volume.array
        slab = slab_depth(arr.shape, arr.dtype.itemsize)
        meta = VolumeMeta(
            tuple(int(s) for s in arr.shape),
            arr.dtype.name,
            label.dtype.name,
            tuple(volume.spacing),
            np.asarray(volume.affine).tolist(),
            slab,
            volume.name,
        )
        for s, start in enumerate(range(0, arr.shape[0], slab)):
            self._put(
                [
                    (_slab_key(self.count, "f", s), arr[start : start + slab].tobytes()),
                    (_slab_key(self.count, "l", s), label[start : start + slab].tobytes()),
                ]
            )
        self._put([(b"%08d" % self.count, meta.to_json())])
        self.count += 1
        return meta

    def _put(self, items: list[tuple[bytes, bytes]]) -> None:
        """Write ``items`` in one transaction (the map doubled while full); unmap written pages now and then."""
        while True:
            txn = self.env.begin(write=True)
            try:
                for key, value in items:
                    txn.put(key, value)
                txn.commit()
                break
            except self._lmdb.MapFullError:
                txn.abort()
                size = self.env.info()["map_size"]
                self.env.set_mapsize(size * 2 + sum(len(v) for _, v in items))
            except BaseException:
                txn.abort()
                raise
        self._written += sum(len(v) for _, v in items)
        if self._written >= REMAP_BYTES:  # written pages leave this process's memory: flat as the stage grows
            map_size = self.env.info()["map_size"]
            self.env.close()
            self.env = self._open(map_size)
            self._written = 0

    def close(self) -> None:
        """Flush and close the environment."""
        if self.env is not None:
            self.env.sync(True)
            self.env.close()
            self.env = None


class VolumeStageReader:
    """Reads cases and patches of one published volume stage.

    Args:
        path: The stage's LMDB folder.
    """

    def __init__(self, path: str | os.PathLike):
        import lmdb

        self.path = Path(path)
        if not (self.path / "data.mdb").is_file():
            raise DatasetError(f"{self.path} holds no volume stage (no data.mdb)")
        self.env = lmdb.open(str(self.path), readonly=True, lock=False, subdir=True, readahead=False)
        self._metas: dict[int, VolumeMeta] = {}

    def meta(self, index: int) -> VolumeMeta:
        """The stored metadata of case ``index``."""
        if index not in self._metas:
            with self.env.begin() as txn:
                raw = txn.get(b"%08d" % index)
            if raw is None:
                raise DatasetError(f"{self.path}: no case {index}")
            self._metas[index] = VolumeMeta.from_json(raw)
        return self._metas[index]

    def case(self, index: int) -> tuple[Volume, np.ndarray]:
        """The whole case ``index``: ``(Volume, D×H×W label)``."""
        meta = self.meta(index)
        image, label = self.patch(index, (0, 0, 0), meta.shape[:3])
        return Volume(image, meta.spacing, np.asarray(meta.affine), meta.name), label

    def patch(self, index: int, start: Sequence[int], size: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Read ``size`` voxels from ``start`` (D, H, W; clipped to the volume) reading only the slabs they touch.

        Returns:
            ``(D×H×W×C feature, D×H×W label)`` copies.
        """
        meta = self.meta(index)
        d0 = max(0, int(start[0]))
        d1 = min(meta.shape[0], d0 + int(size[0]))
        h0, w0 = max(0, int(start[1])), max(0, int(start[2]))
        hs, ws = slice(h0, h0 + int(size[1])), slice(w0, w0 + int(size[2]))
        fdtype = np.dtype(meta.dtype).newbyteorder("<")
        ldtype = np.dtype(meta.label_dtype).newbyteorder("<")
        features, labels = [], []
        with self.env.begin(buffers=True) as txn:
            for s in range(d0 // meta.slab, (d1 - 1) // meta.slab + 1):
                lo = s * meta.slab
                sel = slice(max(d0 - lo, 0), min(d1 - lo, meta.slab))
                fraw, lraw = txn.get(_slab_key(index, "f", s)), txn.get(_slab_key(index, "l", s))
                if fraw is None or lraw is None:
                    raise DatasetError(f"{self.path}: case {index} lacks slab {s}; the stage is damaged")
                fbuf = np.frombuffer(fraw, dtype=fdtype).reshape((-1,) + meta.shape[1:])
                lbuf = np.frombuffer(lraw, dtype=ldtype).reshape((-1,) + meta.shape[1:3])
                features.append(fbuf[sel, hs, ws].astype(meta.dtype))
                labels.append(lbuf[sel, hs, ws].astype(meta.label_dtype))
        return np.concatenate(features), np.concatenate(labels)

    def close(self) -> None:
        """Close the environment."""
        self.env.close()


class VolumeStats:
    """Per-stage statistics for ``dataset.json``: spacings, shapes, the per-class voxel histogram."""

    def __init__(self) -> None:
        self.spacings: list[tuple] = []
        self.shapes: list[tuple] = []
        self.histogram: np.ndarray = np.zeros(0, np.int64)
        self.dtypes: set[str] = set()
        self.label_dtypes: set[str] = set()

    def add(self, meta: VolumeMeta, label: np.ndarray) -> None:
        """Account for one stored case."""
        self.spacings.append(meta.spacing)
        self.shapes.append(meta.shape)
        self.dtypes.add(meta.dtype)
        self.label_dtypes.add(meta.label_dtype)
        total = add_histograms(self.histogram, np.bincount(label.ravel().astype(np.int64)))
        self.histogram = total if total is not None else self.histogram

    def info(self) -> dict:
        """The stage's ``dataset.json`` entry."""
        return {
            "count": len(self.shapes),
            "shapes": [list(s) for s in self.shapes],
            "median_spacing": median_spacing(self.spacings),
            "label_histogram": self.histogram.tolist(),
        }


def median_spacing(spacings: Sequence[Sequence[float]]) -> list[float] | None:
    """The per-axis median of voxel spacings (D, H, W), as nnU-Net reports it; ``None`` for no cases."""
    if not spacings:
        return None
    return [round(float(v), 6) for v in np.median(np.asarray(spacings, dtype=np.float64), axis=0)]
