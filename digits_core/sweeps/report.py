"""What a sweep did: its trials ranked by the metric, their curves and rungs, and the epochs it spent.

:func:`sweep_summary` is the one account every front door shows: ``digits
tune`` prints it, the comparison page (``/sweeps/ID``) draws it and its JSON
twin (``/sweeps/ID.json``) returns it. :func:`compare_models` gives the same
rows for any hand-picked set of model jobs. No TensorFlow here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..engine.early_stopping import direction
from ..engine.jobio import read_metrics, read_prune
from ..errors import DigitsError, FormValidationError
from ..jobs import Job, JobStore
from .axes import differing_options, metric_names, parallel_axes
from .record import read_sweep, sweeps_root, update_sweep_record
from .space import parse_spaces


def trial_row(job: Job, metric: str, mode: str, values: dict | None = None, index: int | None = None) -> dict:
    """One model job as a row of a comparison: options, status, best ``metric`` and its validation curve."""
    points = [p for p in read_metrics(job.path) if p.get("name") == metric and p.get("value") is not None]
    curve = [[p["epoch"], p["value"]] for p in points]
    best = None
    if curve:
        pick = min if mode == "min" else max
        best = pick(curve, key=lambda point: point[1])
    pruned = read_prune(job.path)
    return {
        "index": index,
        "job_id": job.id,
        "name": job.name,
        "status": job.status.value,
        "status_note": job.data.get("status_note"),
        "values": dict(values or job.data.get("sweep") or {}),
        "network": job.data.get("network"),
        "best": None if best is None else best[1],
        "best_epoch": None if best is None else best[0],
        "epochs": max((p[0] for p in curve), default=0),
        "rung": pruned.get("rung"),
        "node": (job.data.get("placement") or {}).get("node_id"),
        "curve": curve,
    }


def _ranked(rows: list[dict], mode: str) -> list[dict]:
    def key(row: dict) -> tuple:
        value = row["best"]
        if value is None or not math.isfinite(value):
            return (1, 0.0)
        return (0, value if mode == "min" else -value)

    return sorted(rows, key=key)


def _space_kinds(search: Any) -> dict[str, str]:
    """Each searched option's space kind (``loguniform``, ``choice``, ...); empty when the search cannot be read."""
    try:
        return {option: space.kind for option, space in parse_spaces(search).items()}
    except DigitsError:
        return {}


def sweep_summary(sweep_id: str, jobs_dir: Any = None) -> dict:
    """A sweep's record, its trials ranked by the metric (best first) and its budget.

    Returns:
        ``{"id", "name", "group", "status", "scheduler", "metric", "mode", "max_epochs", "search",
        "trials": [row ...], "pending": [values of trials not started], "best": row | None,
        "promoted": job id | None, "budget": {"epochs_spent", "trial_epochs", "grid_epochs", "grid_size",
        "fraction_of_grid"}}``; a row is :func:`trial_row`.
    """
    record = read_sweep(sweep_id, jobs_dir)
    settings = record["settings"]
    metric, mode = settings["metric"], settings["mode"]
    store = JobStore(jobs_dir)
    rows = []
    for index, job_id in record["trials_started"].items():
        try:
            job = store.get(job_id)
        except DigitsError:
            continue  # a deleted trial
        rows.append(trial_row(job, metric, mode, record["trials"][index], index))
    started = set(record["trials_started"])
    rows = _ranked(rows, mode)
    kinds = _space_kinds(record["search"])
    options = sorted(kinds) or sorted({name for row in rows for name in row["values"]})
    spent = sum(row["epochs"] for row in rows)
    max_epochs = settings["max_epochs"]
    grid_epochs = record["grid_size"] * max_epochs if record.get("grid_size") else None
    return {
        "id": record["id"],
        "name": record["name"],
        "group": record["group"],
        "dataset": record["dataset"],
        "network": record["network"],
        "status": record.get("status"),
        "error": record.get("error"),
        "scheduler": settings["scheduler"],
        "metric": metric,
        "mode": mode,
        "max_epochs": max_epochs,
        "settings": settings,
        "search": record["search"],
        "trials": rows,
        "options": options,
        "axes": parallel_axes(rows, options, metric, kinds),
        "pending": [values for i, values in enumerate(record["trials"]) if i not in started],
        "best": next((row for row in rows if row["best"] is not None), None),
        "promoted": record.get("promoted"),
        "budget": {
            "epochs_spent": round(spent, 4),
            "trial_epochs": len(record["trials"]) * max_epochs,
            "grid_size": record.get("grid_size"),
            "grid_epochs": grid_epochs,
            "fraction_of_grid": None if not grid_epochs else round(spent / grid_epochs, 4),
        },
    }


