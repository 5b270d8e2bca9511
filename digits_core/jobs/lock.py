"""One owner per job: the OS lock on ``job.lock`` in a job folder.

The process running a job holds an OS lock (``fcntl.flock``) on ``job.lock``
in its folder, with its pid, host and start time written in the file. A job
is alive exactly while that lock is held, whoever started it (command line,
scheduler worker, resume): the kernel releases the lock when the owner dies,
even by ``kill -9``, so there is no grace period to wait out.
:meth:`~digits_core.jobs.Job.set_status` takes the lock (:func:`hold_while_running`)
when a process marks a job Running and releases it
(:func:`release_running_hold`) when that process marks it finished;
:func:`is_job_alive` and :func:`job_lock_owner` answer for any process.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ..errors import JobStateError
from .readers import UnreadableRecordError, read_json_record

#: The file in a job folder whose ``flock`` marks the job's one live owner.
LOCK_FILE = "job.lock"
#: Seconds an owner retries while another process briefly probes the lock.
LOCK_PROBE_WAIT_S = 2.0


class JobLockedError(JobStateError):
    """Another live process owns the job (holds its lock).

    Attributes:
        owner: What the owner wrote in the lock file (``pid``, ``host``,
            ``started``, ``command``), or an empty dict if unreadable.
    """

    def __init__(self, job_dir: Path, owner: dict):
        self.owner = owner
        who = describe_owner(owner)
        super().__init__(
            f"Job {Path(job_dir).name} is running in another process ({who}); stop that process or abort the job first."
        )


def describe_owner(owner: dict) -> str:
    """``pid 123 on host x since 02:10:00`` from a lock file's content."""
    if not owner:
        return "owner unknown"
    since = ""
    started = owner.get("started")
    if isinstance(started, (int, float)) and 0 < started < 253402300799:  # the lock file is read, not trusted
        since = " since " + datetime.fromtimestamp(float(started)).strftime("%Y-%m-%d %H:%M:%S")
    return f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}{since}"


_held_lock = threading.RLock()
#: Locks this process holds: real job folder -> [fd, hold count].
_held: dict[str, list] = {}
#: Job folders this process marked Running (so it releases the lock when it marks them finished).
_running_holds: set[str] = set()


def _key(job_dir: str | os.PathLike) -> str:
    return os.path.realpath(os.fspath(job_dir))


def _read_owner(path: Path) -> dict:
    try:
        data = read_json_record(path, max_bytes=64 * 1024)
    except (OSError, UnreadableRecordError):
        return {}
    return data if isinstance(data, dict) else {}


class JobLock:
    """The lock that makes this process the one owner of a job folder.

    Re-entrant within a process: acquiring a lock the process already holds
    only counts a hold; the OS lock goes when the last hold is released or
    the process dies. Usable as a context manager::

        with JobLock(job.path):
            ...  # no other process can run this job meanwhile

    Args:
        job_dir: The job folder.
    """

    def __init__(self, job_dir: str | os.PathLike):
        self.job_dir = Path(job_dir)
        self._acquired = False

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.job_dir / LOCK_FILE

    def acquire(self, *, wait: float | None = None) -> JobLock:
        """Take the lock, or raise :class:`JobLockedError` if another process holds it.

        Args:
            wait: Seconds to retry while the lock is busy (a reader probing
                it holds it for microseconds; default
                :data:`LOCK_PROBE_WAIT_S`); a live owner outlasts this.

        Raises:
            JobLockedError: Another process owns the job.
        """
        if self._acquired:
            return self
        key = _key(self.job_dir)
        with _held_lock:
            entry = _held.get(key)
            if entry is not None:
                entry[1] += 1
                self._acquired = True
                return self
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            deadline = time.monotonic() + (LOCK_PROBE_WAIT_S if wait is None else wait)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                        os.close(fd)
                        raise
                    if time.monotonic() >= deadline:
                        os.close(fd)
                        raise JobLockedError(self.job_dir, _read_owner(self.path)) from None
                    time.sleep(0.01)
            owner = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.time(),
                "command": " ".join(sys.argv[:3]),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(owner) + "\n").encode("utf-8"), 0)
            _held[key] = [fd, 1]
            self._acquired = True
        return self

    def release(self) -> None:
        """Release this hold; the OS lock goes with the process's last hold."""
        if not self._acquired:
            return
        self._acquired = False
        _release(_key(self.job_dir))

    def __enter__(self) -> JobLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _release(key: str) -> None:
    with _held_lock:
        entry = _held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _held[key]
        fd = entry[0]
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        # LOCK_UN, not just close: a forked child holding a copy of fd must not keep the job alive.
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _forget_locks_in_child() -> None:
    """A forked child (e.g. a dataset encoder worker) owns none of its parent's jobs.

    Closing its copies of the lock descriptors (without LOCK_UN, which would
    release the parent's lock) means a job is dead the moment its owner dies,
    even while killed children are still exiting.
    """
    for fd, _count in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()
    _running_holds.clear()
    _watched.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks_in_child)


