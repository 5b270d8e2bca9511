"""The leaderboard: every model evaluated on one test set (a dataset's stage) in one table.

One row per model and epoch (its latest finished evaluation on that test set) with the task's headline
figures; the best value of each figure is marked (the lowest for errors and distances, the highest
otherwise). Each model's primary figure (accuracy, per-case mean Dice) is compared with the leader's by
a paired, seeded bootstrap over the test set's inputs: the 95 % interval of the difference tells
whether the leader is really better (an interval that holds 0 says the test set cannot tell them apart).
Regression rows compare RMSE (per target over the resampled inputs, averaged over targets, as the report
computes it), image-to-image rows the mean PSNR, detection rows COCO AP recomputed on each paired resample
of the test images from the boxes each evaluation keeps per image in ``predictions.csv``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from ..jobs import JobStatus, JobStore
from ..jobs.readers import read_json_object
from .classification import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED
from .detection import ap_resamples

#: Figures where lower is better.
LOWER_IS_BETTER = frozenset({"mae", "rmse", "ece"})
#: The figure each task's models are ranked by.
PRIMARY = {
    "classification": "accuracy",
    "segmentation": "dice",
    "detection": "ap",
    "regression": "rmse",
    "image-to-image": "psnr",
}


def _evaluation(job: Any) -> dict[str, Any]:
    """An evaluation job's ``evaluation`` record (empty when missing): task, epoch, inputs and headline metrics."""
    return job.data.get("evaluation") or {}


