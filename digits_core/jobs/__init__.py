"""The job store: job folders, their typed records, status transitions and locks.

One folder per dataset or model job (``YYYYMMDD-HHMMSS-xxxx``, as in DIGITS) holds ``job.json``;
this package is the only code that writes it.

- :mod:`~digits_core.jobs.store`: :class:`Job` (the one writer API: ``update``, ``set_status``,
  ``finish``, ``resume``, ``forget``, ``record_encoding``, ...) and :class:`JobStore` (the jobs folder).
- :mod:`~digits_core.jobs.record`: the typed records (``JobRecord``, ``ModelRecord``, ``DatasetRecord``,
  ``SweepRecord``), their schema version and atomic writes.
- :mod:`~digits_core.jobs.status`: :class:`JobStatus` and the transition table (an illegal transition
  raises :class:`IllegalTransitionError`); status listeners, so storage never calls up into plugins.
- :mod:`~digits_core.jobs.lock`: one owner per job (:class:`JobLock`) and the record lock that makes
  every write a re-read-modify-write nothing can lose.
- :mod:`~digits_core.jobs.model`: a model job's ``model.json`` and ``metrics.jsonl``, through the same lock
  (a sweep group's ``sweep.json`` is written under it too, by :mod:`digits_core.sweeps.record`).
- :mod:`~digits_core.jobs.readers`, :mod:`~digits_core.jobs.checks` and :mod:`~digits_core.jobs.health`:
  every record read as possibly hostile input (bounded size and nesting, strict UTF-8 and numbers, declared
  types); a record that fails is reported (:class:`UnreadableRecordError`, :meth:`JobStore.scan`'s
  :class:`UnreadableJob`), never fatal.

The old flat module names (``digits_core.job_lock``, ``digits_core.job_record``, ...) still import, with a
warning, until plugin API 2.0 (:data:`digits_core.deprecated.MOVED_MODULES`).
"""

from __future__ import annotations

from .lock import (
    LOCK_FILE,
    JobLock,
    JobLockedError,
    describe_owner,
    hold_while_running,
    holds_job_lock,
    is_job_alive,
    job_lock_owner,
    record_lock,
    release_running_hold,
)
from .readers import UnreadableRecordError
from .record import (
    SCHEMA_VERSION,
    JobFields,
    JobRecord,
    JobRecordView,
    check_job_record,
    new_job_id,
    write_json_atomic,
)
from .status import (
    FINISHED,
    TRANSITIONS,
    IllegalTransitionError,
    JobStatus,
    add_status_listener,
    append_status,
    check_transition,
    notify_status_changed,
)
from .store import JOB_FILE, Job, JobStore, UnreadableJob

__all__ = [
    "FINISHED",
    "JOB_FILE",
    "LOCK_FILE",
    "SCHEMA_VERSION",
    "TRANSITIONS",
    "IllegalTransitionError",
    "Job",
    "JobFields",
    "JobLock",
    "JobLockedError",
    "JobRecord",
    "JobRecordView",
    "JobStatus",
    "JobStore",
    "UnreadableJob",
    "UnreadableRecordError",
    "add_status_listener",
    "append_status",
    "check_job_record",
    "check_transition",
    "describe_owner",
    "hold_while_running",
    "holds_job_lock",
    "is_job_alive",
    "job_lock_owner",
    "new_job_id",
    "notify_status_changed",
    "record_lock",
    "release_running_hold",
    "write_json_atomic",
]
