"""Jobs on disk: one folder per dataset or model job, described by ``job.json``.

A job folder is named ``YYYYMMDD-HHMMSS-xxxx`` (creation time, 4 random hex
digits) as in DIGITS, inside the jobs folder (see :mod:`digits_core.config`).
``job.json`` holds the job's kind, name, plugin ids, form data and status
history; it is always rewritten atomically (write to a temporary file, then
rename), so a reader never sees half a file.

One owner per job: the process running a job holds an OS lock
(``fcntl.flock``) on ``job.lock`` in its folder, with its pid, host and start
time written in the file. A job is alive exactly while that lock is held,
whoever started it (command line, scheduler worker, resume): the kernel
releases the lock when the owner dies, even by ``kill -9``, so there is no
grace period to wait out. :meth:`Job.set_status` takes the lock when a
process marks a job Running and releases it when that process marks it
finished; :func:`is_job_alive` and :func:`job_lock_owner` answer for any
process, and :meth:`Job.reap` turns a Running job whose owner died into
Aborted.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any

from .config import resolve_jobs_dir
from .errors import JobNotFoundError, JobStateError

JOB_FILE = "job.json"
#: The file in a job folder whose ``flock`` marks the job's one live owner.
LOCK_FILE = "job.lock"
#: Seconds an owner retries while another process briefly probes the lock.
LOCK_PROBE_WAIT_S = 2.0


class JobStatus(str, Enum):
    """A job's state, as DIGITS named them."""

    INITIALIZED = "Initialized"
    WAITING = "Waiting"
    RUNNING = "Running"
    DONE = "Done"
    ERROR = "Error"
    ABORTED = "Aborted"

    @property
    def is_finished(self) -> bool:
        """True for Done, Error and Aborted."""
        return self in (JobStatus.DONE, JobStatus.ERROR, JobStatus.ABORTED)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so readers see the old or the new file, never a mix."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def new_job_id(now: float | None = None) -> str:
    """Return a fresh job id, ``YYYYMMDD-HHMMSS-xxxx``."""
    stamp = datetime.fromtimestamp(now if now is not None else time.time()).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


# -- one owner per job: the job lock ------------------------------------------------------


class JobLockedError(JobStateError):
    """Another live process owns the job (holds its lock).

    Attributes:
        owner: What the owner wrote in the lock file (``pid``, ``host``,
            ``started``, ``command``), or an empty dict if unreadable.
    """

    def __init__(self, job_dir: Path, owner: dict):
        self.owner = owner
        who = describe_owner(owner)
        super().__init__(f"Job {Path(job_dir).name} is running in another process ({who}); "
                         f"stop that process or abort the job first.")


def describe_owner(owner: dict) -> str:
    """``pid 123 on host x since 02:10:00`` from a lock file's content."""
    if not owner:
        return "owner unknown"
    since = ""
    if owner.get("started"):
        since = " since " + datetime.fromtimestamp(float(owner["started"])).strftime("%Y-%m-%d %H:%M:%S")
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
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
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
            owner = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                     "command": " ".join(sys.argv[:3])}
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