def compare_models(
    job_ids: Iterable[str], metric: str = "val_accuracy", mode: str = "auto", jobs_dir: Any = None
) -> dict:
    """Hand-picked model jobs side by side, ranked by ``metric``.

    Returns:
        ``{"metric", "mode", "trials": [row ...], "options", "axes", "metrics"}``: a row's ``values`` are the
        training options that differ between the jobs (``options``, the network included), ``axes`` the
        parallel-coordinates axes (:func:`~.axes.parallel_axes`), ``metrics`` what a chooser may rank by.

    Raises:
        JobNotFoundError: An id names no model job.
    """
    mode = direction(metric, mode)
    store = JobStore(jobs_dir)
    jobs = [store.get(job_id, "model") for job_id in job_ids]
    option_sets = [{**job.train_options, "network": job.network or job.train_options.get("network")} for job in jobs]
    options = differing_options(option_sets)
    rows = _ranked(
        [trial_row(job, metric, mode, {k: opts.get(k) for k in options}) for job, opts in zip(jobs, option_sets)], mode
    )
    return {
        "metric": metric,
        "mode": mode,
        "trials": rows,
        "options": options,
        "axes": parallel_axes(rows, options, metric),
        "metrics": metric_names(job.path for job in jobs),
    }


def budget_line(summary: dict) -> str:
    """The budget in words: ``"epochs spent: 42 of the grid's 240 (17.5 %)"``."""
    budget = summary["budget"]
    spent = f"{budget['epochs_spent']:g}"
    if budget["grid_epochs"]:
        return (
            f"epochs spent: {spent} of the full grid's {budget['grid_epochs']} "
            f"({100 * budget['fraction_of_grid']:.1f} %; {budget['grid_size']} combinations × "
            f"{summary['max_epochs']} epochs)"
        )
    return (
        f"epochs spent: {spent} of {budget['trial_epochs']} for every trial to {summary['max_epochs']} epochs "
        "(a range has no grid)"
    )


#: The longest name a promoted trial may be given (as the New Model form's model name).
MAX_PROMOTED_NAME = 200


def promote(sweep_id: str, job_id: str | None = None, jobs_dir: Any = None, name: str | None = None) -> dict:
    """Mark a sweep's best trial (or ``job_id``) as its result: the sweep's ``promoted`` job, kept and exportable.

    Args:
        sweep_id: The sweep.
        job_id: The trial to promote (default: the best one).
        jobs_dir: Jobs folder.
        name: A new name for the promoted job (default: it keeps its trial name).

    Returns:
        The promoted trial's row (with its new name).

    Raises:
        FormValidationError: ``name`` is blank or longer than :data:`MAX_PROMOTED_NAME` (nothing changes).
        DigitsError: The sweep has no trial with a metric, or ``job_id`` is not one of its trials.
    """
    if name is not None and not (name.strip() and len(name.strip()) <= MAX_PROMOTED_NAME):
        raise FormValidationError(
            {
                "name": [
                    f"give the promoted model a name of 1 to {MAX_PROMOTED_NAME} "
                    "characters (or none to keep the trial's)"
                ]
            },
            "promote",
        )
    summary = sweep_summary(sweep_id, jobs_dir)
    if job_id is None:
        row = summary["best"]
        if row is None:
            raise DigitsError(f"Sweep {sweep_id} has no trial with a {summary['metric']} yet: nothing to promote.")
    else:
        row = next((r for r in summary["trials"] if r["job_id"] == job_id), None)
        if row is None:
            raise DigitsError(f"Job {job_id} is not a trial of sweep {sweep_id}.")
    if name is not None:
        JobStore(jobs_dir).get(row["job_id"], kind="model").rename(name.strip())
        row = {**row, "name": name.strip()}
    update_sweep_record(sweeps_root(jobs_dir) / sweep_id, promoted=row["job_id"])
    return row


#: Trial statuses that count as done in the sweeps index (finished, whichever way).
_FINISHED = frozenset({"Done", "Error", "Aborted", "Stopped early"})


def index_row(summary: dict) -> dict:
    """One line of the sweeps index from a :func:`sweep_summary`: id, name, status, trials done/total, best."""
    best = summary.get("best")
    return {
        "id": summary["id"],
        "name": summary["name"],
        "group": summary["group"],
        "status": summary["status"],
        "scheduler": summary["scheduler"],
        "trials_done": sum(1 for row in summary["trials"] if row["status"] in _FINISHED),
        "trials_total": len(summary["trials"]) + len(summary["pending"]),
        "metric": summary["metric"],
        "best": None if best is None else best["best"],
        "best_job": None if best is None else best["job_id"],
    }


def sweep_index(jobs_dir: Any = None) -> tuple[list[dict], list[DigitsError]]:
    """Every sweep of a jobs folder, newest first, as :func:`index_row` lines (``/sweeps``, ``digits sweep list``).

    Returns:
        The rows, and the errors of the sweeps whose ``sweep.json`` cannot be read (each names its file).
    """
    root = sweeps_root(jobs_dir)
    rows: list[dict] = []
    unreadable: list[DigitsError] = []
    for path in sorted(root.iterdir(), reverse=True) if root.is_dir() else []:
        if path.is_dir() and (path / "sweep.json").is_file():
            try:
                rows.append(index_row(sweep_summary(path.name, jobs_dir)))
            except (DigitsError, KeyError, TypeError) as exc:  # a record missing keys reads as unreadable too
                unreadable.append(exc if isinstance(exc, DigitsError) else DigitsError(f"{path / 'sweep.json'}: {exc}"))
    return rows, unreadable
