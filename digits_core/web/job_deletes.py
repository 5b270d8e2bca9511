"""Deleting jobs from the web UI and the API: what depends on a dataset, aborting first, cascades.

A dataset that models were trained on (or are training on) is not deleted on its own: the
model pages would link to a missing dataset and their clones could not train. The delete is
refused with the list of those models (:class:`DatasetInUseError`) unless the caller asks to
delete them too (``cascade``). A job this server runs is aborted first and deleted once its
worker has stopped; a job another process runs is never deleted here.
"""

from __future__ import annotations

import time

from ..errors import JobStateError
from ..jobs import Job, JobLockedError
from .context import web_context

#: Seconds a delete waits for the jobs it aborted to stop.
ABORT_WAIT_S = 30.0


class DatasetInUseError(JobStateError):
    """A dataset is refused deletion because models depend on it.

    Attributes:
        dataset: The dataset job.
        dependents: The model jobs trained (or training) on it.
    """

    def __init__(self, dataset: Job, dependents: list[Job]):
        self.dataset = dataset
        self.dependents = dependents
        names = ", ".join(f"{j.name} ({j.id}, {j.status.value})" for j in dependents)
        count = f"{len(dependents)} model{'s' if len(dependents) != 1 else ''}"
        super().__init__(
            f"Cannot delete dataset {dataset.name} ({dataset.id}): {count} depend on it: {names}. "
            "Delete them too (API: ?cascade=1), or delete those models first."
        )


def dataset_of(model: Job) -> str | None:
    """The dataset job id a model job was trained (or is training) on."""
    return model.data.get("dataset_id") or (model.data.get("train_options") or {}).get("dataset")


def dependents(store, dataset_id: str) -> list[Job]:
    """The model jobs trained or training on a dataset, oldest first."""
    return [job for job in store.list("model") if dataset_of(job) == dataset_id]


def describe(job: Job) -> dict:
    """A job as a dependents list names it: ``{"id", "name", "status"}``."""
    return {"id": job.id, "name": job.name, "status": job.status.value}


def delete_job(job_id: str, kind: str, *, cascade: bool = False) -> list[Job]:
    """Abort (if active) and delete a job of ``kind``; a dataset's models only with ``cascade``.

    Args:
        job_id: The job to delete.
        kind: ``"dataset"`` or ``"model"``.
        cascade: For a dataset, also delete (aborting first) the models that depend on it.

    Returns:
        The jobs deleted, the dependents first.

    Raises:
        DatasetInUseError: Models depend on the dataset and ``cascade`` is false (nothing is deleted).
        JobLockedError: The job (or a dependent) is run by another process.
        JobStateError: A job did not stop within :data:`ABORT_WAIT_S` seconds after its abort.
    """
    store, scheduler = web_context().store, web_context().scheduler
    job = store.get(job_id, kind=kind)
    todo = dependents(store, job.id) if kind == "dataset" else []
    if todo and not cascade:
        raise DatasetInUseError(job, todo)
    todo.append(job)
    for each in todo:  # checked for all before anything is aborted or deleted
        if not scheduler.is_active(each.id) and each.owner is not None:  # a shell's `digits train`
            raise JobLockedError(each.path, each.owner)
    for each in todo:
        if scheduler.is_active(each.id):
            scheduler.abort(each.id)
    deadline = time.monotonic() + ABORT_WAIT_S
    while any(scheduler.is_active(each.id) for each in todo) and time.monotonic() < deadline:
        time.sleep(0.1)  # the scheduler's thread reaps the aborted workers
    running = [each for each in todo if scheduler.is_active(each.id)]
    if running:
        raise JobStateError(
            f"{', '.join(j.name or j.id for j in running)} did not stop within "
            f"{ABORT_WAIT_S:.0f} s of the abort; nothing running was deleted: try again."
        )
    for each in todo:
        store.delete(each.id)
    return todo
