"""Deleting jobs from the web UI and the API: what depends on a dataset, aborting first, cascades.

A dataset that models were trained on (or are training on) is not deleted on its own: the
model pages would link to a missing dataset and their clones could not train. The delete is
refused with the list of those models (:class:`DatasetInUseError`) unless the caller asks to
delete them too (``cascade``). A job this server runs is aborted first and deleted once its
worker has stopped; a job another process runs is never deleted here.
"""

from __future__ import annotations

import time

from ..errors import DigitsError, JobNotFoundError, JobStateError
from ..jobs import Job, JobLockedError
from ..jobs.record import JobRecordError
from .context import web_context

#: Seconds a delete waits for the jobs it aborted to stop.
ABORT_WAIT_S = 30.0
#: Seconds a bulk delete (the home page's, ``POST /api/jobs/delete``) waits for the jobs it aborted to stop.
BULK_ABORT_WAIT_S = 60.0


class DatasetInUseError(JobStateError):
    """A dataset is refused deletion because models depend on it.

    Attributes:
        dataset: The dataset job.
        dependents: The model jobs trained (or training) on it, and the evaluations of its stages.
    """

    def __init__(self, dataset: Job, dependents: list[Job]):
        self.dataset = dataset
        self.dependents = dependents
        names = ", ".join(f"{j.name} ({j.id}, {j.status.value})" for j in dependents)
        models = sum(j.kind == "model" for j in dependents)
        evaluations = len(dependents) - models
        count = " and ".join(
            [f"{models} model{'s' if models != 1 else ''}"] * bool(models)
            + [f"{evaluations} evaluation{'s' if evaluations != 1 else ''}"] * bool(evaluations)
        )
        super().__init__(
            f"Cannot delete dataset {dataset.name} ({dataset.id}): {count} depend on it: {names}. "
            "Delete them too (API: ?cascade=1), or delete those models first."
        )


def dataset_of(model: Job) -> str | None:
    """The dataset job id a model job was trained (or is training) on."""
    return model.data.get("dataset_id") or (model.data.get("train_options") or {}).get("dataset")


def dependents(store, dataset_id: str) -> list[Job]:
    """The model jobs trained or training on a dataset, then the evaluations of its stages (issue 42)."""
    return [job for job in [*store.list("model"), *store.list("evaluation")] if dataset_of(job) == dataset_id]


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


def bulk_delete(job_ids: list[str], *, abort_running: bool) -> dict:
    """Delete several jobs; waiting or running ones are aborted first only when ``abort_running``.

    A job run by another process (a ``digits train`` in a shell holds its lock) is
    never deleted here: its folder would be pulled from under it.

    Args:
        job_ids: The jobs to delete.
        abort_running: Abort the jobs this server's scheduler runs or queues, then delete
            them; when false they are refused.

    Returns:
        ``{"deleted": [{"id", "name"}], "aborted": [{"id", "name", "status"}] (aborted, then
        deleted), "refused": [{"id", "name", "reason"}]}``.
    """
    report: dict[str, list[dict]] = {"deleted": [], "aborted": [], "refused": []}
    sched = web_context().scheduler
    todo: list[Job] = []
    for job_id in dict.fromkeys(job_ids):
        try:
            job = web_context().store.get(job_id)
        except JobRecordError:  # its job.json cannot be read: delete the folder as it is, unless someone runs it
            try:
                web_context().store.delete(job_id)
            except (DigitsError, OSError) as exc:
                report["refused"].append({"id": job_id, "name": "", "reason": f"could not delete: {exc}"})
            else:
                report["deleted"].append({"id": job_id, "name": ""})
            continue
        except JobNotFoundError:
            report["refused"].append({"id": job_id, "name": "", "reason": "no such job (deleted already?)"})
            continue
        entry = {"id": job.id, "name": job.name}
        kept = (
            [m for m in dependents(web_context().store, job.id) if m.id not in job_ids] if job.kind == "dataset" else []
        )
        if kept:  # its models would point at a missing dataset: tick them too, or delete them first
            names = ", ".join(m.name or m.id for m in kept)
            report["refused"].append({**entry, "reason": f"{len(kept)} model(s) not selected depend on it ({names})"})
            continue
        if sched.is_active(job.id):
            if not abort_running:
                report["refused"].append({**entry, "reason": f"{job.status.value}: abort it first"})
                continue
            status = job.status.value
            try:
                sched.abort(job.id)
            except DigitsError as exc:
                report["refused"].append({**entry, "reason": str(exc)})
                continue
            report["aborted"].append({**entry, "status": status})
        elif job.owner is not None:
            report["refused"].append(
                {**entry, "reason": "running in another process (see `digits model list`); stop it there first"}
            )
            continue
        todo.append(job)
    deadline = time.monotonic() + BULK_ABORT_WAIT_S
    while any(sched.is_active(j.id) for j in todo) and time.monotonic() < deadline:
        time.sleep(0.1)  # the scheduler's thread reaps the aborted workers
    for job in todo:
        entry = {"id": job.id, "name": job.name}
        if sched.is_active(job.id):
            report["refused"].append({**entry, "reason": f"did not stop within {BULK_ABORT_WAIT_S:.0f} s; try again"})
            continue
        try:
            web_context().store.delete(job.id)
        except (DigitsError, OSError) as exc:
            report["refused"].append({**entry, "reason": f"could not delete: {exc}"})
            continue
        report["deleted"].append(entry)
    stopped = {e["id"] for e in report["deleted"]}
    report["aborted"] = [e for e in report["aborted"] if e["id"] in stopped]
    return report
