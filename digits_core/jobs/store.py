"""The job store's folders and `job.json` (:class:`Job`, :class:`JobStore`); the package re-exports them.

A job folder is named ``YYYYMMDD-HHMMSS-xxxx`` (creation time, 4 random hex
digits) as in DIGITS, inside the jobs folder (see :mod:`digits_core.config`).
``job.json`` holds the job's kind, name, plugin ids, form data and status
history; it is always rewritten atomically (write to a temporary file, then
rename), so a reader never sees half a file. Its keys are declared, with
their types and a schema version, in :mod:`digits_core.jobs.record`.

One owner per job (:mod:`digits_core.jobs.lock`, re-exported here): the
process running a job holds an OS lock on ``job.lock`` in its folder;
:meth:`Job.set_status` takes it when a process marks a job Running and
releases it when that process marks it finished, and :meth:`Job.reap` turns
a Running job whose owner died into Aborted.

One writer API: code changes a job record only through the intent methods
:meth:`Job.update`, :meth:`Job.forget`, :meth:`Job.set_status`,
:meth:`Job.finish`, :meth:`Job.resume` and :meth:`Job.record_encoding`
(a model job's ``model.json`` and ``metrics.jsonl``: :meth:`Job.update_model`,
:meth:`Job.add_snapshot`, :meth:`Job.record_metric`, see :mod:`digits_core.jobs.model`).
Each re-reads ``job.json``, changes it and rewrites it under the folder's
record lock (:func:`~digits_core.jobs.lock.record_lock`), so two processes
updating one job at once lose nothing; a status change is checked against
the transition table of :mod:`digits_core.jobs.status` (an illegal one
raises :class:`~digits_core.jobs.status.IllegalTransitionError`).

Why one module: :class:`Job` and :class:`JobStore` are the two halves of one
read path (a folder's ``job.json``, the folders of a jobs folder, and what is
reported when one cannot be read); split, each would import the other.
"""

from __future__ import annotations

import copy
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import resolve_jobs_dir
from ..errors import JobNotFoundError
from ..faults import disk_error, raise_if_disk_full
from .checks import check_job_name
from .lock import (
    LOCK_FILE,
    JobLock,
    JobLockedError,
    hold_while_running,
    holds_job_lock,
    is_job_alive,
    is_worker_watched,
    job_lock_owner,
    record_lock,
    release_running_hold,
)
from .model import ModelJobFiles
from .readers import UnreadableRecordError, read_json_record
from .record import (
    SCHEMA_VERSION,
    JobFields,
    JobRecord,
    JobRecordError,
    JobRecordView,
    check_job_record,
    new_job_id,
    write_json_atomic,
)
from .status import (
    IllegalTransitionError,
    JobStatus,
    append_status,
    check_transition,
    notify_status_changed,
)

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

JOB_FILE = "job.json"
_UNSET = object()
_Jobs = list["Job"]  # (JobStore.list shadows the builtin in its class body)
_Unreadables = list["UnreadableJob"]


