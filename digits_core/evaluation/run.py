"""``evaluate()``: a trained model on a held-out test set, as an ``evaluation`` job of its own.

::

    from digits_core.evaluation import evaluate
    result = evaluate("20261202-120000-ab12")                  # the model's dataset, stage "test"
    result = evaluate(model_id, dataset_id=other, stage="val")  # another dataset of the same task
    result = evaluate(model_id, inputs=["test/list.txt"])       # labelled files, as ``digits infer`` reads them
    result.metrics["accuracy"], result.job.path

The ground truth comes from the stored dataset's stage (its records, as training read them) or from
labelled inputs (a list file ``path label`` or class folders, read exactly as ``digits infer`` reads
them). The network runs once, through :func:`digits_core.inference.infer` (the same preparation and
preprocessing). The figures are those of :mod:`~digits_core.evaluation.classification`,
:mod:`~digits_core.evaluation.detection`, :mod:`~digits_core.evaluation.segmentation` or
:mod:`~digits_core.evaluation.regression`, by the model's task.

Bad input is refused before anything is written (:class:`EvaluationError` naming it): a test set with
a class the model never saw, an input without a label, a dataset of another task, an empty stage. The
job folder is written in full, then its ``evaluation/`` folder published by one rename; a failure on
the way removes the job, so no half-written evaluation is ever listed.

Files of a finished evaluation job (under ``evaluation/``): ``metrics.json`` (everything, JSON-ready:
non-finite figures are ``null``), ``predictions.csv`` (one row per input), ``per_class.csv`` (one row
per class), ``summary.json`` (segmentation: nnU-Net's layout) and ``report.html``.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.mlflow_log import TRACKING_KEY, check_tracking_uri, log_evaluation, pop_tracking_uri
from ..engine.tasks import task_for_label_kind
from ..errors import DigitsError
from ..jobs import Job, JobStatus, JobStore
from ..jobs.readers import read_json_object
from ..jobs.record import write_json_atomic
from ..submit.records import create_job_record
from . import classification, detection, regression, segmentation
from .cases import worst_cases

logger = logging.getLogger("digits_core.evaluation")

#: Detections below this score are left out of detection figures (COCO evaluations keep nearly all of them).
SCORE_FLOOR = 0.001
#: Stages of a stored dataset an evaluation may read.
STAGES = ("test", "val", "train")
#: The worst cases with their pictures (:mod:`~digits_core.evaluation.cases`).
WORST_FILE = "worst_cases.json"
#: The largest ``metrics.json`` read back (curves are thinned to keep it far below).
MAX_METRICS_BYTES = 64 * 1024 * 1024
#: The folder of a job that holds its published results.
RESULTS = "evaluation"


class EvaluationError(DigitsError):
    """An evaluation that cannot run on what it was given (the message names what and what to do)."""


@dataclass
class EvaluationResult:
    """A finished evaluation.

    Attributes:
        job: The ``evaluation`` job.
        metrics: What ``metrics.json`` holds.
    """

    job: Job

    metrics: dict[str, Any]

    @property
    def folder(self) -> Path:
        """The published results folder."""
        return self.job.path / RESULTS

    def summary(self) -> dict[str, Any]:
        """The headline figures (what ``digits evaluate --json`` prints)."""
        return {"job_id": self.job.id, **self.job.data.get("evaluation", {})}  # type: ignore[dict-item]


def _stage_inputs(model: Any, dataset_id: str | None, stage: str, jobs_dir: Any) -> tuple[str, list, Any]:
    """The stored stage's records as labelled ``(id, feature, label)`` tuples, checked against the model."""
    # the dataset reader is below this layer; imported here so listing plugins never opens LMDB
    from ..datasets import open_dataset

    if stage not in STAGES:
        raise EvaluationError(f'--stage "{stage}" is not one of {", ".join(STAGES)}.')
    dataset = open_dataset(dataset_id or model.dataset.id, jobs_dir)
    try:
        task = task_for_label_kind(dataset.label_kind)
        if task is None or task.name != model.task:
            raise EvaluationError(
                f"Dataset {dataset.id} holds {dataset.label_kind} labels (a {task.name if task else 'different'} "
                f"dataset) but model {model.id} is a {model.task} model: evaluate it on a dataset of its own task."
            )
        if stage not in dataset.stages or not dataset.count(stage):
            raise EvaluationError(
                f'Dataset {dataset.id} has no "{stage}" records (stages: {", ".join(dataset.stages) or "none"}). '
                "Create it with a test split (--test-percent or a test folder/list), or pick --stage val."
            )
        features, labels = dataset.read_all(stage)
        labels = _map_classes(model, dataset, stage, labels)
        ids = [f"{stage}-{i:05d}" for i in range(len(features))]
        if dataset.label_kind == "boxes":
            rows = [np.asarray(b, dtype=np.float64).reshape(-1, 5) for b in labels]
            return dataset.id, list(zip(ids, features)), [r[(r >= 0).all(axis=1)] for r in rows]
        return dataset.id, [(i, f, lab) for i, f, lab in zip(ids, features, labels)], None
    finally:
        dataset.close()


