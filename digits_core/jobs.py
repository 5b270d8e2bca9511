"""Jobs on disk: one folder per dataset or model job, described by ``job.json``.

A job folder is named ``YYYYMMDD-HHMMSS-xxxx`` (creation time, 4 random hex
digits) as in DIGITS, inside the jobs folder (see :mod:`digits_core.config`).
``job.json`` holds the job's kind, name, plugin ids, form data and status
history; it is always rewritten atomically (write to a temporary file, then
rename), so a reader never sees half a file. Its keys are declared, with
their types and a schema version, in :mod:`digits_core.job_record`.

One owner per job (:mod:`digits_core.job_lock`, re-exported here): the
process running a job holds an OS lock on ``job.lock`` in its folder;
:meth:`Job.set_status` takes it when a process marks a job Running and
releases it when that process marks it finished, and :meth:`Job.reap` turns
a Running job whose owner died into Aborted.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import resolve_jobs_dir
from .errors import JobNotFoundError
from .job_lock import (  # noqa: F401  (re-exported: digits_core.jobs is the public path)
    LOCK_FILE,
    JobLock,
    JobLockedError,
    describe_owner,
    hold_while_running,
    holds_job_lock,
    is_job_alive,
    job_lock_owner,
    release_running_hold,
)
from .job_record import SCHEMA_VERSION, JobFields, JobRecord, check_job_record

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

JOB_FILE = "job.json"


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


class Job:
    """One job folder and its ``job.json``.

    Attributes:
        path: The job folder.
        data: The parsed ``job.json``, a :class:`~digits_core.job_record.JobRecord`
            (``id``, ``kind``, ``name``, ``created``, ``status_history`` and
            kind-specific keys such as ``plugin_id`` and ``form_data``). Read
            the common keys through the properties below.
    """

    def __init__(self, path: str | os.PathLike, data: JobRecord):
        self.path = Path(path)
        self.data = data

    # -- creation and loading --------------------------------------------------

    @classmethod
    def create(cls, kind: str, name: str, *, jobs_dir: str | os.PathLike | None = None, hold: bool = False,
               **fields: Unpack[JobFields]) -> Job:
        """Create a new job folder with status Initialized.

        Args:
            kind: ``"dataset"`` or ``"model"``.
            name: The user's name for the job.
            jobs_dir: The jobs folder (see :func:`~digits_core.config.resolve_jobs_dir`).
            hold: This process will run the job itself: it owns the job from
                this moment (as :meth:`set_status` Running does), so a kill
                before the run starts leaves a job that listings show Aborted,
                not one Initialized forever. Jobs queued for another process
                (the web UI's) are created without it.
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
        return job

    @classmethod
    def load(cls, path: str | os.PathLike) -> Job:
        """Load the job in folder ``path``.

        Raises:
            JobNotFoundError: The folder has no readable ``job.json``.
            JobRecordError: ``job.json`` is malformed or from a newer schema
                (a :class:`~digits_core.errors.JobNotFoundError`).
        """
        path = Path(path)
        try:
            data = json.loads((path / JOB_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise JobNotFoundError(f"No job in {path} (no {JOB_FILE}).") from exc
        except (OSError, json.JSONDecodeError) as exc:
            raise JobNotFoundError(f"Cannot read {path / JOB_FILE}: {exc}") from exc
        return cls(path, check_job_record(data, path / JOB_FILE))

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

    @property
    def created(self) -> float | None:
        """Creation time (unix seconds)."""
        return self.data.get("created")

    @property
    def status_history(self) -> list[tuple[str, float]]:
        """Every status with its unix time, oldest first."""
        return [(str(s), float(t)) for s, t in self.data["status_history"]]

    @property
    def group(self) -> str | None:
        """The job group shown on the home page (``None``: no group)."""
        return self.data.get("group") or None

    @property
    def plugin_id(self) -> str | None:
        """A dataset job's data-ingestion plugin id (``None`` for a model job)."""
        return self.data.get("plugin_id")

    @property
    def form_data(self) -> dict[str, Any]:
        """A dataset job's plugin form values (secrets redacted); a model job's options."""
        return dict(self.data.get("form_data") or {})

    @property
    def dataset_id(self) -> str | None:
        """A model job's dataset job id (from ``train_options`` for a job not started yet)."""
        return self.data.get("dataset_id") or (self.data.get("train_options") or {}).get("dataset")

    @property
    def network(self) -> str | None:
        """A model job's network name (or custom network file)."""
        return self.data.get("network") or (self.data.get("train_options") or {}).get("network")

    @property
    def train_options(self) -> dict[str, Any]:
        """A queued model job's :func:`~digits_core.train` keyword arguments (empty when none)."""
        return dict(self.data.get("train_options") or {})

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
        if status is JobStatus.RUNNING:
            hold_while_running(self.path)
        try:
            self._append_status(status, error)
        finally:
            if status.is_finished:
                release_running_hold(self.path)

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

        An Initialized job that was owned from its creation (``Job.create(...,
        hold=True)``: a ``digits`` command killed before its run started) is
        reaped too; one that never had an owner (queued by the web UI) is not.
        Takes the job lock while it writes, so it never races a process that
        is starting (or resuming) the job.
        """
        if not self._reapable() or is_job_alive(self.path):
            return False
        try:
            lock = JobLock(self.path).acquire(wait=0.0)
        except (JobLockedError, OSError):
            return False
        try:
            self.reload()
            if not self._reapable():
                return False
            self._append_status(JobStatus.ABORTED, "The process running this job ended without finishing it "
                                                   "(killed, or its machine stopped).")
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