class Job(JobRecordView, ModelJobFiles):
    """One job folder and its ``job.json``.

    Attributes:
        path: The job folder.
        data: The parsed ``job.json``, a :class:`~digits_core.jobs.record.JobRecord`
            (``id``, ``kind``, ``name``, ``created``, ``status_history`` and
            kind-specific keys such as ``plugin_id`` and ``form_data``). Read
            the common keys through the properties below.
    """

    def __init__(self, path: str | os.PathLike, data: JobRecord):
        self.path = Path(path)
        self.data = data
        self._synced = copy.deepcopy(data)  # the record as last read or written: what `data` changed since

    # -- creation and loading --------------------------------------------------

    @classmethod
    def create(
        cls,
        kind: str,
        name: str,
        *,
        jobs_dir: str | os.PathLike | None = None,
        hold: bool = False,
        **fields: Unpack[JobFields],
    ) -> Job:
        """Create a new job folder with status Initialized.

        Args:
            kind: ``"dataset"`` or ``"model"``.
            name: The user's name for the job (at most
                :data:`~digits_core.jobs.record.MAX_JOB_NAME_LENGTH` characters).
            jobs_dir: The jobs folder (see :func:`~digits_core.config.resolve_jobs_dir`).
            hold: This process will run the job itself: it owns the job from
                this moment (as :meth:`set_status` Running does), so a kill
                before the run starts leaves a job that listings show Aborted,
                not one Initialized forever. Jobs queued for another process
                (the web UI's) are created without it.
            **fields: Extra keys stored in ``job.json`` (plugin ids, form data...).

        Raises:
            FormValidationError: The name is too long or not text (nothing is created).
        """
        check_job_name(name)  # before anything exists on disk
        root = resolve_jobs_dir(jobs_dir)
        while True:
            job_id = new_job_id()
            path = root / job_id
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
            except OSError as exc:
                raise_if_disk_full(exc, root)
                raise
        try:
            if hold:  # before job.json exists: no moment where the job is on disk without its owner
                hold_while_running(path)
            now = time.time()
            data = {
                "schema_version": SCHEMA_VERSION,
                "id": job_id,
                "kind": kind,
                "name": name,
                "created": now,
                "status_history": [[JobStatus.INITIALIZED.value, now]],
                **fields,
            }
            job = cls(path, check_job_record(data, path / JOB_FILE))
            job.save()
        except BaseException as exc:
            _remove_new_job(path)  # nothing half-made stays
            raise_if_disk_full(exc, root)
            raise
        return job

    @contextmanager
    def removed_if_disk_full(self) -> Iterator[Job]:
        """The writes that make a new job ready (options, queueing): on a full disk, remove the job and say so.

        A job that cannot be completed would otherwise stay ``Initialized`` forever, its folder half-made.

        Raises:
            DiskFullError: A write hit a full disk (or quota, or an I/O error); the job folder is gone.
        """
        try:
            yield self
        except Exception as exc:
            if disk_error(exc) is None:
                raise
            _remove_new_job(self.path)
            raise_if_disk_full(exc, self.path.parent)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> Job:
        """Load the job in folder ``path``.

        ``job.json`` is read as possibly hostile input (bounded size and nesting,
        strict UTF-8 and numbers; see :mod:`digits_core.jobs.readers`).

        Raises:
            JobNotFoundError: The folder has no ``job.json``.
            JobRecordError: ``job.json`` cannot be read, is malformed or is from a newer schema
                (a :class:`~digits_core.errors.JobNotFoundError`; ``file`` and ``reason`` say what is wrong).
        """
        path = Path(path)
        try:
            data = read_json_record(path / JOB_FILE)
        except FileNotFoundError as exc:
            raise JobNotFoundError(f"No job in {path} (no {JOB_FILE}).") from exc
        except UnreadableRecordError as exc:
            raise JobRecordError(exc.file, exc.reason) from None
        return cls(path, check_job_record(data, path / JOB_FILE))

    def save(self) -> None:
        """Rewrite ``job.json`` atomically with :attr:`data` as it is in memory.

        The last writer wins: a key another process wrote since this one read
        the record is lost. Code that changes a record uses the intent methods
        (:meth:`update`, :meth:`set_status`, ...), which cannot lose an update.
        """
        write_json_atomic(self.path / JOB_FILE, self.data)
        self._synced = copy.deepcopy(self.data)

    def reload(self) -> Job:
        """Re-read ``job.json`` (another process may have updated it); unsaved changes to :attr:`data` go."""
        self.data = Job.load(self.path).data
        self._synced = copy.deepcopy(self.data)
        return self

    # -- the writer API: re-read, change, rewrite under the record lock ---------

    def _change(self, change: Callable[[JobRecord], bool | None]) -> None:
        """Apply ``change`` to the record on disk and save it, under the record lock.

        ``change`` gets the freshly read record and returns False when it
        changed nothing (then nothing is written). Keys this object's
        :attr:`data` set or removed since it was read (older code's
        ``job.data[key] = ...``) are carried over first; the status history
        is the one on disk. :attr:`data` ends up as what is on disk.
        """
        with record_lock(self.path):
            fresh = Job.load(self.path).data
            pending = {k: v for k, v in self.data.items() if k != "status_history" and self._synced.get(k, _UNSET) != v}
            removed = [k for k in self._synced if k not in self.data]
            fresh.update(pending)  # type: ignore[typeddict-item]
            for key in removed:
                fresh.pop(key, None)  # type: ignore[misc]
            if change(fresh) is not False or pending or removed:
                write_json_atomic(self.path / JOB_FILE, fresh)
            self.data, self._synced = fresh, copy.deepcopy(fresh)

    def update(self, **fields: Unpack[JobFields]) -> Job:
        """Set these ``job.json`` keys (declared in :class:`~digits_core.jobs.record.JobFields`).

        Keys other processes wrote meanwhile are kept. Returns the job.
        """
        self._change(lambda record: record.update(fields))
        return self

    def rename(self, name: str) -> Job:
        """Give the job a new user-facing name (``job.json`` key ``name``, a core key). Returns the job."""

        def set_name(record: JobRecord) -> None:
            record["name"] = name

        check_job_name(name, what="job name")
        self._change(set_name)
        return self

    def forget(self, *keys: str) -> Job:
        """Remove these keys from ``job.json`` (missing ones are ignored). Returns the job."""

        def drop(record: JobRecord) -> bool:
            present = [key for key in keys if key in record]
            for key in present:
                record.pop(key)  # type: ignore[misc]
            return bool(present)

        self._change(drop)
        return self

    def record_encoding(self, encoding: dict[str, Any]) -> Job:
        """Record where a dataset job's entries were encoded (``placement["encoding"]``). Returns the job."""

        def merge(record: JobRecord) -> None:
            record["placement"] = {**(record.get("placement") or {}), "encoding": encoding}

        self._change(merge)
        return self

    def set_status(
        self, status: JobStatus | str, *, error: str | None = None, reopen: bool = False, **fields: Unpack[JobFields]
    ) -> None:
        """Append a status to the history (and set ``fields``) in one locked write; tell the listeners.

        The move is checked against :data:`~digits_core.jobs.status.TRANSITIONS`
        using the status on disk, so a job another process already finished is
        not overwritten. Marking a job Running makes this process its owner
        (takes the job lock, see :class:`JobLock`); marking it finished from
        that process releases the lock, after the status is saved. The
        listeners (the ``digits_job_status_changed`` hook) run afterwards,
        outside the record lock.

        Args:
            status: The new status.
            error: For Error (or Aborted), the message shown to the user.
            reopen: Allow a finished job to move back to Waiting or Running
                (prefer :meth:`resume`).
            **fields: ``job.json`` keys to set in the same write.

        Raises:
            IllegalTransitionError: The transition table does not allow the move.
            JobLockedError: Status Running while another process owns the job.
        """
        status = JobStatus(status)
        held_before = holds_job_lock(self.path)
        if status is JobStatus.RUNNING:
            check_transition(self.id, Job.load(self.path).status, status, reopen=reopen)
            hold_while_running(self.path)
        old: list[JobStatus] = []
        try:
            self._change(lambda rec: old.append(append_status(rec, status, error, reopen=reopen, fields=fields)))
        except IllegalTransitionError:
            if status is JobStatus.RUNNING and not held_before:
                release_running_hold(self.path)
            raise
        finally:
            if status.is_finished:
                release_running_hold(self.path)
        notify_status_changed(self, old[0], status)

    def finish(self, status: JobStatus | str, *, error: str | None = None, **fields: Unpack[JobFields]) -> None:
        """End the job: a terminal status (Done, Error, Aborted) and its result ``fields`` in one write.

        Raises:
            IllegalTransitionError: ``status`` is not terminal, or the job already finished.
        """
        status = JobStatus(status)
        if not status.is_finished:
            raise IllegalTransitionError(f"Job {self.id}: finish() takes Done, Error or Aborted, not {status.value}.")
        self.set_status(status, error=error, **fields)

    def resume(self, status: JobStatus | str = JobStatus.WAITING, **fields: Unpack[JobFields]) -> None:
        """Move a finished job back to work (Waiting for a scheduler, Running for this process).

        Raises:
            IllegalTransitionError: The job is not finished, or ``status`` is not Waiting/Running.
        """
        current = Job.load(self.path).status
        if not current.is_finished:
            raise IllegalTransitionError(f"Job {self.id} is {current.value}; only a finished job can be resumed.")
        self.set_status(status, reopen=True, **fields)

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

        An Initialized job that was owned from its creation (``Job.create(...,
        hold=True)``: a ``digits`` command killed before its run started) is
        reaped too; one that never had an owner (queued by the web UI) is not.
        Takes the job lock while it writes, so it never races a process that
        is starting (or resuming) the job. A job whose worker a scheduler of
        this process watches (:func:`~digits_core.jobs.lock.watch_worker`) is
        left to that scheduler, which records the exit status or signal.
        """
        if not self._reapable() or is_job_alive(self.path) or is_worker_watched(self.path):
            return False  # (a watched worker's end, with its signal, is its scheduler's to write)
        try:
            lock = JobLock(self.path).acquire(wait=0.0)
        except (JobLockedError, OSError):
            return False
        try:
            self.reload()
            if not self._reapable():
                return False
            try:
                self.set_status(
                    JobStatus.ABORTED,
                    error="The process running this job ended without finishing it (killed, or its machine stopped).",
                )
            except OSError:  # a full disk: leave it Running; the next listing or start tries again
                return False
            return True
        finally:
            lock.release()

    def _reapable(self) -> bool:
        if self.status is JobStatus.RUNNING:
            return True
        return self.status is JobStatus.INITIALIZED and (self.path / LOCK_FILE).exists()

    def to_dict(self) -> dict[str, Any]:
        """Return ``job.json``'s content plus the current status and folder."""
        return {**self.data, "status": self.status.value, "path": str(self.path)}

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.kind} {self.name!r} {self.status.value}>"