def _map_classes(model: Any, dataset: Any, stage: str, labels: np.ndarray) -> np.ndarray:
    """Class ids of the dataset's labels as the model numbers them; a class the model never saw is refused."""
    if dataset.label_kind not in ("class", "mask", "boxes"):
        return labels
    model_labels = [str(c) for c in (model.class_labels or [])]
    data_labels = [str(c) for c in (dataset.class_labels or model_labels)]
    if dataset.label_kind == "boxes":
        present = {int(c) for b in labels for c in np.asarray(b).reshape(-1, 5)[:, 0] if c >= 0}
    else:
        present = {int(c) for c in np.unique(np.asarray(labels))}
    mapping = np.arange(max([len(data_labels), *(c + 1 for c in present)]), dtype=np.int64)
    for c in sorted(present):
        name = data_labels[c] if c < len(data_labels) else str(c)
        if name in model_labels:
            mapping[c] = model_labels.index(name)
        elif model_labels or c >= _num_outputs(model):
            raise EvaluationError(
                f'Class "{name}" (id {c}) of dataset {dataset.id}\'s "{stage}" stage is not one model {model.id} '
                f"was trained on ({', '.join(model_labels[:20]) or 'no class names'}): remove those records or "
                "evaluate a model that knows the class."
            )
    if dataset.label_kind == "boxes":
        out = []
        for b in labels:
            b = np.array(b, dtype=np.float64).reshape(-1, 5)
            keep = b[:, 0] >= 0
            b[keep, 0] = mapping[b[keep, 0].astype(np.int64)]
            out.append(b)
        return np.asarray(out, dtype=object)
    return mapping[np.asarray(labels, dtype=np.int64)]


def _num_outputs(model: Any) -> int:
    return int(model.info.get("num_outputs") or len(model.class_labels or []) or 0)


def _missing_labels(samples: Sequence[Any]) -> None:
    missing = [s.input_id for s in samples if s.ground_truth is None]
    if missing:
        raise EvaluationError(
            f"{len(missing)} input(s) have no label, e.g. {', '.join(missing[:3])}: an evaluation needs the truth "
            "of every input (a list file 'path label' per line, or a folder of class folders)."
        )


def _classification(model, samples, bootstrap, seed) -> tuple[dict, list[dict], list[dict]]:
    p = np.stack([np.asarray(s.output, dtype=np.float64).reshape(-1) for s in samples])
    y = np.array([int(np.asarray(s.ground_truth).reshape(-1)[0]) for s in samples])
    unseen = sorted({int(c) for c in y if not 0 <= c < p.shape[1]})
    if unseen:
        raise EvaluationError(
            f"Class id(s) {unseen} of the test set are beyond the model's {p.shape[1]} outputs: the model never saw them."
        )
    report = classification.classification_report(p, y, model.class_labels, bootstrap=bootstrap, seed=seed)
    names = report["class_labels"]
    rows = [
        {
            "input": s.input_id,
            "truth": names[t],
            "predicted": names[int(row.argmax())],
            "confidence": float(row.max()),
            "correct": int(row.argmax() == t),
        }
        for s, t, row in zip(samples, y, p)
    ]
    return report, rows, report["per_class"]


