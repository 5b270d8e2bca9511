"""LMDB environments of a dataset: one per stage, keys are record indexes.

Record ``i`` of a stage is stored under the key ``b"%08d" % i`` (8 ASCII
digits, so LMDB's byte order is index order and a range of records is one
cursor walk). The writer grows the map when LMDB raises ``MapFullError``.

The writer maps the file (``writemap``), so a page written where the disk
has no block left would kill the process with SIGBUS, with no message. So
each transaction first reserves the blocks it may touch
(``posix_fallocate``); on a full disk that fails with an ordinary
``OSError`` (ENOSPC), which the dataset job reports as "disk full".
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence
from itertools import islice
from pathlib import Path

import lmdb

#: Map size a new stage starts with (it grows by doubling as needed).
INITIAL_MAP_SIZE = 64 << 20
#: The writer reopens its environment after writing this many bytes (see StageWriter._remap): a reopen
#: costs ~0.2 ms, and the written pages it unmaps would otherwise grow the job's memory with the dataset.
REMAP_BYTES = 8 << 20


def record_key(index: int) -> bytes:
    """Return the LMDB key of record ``index``."""
    return b"%08d" % index


class StageWriter:
    """Append-only writer of one stage's LMDB environment.

    Args:
        path: The environment folder (created).
        map_size: Initial map size in bytes; doubled on ``MapFullError``.

    Attributes:
        count: Records written so far (the next record's index).
        map_grows: How many times the map was grown.
    """

    def __init__(self, path: str | os.PathLike, *, map_size: int = INITIAL_MAP_SIZE):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        # sync/metasync off while writing; close() syncs once before publishing.
        # writemap: records are copied straight into the file's mapping (no
        # malloc'd page copies written out at commit: half the parent's work
        # for big images); new pages come zero-filled from the filesystem, so
        # no stale heap bytes (secrets such as S3 keys) reach the file.
        self.env = self._open(map_size)
        self.count = 0
        self.map_grows = 0
        self._mapped_bytes = 0

    def _open(self, map_size: int) -> lmdb.Environment:
        return lmdb.open(
            str(self.path),
            map_size=map_size,
            subdir=True,
            readahead=False,
            meminit=True,
            sync=False,
            metasync=False,
            max_dbs=0,
            lock=True,
            writemap=True,
        )

    def _remap(self) -> None:
        """Reopen the environment: the pages written so far leave this process's memory (they stay in the file)."""
        map_size = self.env.info()["map_size"]
        self.env.close()
        self.env = self._open(map_size)
        self._mapped_bytes = 0

    def append(self, records: Sequence[bytes]) -> None:
        """Write ``records`` as the next indexes, in one transaction (grown and retried if full)."""
        if not records:
            return
        items = list(zip([b"%08d" % i for i in range(self.count, self.count + len(records))], records))
        while True:
            self._reserve(sum(len(v) + 64 for _, v in items) * 2 + (1 << 20))
            txn = self.env.begin(write=True)
            try:
                txn.cursor().putmulti(items, dupdata=False, overwrite=True, append=True)
                txn.commit()
                break
            except lmdb.MapFullError:
                txn.abort()
                needed = sum(len(v) + 64 for _, v in items) * 2
                new_size = max(self.env.info()["map_size"] * 2, self.env.info()["map_size"] + needed)
                self.env.set_mapsize(new_size)
                self.map_grows += 1
            except BaseException:
                txn.abort()
                raise
        self.count += len(records)
        # Written pages stay mapped (resident) until unmapped: bound that, so memory does not grow with the dataset.
        self._mapped_bytes += sum(len(v) for _, v in items)
        if self._mapped_bytes >= REMAP_BYTES:
            self._remap()

    def _reserve(self, size: int) -> None:
        """Give the file real blocks for the next ``size`` bytes after its used pages (within the map).

        Raises:
            OSError: ENOSPC (or EDQUOT) when the disk cannot hold them.
        """
        if not hasattr(os, "posix_fallocate"):
            return
        used = (self.env.info()["last_pgno"] + 1) * self.env.stat()["psize"]
        fd = os.open(self.path / "data.mdb", os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        try:
            end = min(used + size, os.fstat(fd).st_size)
            if end > used:
                os.posix_fallocate(fd, used, end - used)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):  # a filesystem without fallocate
                raise
        finally:
            os.close(fd)

    def close(self) -> None:
        """Flush to disk, close the environment and cut the file to its used pages.

        With ``writemap`` LMDB sizes the file to the whole map; the pages past
        ``last_pgno`` are never read, so the file keeps only the used ones.
        """
        if self.env is not None:
            used = (self.env.info()["last_pgno"] + 1) * self.env.stat()["psize"]
            self.env.sync(True)
            self.env.close()
            self.env = None  # type: ignore[assignment]  # closed: the writer is not used after close()
            data = self.path / "data.mdb"
            if data.stat().st_size > used:
                os.truncate(data, used)


_readers: dict[tuple[int, str], list] = {}  # (pid, path) -> [environment, users]
_readers_lock = threading.Lock()


def open_reader(path: str | os.PathLike) -> lmdb.Environment:
    """Return the read-only environment of a published stage, shared by the whole process.

    LMDB allows one open environment per file per process, so every reader
    of the same stage (several :class:`~digits_core.datasets.Dataset`
    objects, threads) shares one. Each call counts as one user until
    :func:`release_reader`; the environment closes when the last user
    releases it. Published datasets never change, so no lock file is used.
    """
    key = (os.getpid(), str(Path(path).resolve()))
    with _readers_lock:
        slot = _readers.get(key)
        if slot is None:
            env = lmdb.open(key[1], readonly=True, lock=False, subdir=True, readahead=True, max_readers=512)
            slot = _readers[key] = [env, 0]
        slot[1] += 1
        return slot[0]


def release_reader(path: str | os.PathLike) -> None:
    """Drop one user of ``path``'s shared environment; the last one closes it."""
    key = (os.getpid(), str(Path(path).resolve()))
    with _readers_lock:
        slot = _readers.get(key)
        if slot is None:
            return
        slot[1] -= 1
        if slot[1] > 0:
            return
        del _readers[key]
    slot[0].close()


def close_reader(path: str | os.PathLike) -> None:
    """Close ``path``'s shared environment now, whoever uses it (e.g. before deleting the files)."""
    key = (os.getpid(), str(Path(path).resolve()))
    with _readers_lock:
        slot = _readers.pop(key, None)
    if slot is not None:
        slot[0].close()


def read_range(env: lmdb.Environment, start: int, stop: int) -> list[bytes]:
    """Return the records ``start..stop-1`` with one transaction and one cursor walk."""
    if stop <= start:
        return []
    with env.begin(buffers=False) as txn:
        cursor = txn.cursor()
        if not cursor.set_key(record_key(start)):
            return []
        return list(islice(cursor.iternext(keys=False, values=True), stop - start))


def read_keys(env: lmdb.Environment, indexes: Sequence[int]) -> list[bytes]:
    """Return the records at arbitrary ``indexes`` (one transaction, ``getmulti``)."""
    with env.begin(buffers=False) as txn:
        pairs = txn.cursor().getmulti([record_key(int(i)) for i in indexes])
    return [value for _, value in pairs]
