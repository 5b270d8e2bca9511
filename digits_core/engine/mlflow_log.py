"""Optional MLflow logging of training runs, sweep trials and evaluations.

A run is logged when it is given a tracking URI (``mlflow=URI`` beside the training options,
``digits train|tune|evaluate --mlflow URI``) or when ``$MLFLOW_TRACKING_URI`` is set. What it logs:

* training: the options as parameters (the names and values of the TensorBoard HParams data,
  :func:`digits_core.engine.hparams.hparam_values`), every epoch's metrics (step = epochs done),
  the final metrics, and what loads the model elsewhere as artifacts under ``model/``: ``model.json``,
  ``mean.npy``, a custom network's ``network.py`` and the last snapshot (``epoch-NNN.keras``);
* an evaluation: its summary metrics and its report folder (HTML, JSON, CSVs) as artifacts
  (:func:`log_evaluation`).

The experiment is ``$MLFLOW_EXPERIMENT_NAME``, else the job's group (a sweep's trials share one),
else ``digits``; each run is tagged ``digits.job_id`` and ``digits.kind``. The URI is an outbound
address: a web request may give one only where the operator allows it (the one gate,
:func:`digits_core.submit.options.check_request_options`), and it is checked again where the job
runs (:func:`check_tracking_uri`). A tracking server that fails mid-run is logged as a warning:
the model is never lost to its tracker. ``mlflow`` is imported only when a run is logged
(``pip install digits-core[mlflow]``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from ..errors import DigitsError
from ..jobs.model import MODEL_FILE
from ..outbound import check_url, in_server_context
from .hparams import hparam_values
from .jobio import NETWORK_COPY, SNAPSHOT_DIR

#: The key beside the training options that names the tracking URI (never a training option itself).
TRACKING_KEY = "mlflow"
#: MLflow's own environment variables: the tracking URI and the experiment name.
URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
DEFAULT_EXPERIMENT = "digits"
#: The dataset mean a model job keeps beside model.json (mean subtraction at inference).
MEAN_FILE = "mean.npy"
#: MLflow's HTTP patience where the user set none: its own defaults (7 retries with doubling waits, 120 s
#: timeouts) hold a run's start for about four minutes when the tracking server is down.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
#: MLflow refuses a batch of more than 100 parameters (and 1000 metrics).
_PARAM_BATCH = 100

logger = logging.getLogger("digits_core.engine")


class TrackingError(DigitsError):
    """The MLflow tracking URI cannot be used (not installed, or refused by the operator's rules)."""


def pop_tracking_uri(options: dict) -> str | None:
    """Take the tracking URI out of ``options`` (changed in place); ``$MLFLOW_TRACKING_URI`` when not given.

    Returns:
        The URI, or ``None`` when the run is not tracked.
    """
    given = options.pop(TRACKING_KEY, None)
    uri = str(given).strip() if given not in (None, "") else os.environ.get(URI_ENV, "").strip()
    return uri or None


def check_tracking_uri(uri: str, field: str = TRACKING_KEY) -> None:
    """Refuse, in a server context, a tracking URI the operator did not allow (an http(s) URL
    that passes :func:`digits_core.outbound.check_url`; no file, database or other scheme).

    Raises:
        OutboundURLError: Where the operator's rules refuse it.
    """
    if in_server_context():
        check_url(uri, field)


def client(uri: str) -> Any:
    """An ``MlflowClient`` for ``uri`` (checked by :func:`check_tracking_uri`), with bounded HTTP retries
    (:data:`HTTP_DEFAULTS`, where ``$MLFLOW_HTTP_REQUEST_*`` are not set).

    Raises:
        TrackingError: MLflow is not installed.
        OutboundURLError: The operator's rules refuse the URI.
    """
    check_tracking_uri(uri)
    for name, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(name, value)
    try:
        from mlflow.tracking import MlflowClient  # the optional extra, only when a run is tracked
    except ImportError as exc:
        raise TrackingError(
            f"MLflow tracking ({uri}) needs the mlflow package: pip install 'digits-core[mlflow]'"
        ) from exc
    return MlflowClient(tracking_uri=uri)


def start_run(uri: str, name: str, tags: dict[str, str], group: str | None = None) -> tuple[Any, str]:
    """Create an MLflow run; returns ``(client, run_id)``."""
    mlflow_client = client(uri)
    experiment = os.environ.get(EXPERIMENT_ENV) or group or DEFAULT_EXPERIMENT
    found = mlflow_client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found is not None else mlflow_client.create_experiment(experiment)
    run = mlflow_client.create_run(experiment_id, run_name=name, tags=tags)
    return mlflow_client, run.info.run_id


def log_params(mlflow_client: Any, run_id: str, params: dict[str, Any]) -> None:
    """Log parameters in batches MLflow accepts (values as text)."""
    from mlflow.entities import Param  # with the client

    items = [Param(str(key), str(value)) for key, value in params.items()]
    for start in range(0, len(items), _PARAM_BATCH):
        mlflow_client.log_batch(run_id, params=items[start : start + _PARAM_BATCH])


def log_metrics(mlflow_client: Any, run_id: str, metrics: dict[str, Any], step: int) -> None:
    """Log the finite numbers of ``metrics`` at ``step``."""
    from mlflow.entities import Metric  # with the client

    now = int(time.time() * 1000)
    items = [
        Metric(str(key), float(value), now, int(step))
        for key, value in metrics.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ]
    if items:
        mlflow_client.log_batch(run_id, metrics=items)


def terminate(mlflow_client: Any, run_id: str) -> None:
    """End a run as FINISHED; MLflow's "View run at" lines go to the log, not to stdout (``--json`` stays JSON)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        mlflow_client.set_terminated(run_id, "FINISHED")
    for line in printed.getvalue().splitlines():
        logger.info("MLflow: %s", line)


def training_callback(uri: str, job: Any, record: dict) -> Any:
    """A Keras callback that logs one training run to MLflow (see the module docstring).

    Args:
        uri: The tracking URI.
        job: The model :class:`~digits_core.Job`.
        record: Its options, network and dataset: ``{"options", "network", "dataset_id"}``.
    """
    import keras

    params = hparam_values(
        dict(record.get("options") or {}), network=record.get("network"), dataset=record.get("dataset_id")
    )

    class MlflowLogger(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.client: Any = None
            self.run_id = ""
            self.epochs_done = 0

        def _guard(self, what: str, action) -> None:
            if what != "start" and self.client is None:
                return
            try:
                action()
            except Exception as exc:  # noqa: BLE001 - a tracker's failure never fails the run
                logger.warning("MLflow (%s): %s failed: %s: %s", uri, what, type(exc).__name__, exc)
                if what == "start":
                    self.client = None

        def on_train_begin(self, logs=None) -> None:
            def begin() -> None:
                self.client, self.run_id = start_run(
                    uri, job.name, {"digits.job_id": job.id, "digits.kind": "model"}, job.data.get("group")
                )
                log_params(self.client, self.run_id, params)

            self._guard("start", begin)

        def on_epoch_end(self, epoch, logs=None) -> None:
            self.epochs_done = int(epoch) + 1
            self._guard(
                "epoch metrics", lambda: log_metrics(self.client, self.run_id, dict(logs or {}), self.epochs_done)
            )

        def on_train_end(self, logs=None) -> None:
            def end() -> None:
                log_metrics(self.client, self.run_id, dict(logs or {}), self.epochs_done)
                _log_model_files(self.client, self.run_id, job.path)
                terminate(self.client, self.run_id)

            self._guard("end", end)

    return MlflowLogger()


def _log_model_files(mlflow_client: Any, run_id: str, folder: Path) -> None:
    """What loads the model elsewhere: its record, the dataset mean, a custom network's code, the last snapshot."""
    mlflow_client.log_artifact(run_id, str(folder / MODEL_FILE), "model")
    for extra in (MEAN_FILE, NETWORK_COPY):
        if (folder / extra).is_file():
            mlflow_client.log_artifact(run_id, str(folder / extra), "model")
    snapshots = sorted((folder / SNAPSHOT_DIR).glob("*.keras"))
    if snapshots:
        mlflow_client.log_artifact(run_id, str(snapshots[-1]), "model")


def flat_numbers(values: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numbers of a nested dict, keyed ``outer.inner`` (an evaluation's intervals, per-metric means)."""
    found: dict[str, float] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            found.update(flat_numbers(value, f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            found[name] = float(value)
    return found


def log_evaluation(uri: str, job: Any, metrics: dict[str, Any], params: dict[str, Any], report: Path | None) -> str:
    """Log an evaluation job to MLflow: its parameters, summary metrics and report folder.

    Args:
        uri: The tracking URI.
        job: The evaluation :class:`~digits_core.Job`.
        metrics: Its summary metrics (nested dicts flattened by :func:`flat_numbers`; non-numbers left out).
        params: Model, epoch, dataset and stage.
        report: The report folder (HTML, JSON, CSVs), logged under ``report/``.

    Returns:
        The MLflow run id.

    Raises:
        TrackingError, OutboundURLError: MLflow missing, or the URI refused (nothing logged).
    """
    mlflow_client, run_id = start_run(
        uri, job.name, {"digits.job_id": job.id, "digits.kind": "evaluation"}, job.data.get("group")
    )
    log_params(mlflow_client, run_id, params)
    log_metrics(mlflow_client, run_id, flat_numbers(metrics), 0)
    if report is not None and Path(report).is_dir():
        mlflow_client.log_artifacts(run_id, str(report), "report")
    terminate(mlflow_client, run_id)
    return run_id