def _segmentation(model, samples, tolerance) -> tuple[dict, list[dict], list[dict]]:
    num = int(np.asarray(samples[0].output).shape[-1])
    classes = list(range(1, num))
    cases = []
    for s in samples:
        pred = np.asarray(s.output).argmax(axis=-1)
        truth = np.asarray(s.ground_truth).reshape(pred.shape)
        if truth.max(initial=0) >= num:
            raise EvaluationError(
                f"Input {s.input_id} holds class id {int(truth.max())} but the model has {num} classes: it never saw it."
            )
        cases.append({"case": s.input_id, "metrics": segmentation.case_metrics(pred, truth, classes, None, tolerance)})
    summary = segmentation.summarize(cases)
    names = [str(c) for c in (model.class_labels or range(num))]
    rows = [
        {"input": c["case"], "class": names[int(k)] if int(k) < len(names) else k, **m}
        for c in cases
        for k, m in c["metrics"].items()
    ]
    per_class = [{"class": names[int(k)] if int(k) < len(names) else k, **m} for k, m in summary["mean"].items()]
    report = {
        "count": len(cases),
        "dice": summary["foreground_mean"].get("Dice"),
        "nsd_tolerance_mm": tolerance,
        "class_labels": names,
        "summary": summary,
    }
    return report, rows, per_class


def _detection(model, samples, truth) -> tuple[dict, list[dict], list[dict]]:
    # the decoder digits infer uses, with COCO's low score floor instead of the view's drawing threshold
    from ..inference.detection import to_detections

    height, width = model.feature_shape[0], model.feature_shape[1]
    dets = []
    for s in samples:
        found = to_detections(
            s.output, (height, width), None, model.dataset.resize_mode, model.class_labels, SCORE_FLOOR
        )
        boxes = [[d["class_id"], *d["box"], d["score"]] for d in found]
        dets.append(np.array(boxes, dtype=np.float64).reshape(-1, 6))
    gt = truth if truth is not None else [np.asarray(s.ground_truth, dtype=np.float64).reshape(-1, 5) for s in samples]
    num = len(model.class_labels or []) or None
    report = detection.detection_report(gt, dets, model.class_labels, num)
    report["score_floor"] = SCORE_FLOOR
    rows = [  # the boxes themselves too (JSON): the leaderboard resamples the images to put intervals on AP
        {
            "input": s.input_id,
            "truth_boxes": len(g),
            "detections": len(d),
            "truth": json.dumps(np.asarray(g, np.float64).reshape(-1, 5).tolist()),
            "predicted": json.dumps(d.tolist()),
        }
        for s, g, d in zip(samples, gt, dets)
    ]
    return report, rows, report["per_class"]


def _regression(model, samples) -> tuple[dict, list[dict], list[dict]]:
    if model.task == "image-to-image":
        truth = [np.asarray(s.ground_truth, dtype=np.float64) for s in samples]
        pred = [np.asarray(s.output, dtype=np.float64).reshape(t.shape) for s, t in zip(samples, truth)]
        data_range = 255.0 if max(t.max() for t in truth) > 1 else 1.0
        report = regression.image_report(truth, pred, data_range)
        report["data_range"] = data_range
        rows = [{"input": s.input_id, **r} for s, r in zip(samples, report["per_case"])]
        return report, rows, []
    p = np.stack([np.asarray(s.output, dtype=np.float64).reshape(-1) for s in samples])
    y = np.stack([np.asarray(s.ground_truth, dtype=np.float64).reshape(-1) for s in samples])
    report = regression.regression_report(p, y)
    rows = [
        {
            "input": s.input_id,
            **{f"truth_{i}": t for i, t in enumerate(yt)},
            **{f"predicted_{i}": v for i, v in enumerate(pt)},
        }
        for s, yt, pt in zip(samples, y, p)
    ]
    return report, rows, report["per_target"]


def _headline(task: str, report: dict) -> dict[str, Any]:
    keys = {
        "classification": ("accuracy", "top_k_accuracy"),
        "segmentation": ("dice",),
        "detection": ("ap", "ap50", "ap75", "ar"),
        "regression": ("mae", "rmse", "r2"),
        "image-to-image": ("psnr", "ssim", "mae"),
    }.get(task, ())
    out = {k: report.get(k) for k in keys}
    if task == "classification":
        out["macro_f1"] = report["macro"]["f1"]
        out["ece"] = report["calibration"]["ece"]
        out["intervals"] = report.get("intervals", {})
    if task == "segmentation":
        out["foreground_mean"] = report["summary"]["foreground_mean"]
    return segmentation.json_ready(out)


def _write_csv(path: Path, rows: list[dict]) -> None:
    fields: list[str] = []
    for row in rows:
        fields.extend(k for k in row if k not in fields)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in segmentation.json_ready(row).items()})


