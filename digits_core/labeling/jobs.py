"""A pool's scoring or round as a queued job: the executor runs it, with progress, abort and resume.

The pool's own job is the job: :func:`prepare_run` checks a request (strategy, model, counts within
bounds) and writes it as ``job.json["pool_run"]``; the scheduler (or Ray executor) queues the job
(Waiting) and a worker calls :func:`run_pool_job`, which marks it Running, scores batch by batch
(``job.json["pool_progress"]``: done, total, skipped), proposes and, for a round, retrains, then the
worker marks it Done. Abort is the scheduler's (SIGTERM: the batches already scored stay stored);
:func:`prepare_resume` queues the same run again, which skips the candidates that run already scored.
"""

from __future__ import annotations

import secrets
from typing import Any

from ..datasets.reader import open_dataset
from ..errors import DigitsError, FormValidationError, JobStateError
from ..jobs import Job, JobStatus, JobStore
from ..jobs.record import ModelRecord
from .pool import Pool, PoolError
from .rounds import run_round
from .scoring import score_pool
from .strategies import DEFAULT_TOP_FRACTION, STRATEGIES, top_fraction_problem

#: Bounds of a request's numbers (a request cannot ask for unbounded work per batch).
BOUNDS = {"count": (1, 100_000), "batch_size": (1, 256), "passes": (2, 64), "epochs": (1, 1000), "seed": (0, 2**31)}
#: A request's fractions: the check that says why a value is not one (the CLI and Python API ask it too), the default.
FRACTIONS = {"top_fraction": (top_fraction_problem, DEFAULT_TOP_FRACTION)}
ACTIONS = ("score", "round")


def prepare_run(pool: Pool, action: str, options: dict[str, Any], *, user: str | None = None) -> Job:
    """Check a scoring/round request and store it as the pool job's ``pool_run`` (the caller queues the job).

    Args:
        pool: The pool.
        action: ``"score"`` or ``"round"``.
        options: ``model`` (model job id, required), ``strategy``, ``count``, ``batch_size``, ``passes``,
            ``epochs``, ``seed``, ``retrain``, ``top_fraction`` (a number in (0, 1]).
        user: Who asked.

    Raises:
        FormValidationError: A bad or unknown option (all named; nothing is written).
        JobStateError: The pool is being scored already.
    """
    errors: dict[str, list[str]] = {}
    if action not in ACTIONS:
        errors["action"] = [f"one of {', '.join(ACTIONS)}"]
    unknown = sorted(set(options) - {"model", "strategy", "retrain", *BOUNDS, *FRACTIONS})
    for key in unknown:
        errors[str(key)[:40]] = ["not an option of a pool run"]
    model = options.get("model")
    if not isinstance(model, str) or not model:
        errors["model"] = ["the model job id is required"]
    else:
        problem = model_problem(pool, model)
        if problem:
            errors["model"] = [problem]
    strategy = options.get("strategy", "variance")
    if strategy not in STRATEGIES:
        errors["strategy"] = [f"one of {', '.join(STRATEGIES)}"]
    run: dict[str, Any] = {"action": action, "model": model, "strategy": strategy, "by": user}
    for key, (low, high) in BOUNDS.items():
        if key not in options:
            continue
        value = options[key]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            errors[key] = [f"an integer from {low} to {high}"]
        else:
            run[key] = value
    for key, (problem_of, default) in FRACTIONS.items():
        value = options.get(key, default)
        problem = problem_of(value)
        if problem:
            errors[key] = [problem]
        else:
            run[key] = float(value)  # recorded either way: the run says how it scored
    if not isinstance(options.get("retrain", True), bool):
        errors["retrain"] = ["true or false"]
    run["retrain"] = options.get("retrain", True) is not False
    if errors:
        raise FormValidationError(errors, f"pool {pool.id} {action}")
    job = pool.job.reload()
    if not job.status.is_finished:
        raise JobStateError(f"Pool {pool.id} is {job.status.value}: wait for its run to end, or abort it.")
    run["run"] = secrets.token_hex(4)
    job.update(pool_run=run, pool_progress={"done": 0, "total": 0, "skipped": 0})
    job.resume(JobStatus.WAITING)
    return job