def holds_job_lock(job_dir: str | os.PathLike) -> bool:
    """True if this process owns the job folder's lock."""
    with _held_lock:
        return _key(job_dir) in _held


def is_job_alive(job_dir: str | os.PathLike) -> bool:
    """True while some process (this one included) holds the job's lock.

    The answer needs no grace period: the kernel drops the lock the moment
    its owner dies, however it died.
    """
    if holds_job_lock(job_dir):
        return True
    path = Path(job_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
            return True
        raise
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def job_lock_owner(job_dir: str | os.PathLike) -> dict | None:
    """The live owner of a job (``pid``, ``host``, ``started``, ``command``), or ``None``."""
    if not is_job_alive(job_dir):
        return None
    return _read_owner(Path(job_dir) / LOCK_FILE)


#: Job folders whose worker a scheduler of this process started and still watches (see :func:`watch_worker`).
_watched: set[str] = set()


def watch_worker(job_dir: str | os.PathLike) -> None:
    """Say that a scheduler of this process started the job's worker and will record how it ends.

    When that worker dies its lock goes at once, but the scheduler learns the
    exit status (the signal that killed it) only at its next look; until it
    has written it (:func:`unwatch_worker`), :meth:`~digits_core.jobs.Job.reap`
    leaves the job alone, so a page listing jobs meanwhile does not write a
    vaguer "ended without finishing it" first.
    """
    with _held_lock:
        _watched.add(_key(job_dir))


def unwatch_worker(job_dir: str | os.PathLike) -> None:
    """The scheduler recorded how the job's worker ended (or gave it up): reaping applies again."""
    with _held_lock:
        _watched.discard(_key(job_dir))


def is_worker_watched(job_dir: str | os.PathLike) -> bool:
    """True while a scheduler of this process watches the job's worker (:func:`watch_worker`)."""
    with _held_lock:
        return _key(job_dir) in _watched


def hold_while_running(job_dir: str | os.PathLike) -> None:
    """Take the job's lock for as long as this process runs the job (once per job).

    Raises:
        JobLockedError: Another live process owns the job.
    """
    key = _key(job_dir)
    with _held_lock:
        if key in _running_holds:
            return
        JobLock(job_dir).acquire()
        _running_holds.add(key)


def release_running_hold(job_dir: str | os.PathLike) -> None:
    """Give up the hold :func:`hold_while_running` took, if this process has one."""
    key = _key(job_dir)
    with _held_lock:
        if key not in _running_holds:
            return
        _running_holds.discard(key)
        _release(key)


@contextmanager
def record_lock(job_dir: str | os.PathLike) -> Iterator[None]:
    """Hold the job folder's record lock while a process re-reads, changes and rewrites ``job.json``.

    A short ``flock`` on the job folder itself (no extra file), separate from
    the owner lock on ``job.lock``: any process (the owner, the scheduler, a
    listing that reaps) may update a record, and two that do so at once take
    turns instead of one losing the other's keys. Not re-entrant: hold it
    only around the read-modify-write, never while calling out.
    """
    fd = os.open(job_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the flock