def evaluate(
    model_id: Any,
    *,
    epoch: float | None = None,
    dataset_id: str | None = None,
    stage: str = "test",
    inputs: Sequence[Any] | None = None,
    name: str | None = None,
    jobs_dir: Any = None,
    bootstrap: int = classification.BOOTSTRAP_SAMPLES,
    seed: int = classification.BOOTSTRAP_SEED,
    nsd_tolerance_mm: float = segmentation.NSD_TOLERANCE_MM,
    batch_size: int = 64,
    progress: Callable[[int, int], None] | None = None,
    mlflow: str | None = None,
) -> EvaluationResult:
    """Evaluate a trained model on a held-out test set in a new ``evaluation`` job.

    Args:
        model_id: Model job id (or unique prefix, or job folder).
        epoch: Snapshot epoch (default: the last).
        dataset_id: Dataset job whose ``stage`` is the test set (default: the model's own dataset).
        stage: ``"test"`` (default), ``"val"`` or ``"train"``.
        inputs: Labelled inputs instead of a stored stage: list files (``path label`` per line) or
            folders of class folders, read as ``digits infer`` reads them.
        name: The job's name (default: "<model name> on <test set>").
        jobs_dir: The jobs folder.
        bootstrap: Bootstrap resamples of the confidence intervals (classification; 0: none).
        seed: The bootstrap's seed.
        nsd_tolerance_mm: Tolerance of the normalised surface Dice (segmentation).
        batch_size: Largest batch per network call.
        progress: Called as ``progress(done, total)`` after each batch.
        mlflow: An MLflow tracking URI (default ``$MLFLOW_TRACKING_URI``): the finished evaluation's
            parameters, headline metrics and report folder are logged there (a failure is a warning:
            the evaluation is stored either way; :mod:`digits_core.engine.mlflow_log`).

    Returns:
        An :class:`EvaluationResult` (status Done).

    Raises:
        EvaluationError: A class the model never saw, an input without a label, a dataset of another
            task, an empty stage (nothing is created).
        JobNotFoundError: No such model or dataset.
        InferenceError: Unreadable inputs.
    """
    # inference is this package's own layer; imported on use so the metric modules stay light
    from ..inference import infer, load_inference_model

    uri = pop_tracking_uri({TRACKING_KEY: mlflow})
    if uri:  # refused before any work where the operator's rules refuse it
        check_tracking_uri(uri)
    volume = _volume_model(model_id, jobs_dir)
    if volume is not None:
        return _tracked(_evaluate_volumes(*volume, inputs, dataset_id, name, jobs_dir, nsd_tolerance_mm), uri)
    model = load_inference_model(model_id, epoch=epoch, jobs_dir=jobs_dir)
    if model.task not in ("classification", "segmentation", "detection", "regression", "image-to-image"):
        raise EvaluationError(f"Model {model.id} is a {model.task} model; evaluate takes 2-D image models for now.")
    truth = None
    source: dict[str, Any]
    if inputs:
        if dataset_id:
            raise EvaluationError(
                "Give either a dataset (--dataset/--stage) or labelled inputs (--folder/--list), not both."
            )
        source = {"inputs": [str(i) for i in inputs]}
        run_inputs: list = list(inputs)
    else:
        used, run_inputs, truth = _stage_inputs(model, dataset_id, stage, jobs_dir)
        source = {"dataset_id": used, "stage": stage}
    result = infer(
        model.job.path,
        run_inputs,
        epoch=epoch,
        jobs_dir=jobs_dir,
        batch_size=batch_size,
        progress=progress,
        max_errors=0,
    )
    samples = list(result.samples)
    if not samples:
        raise EvaluationError("The test set is empty: nothing to evaluate.")
    if truth is None:
        _missing_labels(samples)
    if model.task == "classification":
        report, rows, per_class = _classification(model, samples, bootstrap, seed)
    elif model.task == "segmentation":
        report, rows, per_class = _segmentation(model, samples, nsd_tolerance_mm)
    elif model.task == "detection":
        report, rows, per_class = _detection(model, samples, truth)
    else:
        report, rows, per_class = _regression(model, samples)
    report = segmentation.json_ready(
        {"task": model.task, "model_id": model.id, "epoch": model.epoch, **source, **report}
    )
    worst = worst_cases(model.task, samples, report)
    return _tracked(_publish(model, report, rows, per_class, source, name, jobs_dir, worst), uri)