def model_problem(pool: Pool, model_id: str) -> str | None:
    """Why a model cannot score this pool, from its ``model.json`` alone (no TensorFlow).

    The request check of a run uses it, and the pool page's model picker lists the models it finds no problem
    with, so the picker offers exactly what a run accepts.

    Args:
        pool: The pool.
        model_id: A model job id in the pool's jobs folder.

    Returns:
        The reason (naming the model and the pool), or ``None`` when the model fits the pool.
    """
    try:
        job = JobStore(pool.path.parent).get(model_id, kind="model")
        info = job.model_record()
    except DigitsError as exc:
        return str(exc)
    task = info.get("task")
    want = pool.record().get("task", "segmentation")
    volumes = int(pool.record().get("dimensions") or 2) == 3
    if task and task != want and not (volumes and task == f"volume-{want}"):
        return f"model {job.id} is a {task} model; pool {pool.id} holds {want} candidates"
    if info.get("kind") == "volume" and not volumes:
        return f"model {job.id} is a 3-D volume model; pool {pool.id} holds 2-D images"
    if volumes and info.get("kind") != "volume":
        return f"model {job.id} is a 2-D image model; pool {pool.id} holds 3-D volumes"
    want_modality = pool.record().get("modality")
    have = _dataset_modality(info, pool.path.parent) if want_modality else None
    same = {"MRI": "MR"}  # a Decathlon dataset says MRI, DICOM MR
    if have and same.get(str(have).upper(), str(have).upper()) != same.get(
        str(want_modality).upper(), str(want_modality).upper()
    ):
        return f"pool {pool.id} holds {want_modality} images; model {job.id} was trained on {have} images"
    return None


def _dataset_modality(info: ModelRecord, jobs_dir: Any) -> str | None:
    """The modality the model's dataset records (its userdata), or ``None`` when it says none or cannot be read."""
    reference = info.get("dataset_id")
    if not reference:
        return None
    try:
        modality = (open_dataset(str(reference), jobs_dir).userdata or {}).get("modality")
    except DigitsError:
        return None  # a dataset that is gone or unreadable: scoring, which needs it, names it
    return str(modality) if modality else None


def prepare_resume(pool: Pool) -> Job:
    """Queue the pool's last run again (an aborted or failed scoring continues where it stopped).

    Raises:
        JobStateError: No run to resume, or one is still going.
    """
    job = pool.job.reload()
    if not job.data.get("pool_run"):
        raise JobStateError(f"Pool {pool.id} has no scoring run to resume; start one.")
    if job.status not in (JobStatus.ABORTED, JobStatus.ERROR):
        raise JobStateError(f"Pool {pool.id} is {job.status.value}; only an aborted or failed run is resumed.")
    job.resume(JobStatus.WAITING)
    return job


def run_pool_job(job: Job) -> None:
    """The worker side: run the pool's ``pool_run`` in this process (which owns the job)."""
    run = dict(job.data.get("pool_run") or {})
    job.set_status(JobStatus.RUNNING)
    pool = Pool(job)

    def progress(info: dict) -> None:
        if info.get("phase", "score") == "score" and "total" in info:
            job.update(pool_progress={k: info[k] for k in ("done", "total", "skipped")})

    jobs_dir = job.path.parent
    common = {
        "batch_size": run.get("batch_size", 16),
        "passes": run.get("passes", 8),
        "seed": run.get("seed", 0),
        "top_fraction": run.get("top_fraction", DEFAULT_TOP_FRACTION),
        "jobs_dir": jobs_dir,
        "progress": progress,
    }
    if run.get("action") == "round":
        result = run_round(
            pool,
            run["model"],
            strategy=run.get("strategy", "variance"),
            count=run.get("count", 10),
            epochs=run.get("epochs", 5),
            retrain_model=run.get("retrain", True),
            user=run.get("by"),
            run=run.get("run"),
            **common,
        )
        job.update(pool_result=result.to_dict())
        _refuse_unread(pool, result.scored, result.skipped)
    else:
        scored = score_pool(pool, run["model"], run.get("strategy", "variance"), run=run.get("run"), **common)
        job.update(
            pool_result={
                "scored": scored.scored,
                "skipped": scored.skipped,
                "run": scored.run,
                "top_fraction": scored.top_fraction,
            }
        )
        _refuse_unread(pool, scored.scored, scored.skipped)


def _refuse_unread(pool: Pool, scored: int, skipped: list[dict[str, Any]]) -> None:
    """End the run as failed, with the first candidate's reason, when no candidate could be read at all.

    An unreachable PACS (or a folder of unreadable files) otherwise ends a run as done with nothing scored;
    the pool page shows a failed run's error. The candidates keep their scores and states (each unread one
    notes its error), so nothing stored is lost.
    """
    if scored == 0 and skipped:
        raise PoolError(
            f"Pool {pool.id}: none of the {len(skipped)} candidates to score could be read, so nothing was scored. "
            f"The first: {skipped[0].get('error')}"
        )