class Job:
    """One job folder and its ``job.json``.

    Attributes:
        path: The job folder.
        data: The parsed ``job.json`` (``id``, ``kind``, ``name``, ``created``,
            ``status_history`` and kind-specific keys such as ``plugin_id``
            and ``form_data``).
    """

    def __init__(self, path: str | os.PathLike, data: dict):
        self.path = Path(path)
        self.data = data

    # -- creation and loading --------------------------------------------------

    @classmethod
    def create(cls, kind: str, name: str, *, jobs_dir: str | os.PathLike | None = None, **fields: Any) -> Job:
        """Create a new job folder with status Initialized.

        Args:
            kind: ``"dataset"`` or ``"model"``.
            name: The user's name for the job.
            jobs_dir: The jobs folder (see :func:`~digits_core.config.resolve_jobs_dir`).
            **fields: Extra keys stored in ``job.json`` (plugin ids, form data...).
        """
        root = resolve_jobs_dir(jobs_dir)
        while True:
            job_id = new_job_id()
            path = root / job_id
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        now = time.time()
        data = {
            "id": job_id,
            "kind": kind,
            "name": name,
            "created": now,
            "status_history": [[JobStatus.INITIALIZED.value, now]],
            **fields,
        }
        job = cls(path, data)
        job.save()
        return job

    @classmethod
    def load(cls, path: str | os.PathLike) -> Job:
        """Load the job in folder ``path``.

        Raises:
            JobNotFoundError: The folder has no readable ``job.json``.
        """
        path = Path(path)
        try:
            data = json.loads((path / JOB_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise JobNotFoundError(f"No job in {path} (no {JOB_FILE}).") from exc
        except (OSError, json.JSONDecodeError) as exc:
            raise JobNotFoundError(f"Cannot read {path / JOB_FILE}: {exc}") from exc
        return cls(path, data)

    def save(self) -> None:
        """Rewrite ``job.json`` atomically."""
        write_json_atomic(self.path / JOB_FILE, self.data)

    def reload(self) -> Job:
        """Re-read ``job.json`` (another process may have updated it)."""
        self.data = Job.load(self.path).data
        return self

    # -- properties -------------------------------------------------------------

    @property
    def id(self) -> str:
        """The job id (also its folder name)."""
        return self.data["id"]

    @property
    def kind(self) -> str:
        """``"dataset"`` or ``"model"``."""
        return self.data["kind"]

    @property
    def name(self) -> str:
        """The user's name for the job."""
        return self.data.get("name", "")

    @property
    def status(self) -> JobStatus:
        """The latest status."""
        return JobStatus(self.data["status_history"][-1][0])

    @property
    def error(self) -> str | None:
        """The error message of a job that ended in Error, else ``None``."""
        return self.data.get("error")

    def set_status(self, status: JobStatus | str, *, error: str | None = None) -> None:
        """Append a status to the history and save; calls ``digits_job_status_changed``.

        Marking a job Running makes this process its owner (takes the job
        lock, see :class:`JobLock`); marking it finished from that process
        releases the lock, after the status is saved.

        Args:
            status: The new status.
            error: For Error (or Aborted), the message shown to the user.

        Raises:
            JobLockedError: Status Running while another process owns the job.
        """
        status = JobStatus(status)
        key = _key(self.path)
        if status is JobStatus.RUNNING and key not in _running_holds:
            JobLock(self.path).acquire()
            _running_holds.add(key)
        try:
            self._append_status(status, error)
        finally:
            if status.is_finished and key in _running_holds:
                _running_holds.discard(key)
                _release(key)

    def _append_status(self, status: JobStatus, error: str | None) -> None:
        old = self.status
        self.data["status_history"].append([status.value, time.time()])
        if error is not None:
            self.data["error"] = error
        elif status is JobStatus.RUNNING:
            self.data.pop("error", None)
        self.save()
        if old is not status:
            from .plugin_registry import registry

            registry.call_hook("digits_job_status_changed", job=self, old_status=old.value, new_status=status.value)

    # -- ownership --------------------------------------------------------------

    def acquire_lock(self, *, wait: float | None = None) -> JobLock:
        """Make this process the job's owner; see :class:`JobLock`.

        Raises:
            JobLockedError: Another live process owns the job.
        """
        return JobLock(self.path).acquire(wait=wait)

    @property
    def is_alive(self) -> bool:
        """True while a process (any, this one included) owns the job; see :func:`is_job_alive`."""
        return is_job_alive(self.path)

    @property
    def owner(self) -> dict | None:
        """The live owner's ``pid``, ``host``, ``started`` and ``command``, or ``None``."""
        return job_lock_owner(self.path)

    def reap(self) -> bool:
        """Mark a Running job whose owner died as Aborted; return True if it did.

        Takes the job lock while it writes, so it never races a process that
        is starting (or resuming) the job.
        """
        if self.status is not JobStatus.RUNNING or is_job_alive(self.path):
            return False
        try:
            lock = JobLock(self.path).acquire(wait=0.0)
        except (JobLockedError, OSError):
            return False
        try:
            self.reload()
            if self.status is not JobStatus.RUNNING:
                return False
            self._append_status(JobStatus.ABORTED, "The process running this job ended without finishing it "
                                                   "(killed, or its machine stopped).")
            return True
        finally:
            lock.release()

    def to_dict(self) -> dict:
        """Return ``job.json``'s content plus the current status and folder."""
        return {**self.data, "status": self.status.value, "path": str(self.path)}

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.kind} {self.name!r} {self.status.value}>"


class JobStore:
    """The jobs in one jobs folder.

    Args:
        jobs_dir: The jobs folder; resolved with
            :func:`~digits_core.config.resolve_jobs_dir`.
    """

    def __init__(self, jobs_dir: str | os.PathLike | None = None):
        self.root = resolve_jobs_dir(jobs_dir)

    def __iter__(self) -> Iterator[Job]:
        return iter(self.list())

    def list(self, kind: str | None = None, *, reap: bool = True) -> list[Job]:
        """Return the jobs (newest first), optionally only those of ``kind``.

        With ``reap`` (the default), a Running job whose owner died is marked
        Aborted on the way (see :meth:`Job.reap`).

        Folders without a readable ``job.json`` (e.g. a dataset still being
        built in a temporary folder) are skipped.
        """
        jobs = []
        for child in sorted(self.root.iterdir(), reverse=True):
            if child.name.startswith(".") or not (child / JOB_FILE).is_file():
                continue
            try:
                job = Job.load(child)
            except JobNotFoundError:
                continue
            if reap:
                job.reap()
            if kind is None or job.kind == kind:
                jobs.append(job)
        return jobs

    def get(self, job_id: str, kind: str | None = None) -> Job:
        """Return the job with this id (a unique prefix of it also works).

        A Running job whose owner died comes back Aborted (see :meth:`Job.reap`).

        Raises:
            JobNotFoundError: No such job, or the prefix is ambiguous, or the
                job is of another kind.
        """
        if not job_id or "/" in job_id or "\\" in job_id or job_id.startswith("."):
            raise JobNotFoundError(f'"{job_id}" is not a job id; run `digits dataset list` or `digits model list`.')
        path = self.root / job_id
        if not (path / JOB_FILE).is_file():
            matches = [c for c in self.root.iterdir() if c.name.startswith(job_id) and (c / JOB_FILE).is_file()]
            if len(matches) != 1:
                detail = "matches several jobs" if matches else "does not exist"
                raise JobNotFoundError(f'Job "{job_id}" {detail} in {self.root}.')
            path = matches[0]
        job = Job.load(path)
        job.reap()
        if kind is not None and job.kind != kind:
            raise JobNotFoundError(f'Job "{job_id}" is a {job.kind} job, not a {kind} job.')
        return job

    def delete(self, job_id: str) -> None:
        """Delete a job folder and everything in it.

        Raises:
            JobNotFoundError: No such job.
        """
        job = self.get(job_id)
        shutil.rmtree(job.path)