def _per_input(job: Any, task: str) -> tuple[list[str], np.ndarray] | None:
    """Input ids and the per-input primary figure of one evaluation (``None`` when none is stored)."""
    folder = job.path / "evaluation"
    try:
        if task == "classification":
            with open(folder / "predictions.csv", newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
            return [r["input"] for r in rows], np.array([float(r["correct"]) for r in rows])
        if task == "segmentation":
            summary = read_json_object(folder / "summary.json", max_bytes=64 * 1024 * 1024)
            ids, values = [], []
            for case in summary["metric_per_case"]:
                dice = [m["Dice"] for m in case["metrics"].values() if m.get("Dice") is not None]
                ids.append(str(case["case"]))
                values.append(float(np.mean(dice)) if dice else np.nan)
            return ids, np.array(values)
        if task == "detection":  # per image: its truth and detected boxes, one row each (JSON cells)
            with open(folder / "predictions.csv", newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
            boxes = np.empty((len(rows), 2), dtype=object)
            for i, r in enumerate(rows):
                boxes[i] = (
                    np.array(json.loads(r["truth"]), np.float64).reshape(-1, 5),
                    np.array(json.loads(r["predicted"]), np.float64).reshape(-1, 6),
                )
            return [r["input"] for r in rows], boxes
        if task in ("regression", "image-to-image"):
            with open(folder / "predictions.csv", newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
            ids = [r["input"] for r in rows]
            if task == "image-to-image":  # PSNR per case; an exact copy's infinite PSNR is left out, as in the mean
                psnr = np.array([float(r["psnr"]) for r in rows])
                return ids, np.where(np.isfinite(psnr), psnr, np.nan)
            targets = sorted(int(k[len("truth_") :]) for k in rows[0] if k.startswith("truth_")) if rows else []
            return ids, np.array(
                [[(float(r[f"predicted_{t}"]) - float(r[f"truth_{t}"])) ** 2 for t in targets] for r in rows]
            ).reshape(len(rows), len(targets))
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return None


def _mean(values: np.ndarray) -> np.ndarray:
    """The mean over inputs (axis 1) of resampled per-input figures: accuracy, Dice, PSNR."""
    return values.mean(axis=1)


def _rmse(values: np.ndarray) -> np.ndarray:
    """RMSE per target over resampled squared errors (inputs × targets), averaged over targets as the report does."""
    return np.sqrt(values.mean(axis=1)).mean(axis=-1)


#: How a resample of per-input figures becomes the task's primary figure (default: their mean).
STATISTIC = {"regression": _rmse}


def paired_interval(
    a: np.ndarray,
    b: np.ndarray,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
    statistic: Callable[[np.ndarray], np.ndarray] = _mean,
) -> list[float]:
    """95 % percentile interval of ``statistic(a) − statistic(b)`` over paired resamples of the inputs.

    Args:
        a, b: Per-input figures of two evaluations of the same inputs (rows: inputs; more axes: e.g. targets);
            an input with a NaN in either is left out.
        samples, seed: The bootstrap's resamples and seed.
        statistic: Resampled figures (resamples × inputs × ...) to one value per resample (default: the mean).
    """
    keep = ~(np.isnan(a) | np.isnan(b)).reshape(len(a), -1).any(axis=1)
    a, b = a[keep], b[keep]
    if not len(a):
        return []
    rng = np.random.default_rng(seed)
    index = rng.integers(0, len(a), size=(samples, len(a)))
    diffs = statistic(a[index]) - statistic(b[index])
    low, high = np.percentile(diffs, [2.5, 97.5])
    return [float(low), float(high)]


def detection_interval(
    mine: np.ndarray, leader: np.ndarray, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[float]:
    """95 % interval of ``AP(mine) − AP(leader)`` over paired resamples of the test images (COCO AP recomputed on
    each, :func:`digits_core.evaluation.detection.ap_resamples`); rows ``(truth, detections)`` per image."""
    if not len(mine):
        return []
    truth = list(leader[:, 0])
    arrays = [*truth, *mine[:, 1], *leader[:, 1]]
    classes = 1 + int(max((a[:, 0].max() for a in arrays if len(a)), default=-1))
    index = np.random.default_rng(seed).integers(0, len(mine), size=(samples, len(mine)))
    ours = ap_resamples(truth, list(mine[:, 1]), classes, index)
    diffs = ours - ap_resamples(truth, list(leader[:, 1]), classes, index)
    diffs = diffs[np.isfinite(diffs)]
    if not len(diffs):
        return []
    low, high = np.percentile(diffs, [2.5, 97.5])
    return [float(low), float(high)]


def _difference(task: str, primary: str, pair: tuple, mine: np.ndarray, leader: np.ndarray) -> dict[str, Any]:
    """A row's primary figure against the leader's: the difference and its paired bootstrap interval."""
    statistic = STATISTIC.get(task)
    if task == "detection":  # COCO AP recomputed on each resample; the value is the headline APs'
        ours, theirs = (_evaluation(j).get("metrics", {}).get(primary) for j in pair)
        value = float(ours - theirs) if ours is not None and theirs is not None else float("nan")
        interval = detection_interval(mine, leader)
    elif statistic is None:
        value = float(np.nanmean(mine) - np.nanmean(leader))
        interval = paired_interval(mine, leader)
    else:  # a figure that is no mean of per-input values (RMSE): the statistic of all the inputs
        value = float(statistic(mine[None])[0] - statistic(leader[None])[0])
        interval = paired_interval(mine, leader, statistic=statistic)
    return {"figure": primary, "value": value, "interval": interval}


def leaderboard(
    dataset_id: str, stage: str = "test", *, jobs_dir: Any = None, store: JobStore | None = None
) -> dict[str, Any]:
    """The models evaluated on ``dataset_id``'s ``stage``, best first by the task's primary figure.

    ``store``: the job store to read (default: the whole of ``jobs_dir``); the web server passes its own, which
    with accounts lists only the evaluations and models the signed-in user may read.

    Returns:
        ``{"dataset_id", "stage", "task", "primary", "figures", "best": {figure: value},
        "rows": [{"evaluation_id", "model_id", "model_name", "epoch", "metrics", "best": [figures],
        "difference": {"figure", "value", "interval"} (against the leader)}]}``.
    """
    store = store if store is not None else JobStore(jobs_dir)
    latest: dict[tuple, Any] = {}
    for job in store.list("evaluation"):  # newest first: the first seen per model and epoch is the latest
        info = _evaluation(job)
        if job.status is not JobStatus.DONE or info.get("dataset_id") != dataset_id or info.get("stage") != stage:
            continue
        latest.setdefault((job.data.get("model_id"), info.get("epoch")), job)
    jobs = list(latest.values())
    tasks = {_evaluation(j).get("task") for j in jobs}
    task = next(iter(tasks)) if len(tasks) == 1 else None
    primary = PRIMARY.get(task or "", "")
    figures: list[str] = []
    for job in jobs:
        for key, value in (_evaluation(job).get("metrics") or {}).items():
            if isinstance(value, (int, float)) and key not in figures:
                figures.append(key)
    best: dict[str, float] = {}
    for key in figures:
        values = [_evaluation(j).get("metrics", {}).get(key) for j in jobs]
        values = [v for v in values if isinstance(v, (int, float))]
        if values:
            best[key] = min(values) if key in LOWER_IS_BETTER else max(values)

    def rank(job: Any) -> float:
        value = _evaluation(job).get("metrics", {}).get(primary)
        if not isinstance(value, (int, float)):
            return float("inf")
        return value if primary in LOWER_IS_BETTER else -value

    jobs.sort(key=rank)
    names: dict[Any, str | None] = {}
    for job in jobs:
        try:
            names[job.data.get("model_id")] = store.get(str(job.data.get("model_id")), kind="model").name
        except Exception:  # noqa: BLE001 - a deleted or unreadable model still has its row
            names[job.data.get("model_id")] = None
    leader = _per_input(jobs[0], task) if jobs and task else None
    rows = []
    for job in jobs:
        metrics = _evaluation(job).get("metrics") or {}
        difference = None
        mine = _per_input(job, task) if task else None
        if leader and mine and mine[0] == leader[0] and job is not jobs[0]:
            difference = _difference(str(task), primary, (job, jobs[0]), mine[1], leader[1])
        rows.append(
            {
                "evaluation_id": job.id,
                "model_id": job.data.get("model_id"),
                "model_name": names[job.data.get("model_id")],
                "epoch": _evaluation(job).get("epoch"),
                "metrics": {k: metrics.get(k) for k in figures},
                "best": [k for k in figures if k in best and metrics.get(k) == best[k]],
                "difference": difference,
            }
        )
    return {
        "dataset_id": dataset_id,
        "stage": stage,
        "task": task,
        "primary": primary,
        "figures": figures,
        "best": best,
        "rows": rows,
    }