def _remove_new_job(path: Path) -> None:
    """Remove a job folder this process was making (and give up its hold on the job, if it took one)."""
    release_running_hold(path)
    shutil.rmtree(path, ignore_errors=True)


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
        """Return the readable jobs (newest first), optionally only those of ``kind``.

        With ``reap`` (the default), a Running job whose owner died is marked
        Aborted on the way (see :meth:`Job.reap`).

        Folders without ``job.json`` (e.g. a dataset still being built in a
        temporary folder) and folders whose ``job.json`` cannot be read are
        left out; :meth:`scan` reports the latter.
        """
        return self.scan(kind, reap=reap)[0]

    def scan(self, kind: str | None = None, *, reap: bool = True) -> tuple[_Jobs, _Unreadables]:
        """The jobs (as :meth:`list`) and the job folders whose ``job.json`` cannot be read.

        Never raises for one bad folder: an undecodable, malformed, out-of-range
        or oversized ``job.json`` comes back as an :class:`UnreadableJob` naming
        the file and the reason (listed whatever ``kind`` asks for: its kind is
        unknown). Nothing is written to such a folder.
        """
        jobs: list[Job] = []
        unreadable: list[UnreadableJob] = []
        try:
            children = sorted(self.root.iterdir(), reverse=True)
        except FileNotFoundError:
            return jobs, unreadable
        for child in children:
            if child.name.startswith(".") or not (child / JOB_FILE).exists():
                continue
            try:
                job = Job.load(child)
                if reap:
                    job.reap()
            except JobRecordError as exc:
                unreadable.append(UnreadableJob(child, exc.file, exc.reason))
                continue
            except JobNotFoundError:
                continue  # removed while we looked
            if kind is None or job.kind == kind:
                jobs.append(job)
        return jobs, unreadable

    def _folder(self, job_id: str) -> Path:
        """The folder of job ``job_id`` (a unique prefix works), found without reading any file."""
        if not job_id or "/" in job_id or "\\" in job_id or job_id.startswith("."):
            raise JobNotFoundError(f'"{job_id}" is not a job id; run `digits dataset list` or `digits model list`.')
        path = self.root / job_id
        if not (path / JOB_FILE).exists():
            matches = [c for c in self.root.iterdir() if c.name.startswith(job_id) and (c / JOB_FILE).exists()]
            if len(matches) != 1:
                detail = "matches several jobs" if matches else "does not exist"
                raise JobNotFoundError(f'Job "{job_id}" {detail} in {self.root}.')
            path = matches[0]
        return path

    def get(self, job_id: str, kind: str | None = None) -> Job:
        """Return the job with this id (a unique prefix of it also works).

        A Running job whose owner died comes back Aborted (see :meth:`Job.reap`).

        Raises:
            JobNotFoundError: No such job, or the prefix is ambiguous, or the
                job is of another kind.
            JobRecordError: The job's ``job.json`` cannot be read (its ``file`` and ``reason`` say why).
        """
        job = Job.load(self._folder(job_id))
        job.reap()
        if kind is not None and job.kind != kind:
            raise JobNotFoundError(f'Job "{job_id}" is a {job.kind} job, not a {kind} job.')
        return job

    def unreadable(self, job_id: str) -> UnreadableJob | None:
        """The problem with job ``job_id``'s ``job.json``, or ``None`` when it reads.

        Raises:
            JobNotFoundError: No such job.
        """
        path = self._folder(job_id)
        try:
            Job.load(path)
        except JobRecordError as exc:
            return UnreadableJob(path, exc.file, exc.reason)
        return None

    def delete(self, job_id: str) -> None:
        """Delete a job folder and everything in it, also one whose ``job.json`` cannot be read.

        Raises:
            JobNotFoundError: No such job.
            JobLockedError: The job's ``job.json`` is unreadable and a live process still owns the job.
        """
        path = self._folder(job_id)
        try:
            Job.load(path)
        except JobRecordError:
            if is_job_alive(path):  # the lock alone says whether someone runs it
                raise JobLockedError(path, job_lock_owner(path) or {}) from None
        shutil.rmtree(path)


@dataclass(frozen=True)
class UnreadableJob:
    """A job folder whose ``job.json`` cannot be read: what listings show instead of the job.

    Attributes:
        path: The job folder (its name is the job id).
        file: The file that cannot be read.
        reason: Why, in words (never the file's content).
    """

    path: Path
    file: Path
    reason: str

    @property
    def id(self) -> str:
        """The folder name, which is the job id."""
        return self.path.name

    def to_dict(self) -> dict[str, Any]:
        """A listing row: ``id``, ``status`` ``"Unreadable"``, ``path``, ``file``, ``reason``, ``kind`` ``None``."""
        return {
            "id": self.id,
            "kind": None,
            "name": "",
            "status": "Unreadable",
            "path": str(self.path),
            "unreadable": True,
            "file": str(self.file),
            "reason": self.reason,
        }
