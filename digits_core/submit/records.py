"""The one place a job folder is made: every door's submission, and the runs that create their own job, end here.

This module sits at the job store's layer (``tests/test_layers.py``), so the training
engine and the dataset builder, which create the job of a run they start themselves
(:func:`digits_core.engine.train`, :func:`digits_core.datasets.create_dataset`), call it
as the web UI, the JSON API and the CLI's queued path do through the rest of
:mod:`digits_core.submit`.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..jobs import Job

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

    from ..jobs.record import JobFields

#: The user account that owns the jobs created in this context (``owned_by`` in ``job.json``): set for the
#: length of one allowed web request by :mod:`digits_core.web.accounts_views`; unset, jobs have no owner.
job_owner: ContextVar[str | None] = ContextVar("digits_job_owner", default=None)


def create_job_record(
    kind: str, name: str, *, jobs_dir: str | os.PathLike | None = None, hold: bool = False, **fields: Unpack[JobFields]
) -> Job:
    """Create a job folder (status Initialized) of ``kind``: see :meth:`digits_core.jobs.Job.create`.

    Raises:
        FormValidationError: The name is too long or not text (nothing is created).
    """
    owner = job_owner.get()
    if owner and "owned_by" not in fields:
        fields["owned_by"] = owner
    return Job.create(kind, name, jobs_dir=jobs_dir, hold=hold, **fields)


def create_model_record(
    name: str, *, jobs_dir: str | os.PathLike | None = None, hold: bool = False, **fields: Unpack[JobFields]
) -> Job:
    """Create a model job folder (status Initialized); ``hold``: this process runs it next and owns it now."""
    return create_job_record("model", name, jobs_dir=jobs_dir, hold=hold, **fields)


def create_dataset_record(
    name: str, *, jobs_dir: str | os.PathLike | None = None, hold: bool = False, **fields: Unpack[JobFields]
) -> Job:
    """Create a dataset job folder (status Initialized); ``hold`` as for :func:`create_model_record`."""
    return create_job_record("dataset", name, jobs_dir=jobs_dir, hold=hold, **fields)
