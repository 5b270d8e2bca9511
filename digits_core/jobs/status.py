"""A job's status and the transitions between statuses that are legal.

:data:`TRANSITIONS` is the one table of which status may follow which.
Done, Error and Aborted are terminal: nothing leaves them except an
explicit resume (:meth:`~digits_core.jobs.Job.resume`), which may go back
to Waiting or Running (:data:`RESUMED_TO`). Any other move raises
:class:`IllegalTransitionError`, checked against the status on disk at the
moment of the write (see :meth:`~digits_core.jobs.Job.set_status`).

To add a status: add a member to :class:`JobStatus` and one entry to
:data:`TRANSITIONS` (plus the statuses that may lead to it); a terminal one
also goes in :data:`FINISHED`.

Storage does not call plugins: :meth:`~digits_core.jobs.Job.set_status`
tells the listeners added with :func:`add_status_listener` (the plugin
registry adds the one that calls the ``digits_job_status_changed`` hook),
after the new status is saved and outside the record lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from ..errors import JobStateError


class JobStatus(str, Enum):
    """A job's state, as DIGITS named them."""

    INITIALIZED = "Initialized"
    WAITING = "Waiting"
    RUNNING = "Running"
    DONE = "Done"
    ERROR = "Error"
    ABORTED = "Aborted"
    STOPPED_EARLY = "Stopped early"  # a tuning trial its scheduler pruned (digits_core.sweeps.tune); snapshots kept

    @property
    def is_finished(self) -> bool:
        """True for the terminal statuses (Done, Error, Aborted and Stopped early)."""
        return self in FINISHED


#: The terminal statuses: only :meth:`~digits_core.jobs.Job.resume` leaves them.
FINISHED = frozenset({JobStatus.DONE, JobStatus.ERROR, JobStatus.ABORTED, JobStatus.STOPPED_EARLY})

#: Status -> the statuses that may follow it (the same status again is a harmless re-mark, e.g. by the owner).
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.INITIALIZED: frozenset({JobStatus.INITIALIZED, JobStatus.WAITING, JobStatus.RUNNING}) | FINISHED,
    JobStatus.WAITING: frozenset({JobStatus.WAITING, JobStatus.RUNNING}) | FINISHED,
    JobStatus.RUNNING: frozenset({JobStatus.RUNNING}) | FINISHED,
    JobStatus.DONE: frozenset(),
    JobStatus.ERROR: frozenset(),
    JobStatus.ABORTED: frozenset(),
    JobStatus.STOPPED_EARLY: frozenset(),
}
#: The statuses an explicit resume may move a finished job to.
RESUMED_TO = frozenset({JobStatus.WAITING, JobStatus.RUNNING})


class IllegalTransitionError(JobStateError):
    """A status change the transition table does not allow (e.g. leaving Done without a resume)."""


def check_transition(job_id: str, old: JobStatus, new: JobStatus, *, reopen: bool = False) -> None:
    """Raise unless ``old -> new`` is legal (with ``reopen``: a finished job resumed).

    Raises:
        IllegalTransitionError: The move is not in :data:`TRANSITIONS` (nor a resume).
    """
    if new in TRANSITIONS[old] or (reopen and old.is_finished and new in RESUMED_TO):
        return
    if old.is_finished:
        hint = "a finished job only moves on by being resumed (digits model resume) or cloned"
    elif reopen:
        hint = "only a finished job can be resumed"
    else:
        allowed = ", ".join(sorted(s.value for s in TRANSITIONS[old]))
        hint = f"from {old.value} a job may become {allowed}"
    raise IllegalTransitionError(f"Job {job_id} cannot go from {old.value} to {new.value}: {hint}.")


def append_status(
    record: Any,
    status: JobStatus,
    error: str | None = None,
    *,
    reopen: bool = False,
    fields: Mapping[str, Any] | None = None,
) -> JobStatus:
    """Append ``status`` to a ``job.json`` record after checking the move; return the previous status.

    ``fields`` are set in the same change; ``error`` is recorded, and a
    Running status without one clears the previous error.

    Raises:
        IllegalTransitionError: The move is not legal (the record is unchanged).
    """
    previous = JobStatus(record["status_history"][-1][0])
    check_transition(str(record.get("id")), previous, status, reopen=reopen)
    record.update(fields or {})
    record["status_history"].append([status.value, time.time()])
    if error is not None:
        record["error"] = error
    elif status is JobStatus.RUNNING:
        record.pop("error", None)
    return previous


#: Called as ``listener(job, old_status, new_status)`` (status values) after a status change is saved.
StatusListener = Callable[[Any, str, str], None]
_listeners: list[StatusListener] = []


def add_status_listener(listener: StatusListener) -> None:
    """Call ``listener(job, old_status, new_status)`` after every saved status change (once per listener)."""
    if listener not in _listeners:
        _listeners.append(listener)


def notify_status_changed(job: Any, old: JobStatus, new: JobStatus) -> None:
    """Tell every listener that ``job`` went from ``old`` to ``new`` (nothing when they are equal)."""
    if old is new:
        return
    for listener in list(_listeners):
        listener(job, old.value, new.value)