def _tracked(result: EvaluationResult, uri: str | None) -> EvaluationResult:
    """``result``, logged to MLflow when a tracking URI is given (a failure is logged, the evaluation kept)."""
    if uri:
        summary = result.summary()
        params = {key: summary[key] for key in ("task", "epoch", "dataset_id", "stage") if summary.get(key) is not None}
        params["model_id"] = result.job.data.get("model_id")
        if summary.get("inputs"):
            params["inputs"] = ", ".join(map(str, summary["inputs"]))[:5000]
        try:
            log_evaluation(uri, result.job, dict(summary.get("metrics") or {}), params, result.folder)
        except Exception as exc:  # noqa: BLE001 - the tracker's failure never loses the evaluation
            logger.warning(
                "MLflow (%s): the evaluation %s was not logged: %s: %s", uri, result.job.id, type(exc).__name__, exc
            )
    return result


def _volume_model(model_id: Any, jobs_dir: Any) -> tuple[Path, dict] | None:
    """``(folder, model.json)`` of a 3-D volume model, else ``None`` (an image model, or no such job yet)."""
    # the engine's model-job readers (a lower layer; no TensorFlow)
    from ..engine import jobio

    try:
        folder = jobio.model_folder(model_id, jobs_dir)
        info = dict(jobio.read_model_info(folder))
    except (DigitsError, OSError):
        return None  # load_inference_model says what is wrong
    return (folder, info) if info.get("kind") == "volume" else None


def _evaluate_volumes(folder, info, inputs, dataset_id, name, jobs_dir, tolerance) -> EvaluationResult:
    from types import SimpleNamespace

    from .volumes import evaluate_volumes

    if dataset_id or not inputs:
        raise EvaluationError(
            f"Model {folder.name} is a 3-D volume model: give its test volumes as a list of 'image label' pairs "
            "(--list FILE), not a dataset stage."
        )
    report, rows, per_class, _results = evaluate_volumes(folder, info, inputs, jobs_dir, tolerance)
    job = JobStore(jobs_dir).get(folder.name, kind="model")
    model = SimpleNamespace(id=job.id, job=job, epoch=info.get("last_epoch"), task="segmentation")
    source: dict[str, Any] = {"inputs": [str(i) for i in inputs]}
    report = segmentation.json_ready(
        {"task": "segmentation", "model_id": job.id, "epoch": model.epoch, **source, **report}
    )
    return _publish(model, report, rows, per_class, source, name, jobs_dir, [])


def _publish(model, report, rows, per_class, source, name, jobs_dir, worst) -> EvaluationResult:
    """Create the job and publish its results folder by one rename; on any failure remove the job."""
    # the HTML report renders with Jinja2, loaded only when an evaluation is written
    from .report import render_report

    test_set = f"{source['dataset_id']} ({source['stage']})" if "dataset_id" in source else "labelled inputs"
    headline = _headline(model.task, report)
    fields: dict[str, Any] = {
        "model_id": model.id,
        "evaluation": {"task": model.task, "epoch": model.epoch, **source, "metrics": headline},
    }
    if "dataset_id" in source:
        fields["dataset_id"] = source["dataset_id"]
    job = create_job_record(
        "evaluation", name or f"{model.job.name} on {test_set}", jobs_dir=jobs_dir, hold=True, **fields
    )
    try:
        job.set_status(JobStatus.RUNNING)
        partial = job.path / f".{RESULTS}.partial"
        partial.mkdir()
        write_json_atomic(partial / "metrics.json", report)
        if model.task == "segmentation":
            write_json_atomic(partial / "summary.json", report["summary"])
        _write_csv(partial / "predictions.csv", rows)
        if per_class:
            _write_csv(partial / "per_class.csv", per_class)
        if worst:
            write_json_atomic(partial / WORST_FILE, worst)
        (partial / "report.html").write_text(render_report(report, job.name, worst=worst), encoding="utf-8")
        os.replace(partial, job.path / RESULTS)
        job.finish(JobStatus.DONE)
    except BaseException:
        shutil.rmtree(job.path, ignore_errors=True)
        raise
    return EvaluationResult(job, report)


def load_evaluation(job_id: str, jobs_dir: Any = None) -> EvaluationResult:
    """A finished evaluation job and its ``metrics.json``."""
    job = JobStore(jobs_dir).get(job_id, kind="evaluation")
    path = job.path / RESULTS / "metrics.json"
    if job.status != JobStatus.DONE or not path.is_file():
        raise EvaluationError(f"Evaluation {job.id} has no results ({job.status.value}).")
    return EvaluationResult(job, read_json_object(path, max_bytes=MAX_METRICS_BYTES))
