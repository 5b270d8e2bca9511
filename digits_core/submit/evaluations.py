"""Evaluation jobs from the web: validate a request through the one gate, then run it, whatever its door.

``POST /api/evaluations`` and the model page's Evaluate panel call :func:`check_evaluation_request`
(every field checked, paths against the data roots, the MLflow URI against the operator's outbound rules;
a bad request names its fields and creates nothing) and then :func:`run_evaluation`, which runs
``digits evaluate ... --json`` in a one-off process so TensorFlow never loads in the web server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.mlflow_log import TRACKING_KEY, check_tracking_uri
from ..errors import FormValidationError
from ..evaluation.run import STAGES, EvaluationError
from ..outbound import OutboundURLError
from ..paths import check_server_path

if TYPE_CHECKING:
    from ..jobs import JobStore

_FORM = "evaluation"
#: Request keys that give labelled inputs instead of a stored stage: a folder of class folders, a list file.
INPUT_KEYS = ("folder", "list")
#: Largest bootstrap a request may ask for.
MAX_BOOTSTRAP = 10000


def _paths(value: Any) -> list[str]:
    """A request's ``folder``/``list`` value: one path, several (a list or one per line), or none."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").splitlines()
    return [str(item).strip() for item in items if str(item).strip()]


def _input_errors(values: dict) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The checked folder and list paths (data roots, existence), and the errors by key."""
    errors: dict[str, list[str]] = {}
    found: dict[str, list[str]] = {}
    for key in INPUT_KEYS:
        raw = values.get(key)
        if raw is not None and not isinstance(raw, (str, list, tuple)):
            errors[key] = ["a path or a list of paths"]
            continue
        for text in _paths(raw):
            try:
                path = check_server_path(text, key, form_name=_FORM)
            except FormValidationError as exc:  # outside the data roots: its own message for the field
                errors.setdefault(key, []).extend(exc.errors.get(key) or [str(exc)])
                continue
            exists = path.is_dir() if key == "folder" else path.is_file()
            if not exists:
                what = "a folder of class folders" if key == "folder" else "a list file of 'path label' lines"
                errors.setdefault(key, []).append(f"{text}: not found (give {what})")
                continue
            found.setdefault(key, []).append(str(path))
    return found, errors


def _epoch(value: Any, errors: dict[str, list[str]]) -> float | None:
    if value in ("", None):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        errors["epoch"] = ["a number (a snapshot's epoch), or empty for the last"]
        return None


def check_evaluation_request(values: dict, store: JobStore) -> dict[str, Any]:
    """Check an evaluation request: the one gate of ``POST /api/evaluations`` and the Evaluate panel.

    Args:
        values: ``model`` (required), ``dataset``, ``stage``, ``epoch``, ``name``, ``bootstrap``, labelled
            inputs instead of a stored stage (``folder``, ``list``: a path, a list of paths or one per line, each
            under the data roots) and ``mlflow`` (a tracking URI the operator's outbound rules allow).
        store: The server's job store (the model and dataset are looked up in it).

    Returns:
        The checked options (full job ids, resolved paths) for :func:`run_evaluation`.

    Raises:
        FormValidationError: Naming every bad field; nothing has been created.
        JobNotFoundError: No such model or dataset.
    """
    errors: dict[str, list[str]] = {}
    model = str(values.get("model") or "").strip()
    if not model:
        errors["model"] = ["give the model job id"]
    stage = str(values.get("stage") or "test")
    if stage not in STAGES:
        errors["stage"] = [f"one of {', '.join(STAGES)}"]
    epoch = _epoch(values.get("epoch"), errors)
    bootstrap = values.get("bootstrap", 1000)
    if (
        isinstance(bootstrap, bool)
        or not isinstance(bootstrap, (int, str))
        or not str(bootstrap).isdigit()
        or int(bootstrap) > MAX_BOOTSTRAP
    ):
        errors["bootstrap"] = [f"a whole number from 0 to {MAX_BOOTSTRAP}"]
    name = values.get("name")
    if name is not None and not isinstance(name, str):
        errors["name"] = ["text"]
    dataset = str(values.get("dataset") or "").strip() or None
    inputs, input_errors = _input_errors(values)
    errors.update(input_errors)
    if dataset and (inputs or input_errors):
        errors["dataset"] = ["give either a dataset (and stage) or labelled inputs (folder, list), not both"]
    tracking = str(values.get(TRACKING_KEY) or "").strip() or None
    if tracking:
        try:
            check_tracking_uri(tracking, TRACKING_KEY, request=True)
        except OutboundURLError as exc:
            errors[TRACKING_KEY] = [str(exc)]
    if errors:
        raise FormValidationError(errors, _FORM)
    model_job = store.get(model, kind="model")
    dataset_job = store.get(dataset, kind="dataset") if dataset else None
    return {
        "model": model_job.id,
        "dataset": dataset_job.id if dataset_job else None,
        "stage": stage,
        "epoch": epoch,
        "bootstrap": int(bootstrap),
        "name": name or None,
        "folder": inputs.get("folder", []),
        "list": inputs.get("list", []),
        TRACKING_KEY: tracking,
    }


def evaluation_arguments(options: dict[str, Any], jobs_dir: str | os.PathLike) -> list[str]:
    """The ``digits evaluate`` command line of checked options (:func:`check_evaluation_request`)."""
    args = [sys.executable, "-m", "digits_core", "--jobs-dir", str(jobs_dir), "evaluate", "--model", options["model"]]
    args += ["--bootstrap", str(options["bootstrap"]), "--json"]
    if options.get("folder") or options.get("list"):
        args += [item for path in options.get("folder", []) for item in ("--folder", path)]
        args += [item for path in options.get("list", []) for item in ("--list", path)]
    else:
        args += ["--stage", options["stage"]]
    if options.get("dataset"):
        args += ["--dataset", options["dataset"]]
    if options.get("epoch") is not None:
        args += ["--epoch", repr(options["epoch"])]
    if options.get("name"):
        args += ["--name", options["name"]]
    if options.get(TRACKING_KEY):
        args += ["--mlflow", options[TRACKING_KEY]]
    return args


def run_evaluation(options: dict[str, Any], jobs_dir: str | os.PathLike, timeout: float) -> dict[str, Any]:
    """Run a checked evaluation in a one-off process; its summary (``digits evaluate --json``).

    Raises:
        EvaluationError: What ``digits evaluate`` said was wrong, or the time limit passed.
    """
    try:
        done = subprocess.run(
            evaluation_arguments(options, Path(jobs_dir)),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ),
        )
    except subprocess.TimeoutExpired:
        raise EvaluationError(
            f"The evaluation did not finish within {timeout:g} s; run digits evaluate instead."
        ) from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        raise EvaluationError(lines[-1][len("error: ") :] if lines else "The evaluation failed; see the server log.")
    return json.loads(done.stdout.strip().splitlines()[-1])
