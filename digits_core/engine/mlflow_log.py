"""Optional MLflow logging of training runs, sweep trials and evaluations.

A run is logged when it is given a tracking URI (``mlflow=URI`` beside the training options,
``digits train|tune|evaluate --mlflow URI``) or when ``$MLFLOW_TRACKING_URI`` is set. What it logs:

* training (2-D runs and volume runs alike, :class:`RunTracker`): the options as parameters (the names and
  values of the TensorBoard HParams data, :func:`digits_core.engine.hparams.hparam_values`), every whole
  epoch's metrics (step = epochs done), the final metrics as ``final/<name>`` (``model.json``'s ``final_metrics``,
  as the HParams data names them: a final ``loss`` is the last logging window's, not the epoch's mean), what loads the model elsewhere as artifacts under
  ``model/`` (``model.json``, ``mean.npy``, a custom network's ``network.py``, the last snapshot
  ``epoch-NNN.keras`` or a volume model's ``model.keras``) and, for a Done run, the SavedModel export
  (``digits export``'s ``.tar.gz``) under ``export/``; the run ends FINISHED, KILLED (Aborted) or FAILED;
* a resumed job (every resume door goes through :func:`~digits_core.engine.trainer.resume_training`) continues
  the same MLflow run: its id is kept in ``model.json`` (:data:`RUN_KEY`);
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
import json
import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import DigitsError
from ..jobs.model import MODEL_FILE, read_model_record, update_model_record
from ..outbound import OutboundURLError, check_url, in_server_context
from .hparams import FINAL_PREFIX, final_values, hparam_values
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
#: The ``model.json`` key of a tracked job's MLflow run: ``{"run_id", "experiment_id", "uri"}`` (no credentials).
RUN_KEY = "mlflow"
#: A job's final status as an MLflow run status.
_RUN_STATUS = {"Done": "FINISHED", "Stopped early": "FINISHED", "Aborted": "KILLED", "Error": "FAILED"}
#: How long the SavedModel export of a finished run may take (a child process).
EXPORT_TIMEOUT_S = 900
#: A volume model's Keras file (engine.volume_loop), beside model.json.
VOLUME_MODEL_FILE = "model.keras"
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


def check_tracking_uri(uri: str, field: str = TRACKING_KEY, *, request: bool = False) -> None:
    """Refuse, in a server context, a tracking URI the operator did not allow (an http(s) URL
    that passes :func:`digits_core.outbound.check_url`; no file, database or other scheme).

    Args:
        uri: The tracking URI.
        field: The field named in the refusal.
        request: The URI comes from a request, which is stored with its job or sweep: credentials in it
            (``user:password@``) are refused too (the operator's own ``$MLFLOW_TRACKING_URI`` may hold them).

    Raises:
        OutboundURLError: Where the operator's rules refuse it.
    """
    if not in_server_context():
        return
    if request and "@" in urlsplit(uri).netloc:
        raise OutboundURLError(
            f"{field}: a tracking URI with a user name or password would be stored with the job; give the server "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD in its environment instead.",
            field,
        )
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


def terminate(mlflow_client: Any, run_id: str, status: str = "FINISHED") -> None:
    """End a run (``FINISHED``, ``KILLED``, ``FAILED``); MLflow's "View run at" lines go to the log, not to stdout
    (``--json`` stays JSON)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        mlflow_client.set_terminated(run_id, status)
    for line in printed.getvalue().splitlines():
        logger.info("MLflow: %s", line)


def public_uri(uri: str) -> str:
    """``uri`` without credentials (``user:password@``): what a model job's record keeps of its tracking server."""
    parts = urlsplit(uri)
    if not parts.netloc or "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


class RunTracker:
    """The MLflow run of one model job (2-D or volume), from its start or resume to its final status.

    The run's id is kept in the job's ``model.json`` (:data:`RUN_KEY`: ``run_id``, ``experiment_id`` and the URI
    without credentials). A resumed job tracked on the same server continues that run: it is set RUNNING again,
    the parameters it lacks are added (a changed value such as a larger ``epochs`` is kept as the tag
    ``digits.resumed_params``) and epochs already logged are not logged twice. Every call is guarded: a failing
    tracking server costs a warning, never the run.

    Args:
        uri: The tracking URI.
        job: The model :class:`~digits_core.Job`.
        params: The run's parameters (:func:`~digits_core.engine.hparams.hparam_values`).
    """

    def __init__(self, uri: str, job: Any, params: dict[str, Any]):
        self.uri, self.job, self.params = uri, job, params
        self.client: Any = None
        self.run_id = ""
        self.step = 0  # the last epoch logged
        self.logged_until = 0  # a resumed run: the last epoch its earlier attempt logged

    def _guard(self, what: str, action) -> None:
        if what != "start" and self.client is None:
            return
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - a tracker's failure never fails the run
            logger.warning("MLflow (%s): %s failed: %s: %s", self.uri, what, type(exc).__name__, exc)
            if what == "start":
                self.client = None

    def begin(self) -> None:
        """Start the run, or continue the job's stored run (see the class docstring)."""
        self._guard("start", self._begin)

    def _begin(self) -> None:
        folder = Path(self.job.path)
        stored: dict[str, Any] = dict(read_model_record(folder).get("mlflow") or {})
        if stored.get("run_id") and stored.get("uri") == public_uri(self.uri):
            self.client, self.run_id = client(self.uri), str(stored["run_id"])
            self.client.update_run(self.run_id, status="RUNNING")
            run = self.client.get_run(self.run_id)
            known = dict(run.data.params)
            log_params(self.client, self.run_id, {k: v for k, v in self.params.items() if str(k) not in known})
            changed = sorted(str(k) for k, v in self.params.items() if str(k) in known and known[str(k)] != str(v))
            if changed:
                self.client.set_tag(
                    self.run_id, "digits.resumed_params", json.dumps({k: str(self.params[k]) for k in changed})
                )
            if "loss" in run.data.metrics:
                self.logged_until = max(point.step for point in self.client.get_metric_history(self.run_id, "loss"))
            self.step = self.logged_until
            return
        self.client, self.run_id = start_run(
            self.uri, self.job.name, {"digits.job_id": self.job.id, "digits.kind": "model"}, self.job.data.get("group")
        )
        log_params(self.client, self.run_id, self.params)
        experiment = self.client.get_run(self.run_id).info.experiment_id
        update_model_record(
            folder, mlflow={"run_id": self.run_id, "experiment_id": experiment, "uri": public_uri(self.uri)}
        )

    def epoch(self, step: int, metrics: dict[str, Any]) -> None:
        """Log a whole epoch's metrics at ``step`` (epochs done); one its earlier attempt logged is left as it is."""
        if int(step) <= self.logged_until:
            return
        self.step = int(step)
        self._guard("epoch metrics", lambda: log_metrics(self.client, self.run_id, metrics, self.step))

    def finish(self, status: str, final_metrics: dict[str, Any]) -> None:
        """End the run: a finished one gets its final metrics as ``final/<name>`` (the tags of the TensorBoard HParams
        data; ``model.json``'s ``final_metrics``, at the last epoch's step), the model's files and the SavedModel
        export as artifacts, and FINISHED; Aborted ends KILLED (a resume continues it), Error FAILED."""

        def files() -> None:
            finals = {FINAL_PREFIX + str(k): v for k, v in final_metrics.items()}  # the curves: each epoch once
            log_metrics(self.client, self.run_id, finals, self.step)
            _log_model_files(self.client, self.run_id, Path(self.job.path))

        if status in ("Done", "Stopped early"):
            self._guard("final metrics and model files", files)
        if status == "Done":
            self._guard("export", lambda: _log_export(self.client, self.run_id, self.job))
        self._guard("end", lambda: terminate(self.client, self.run_id, _RUN_STATUS.get(status, "FINISHED")))


def training_callback(tracker: RunTracker) -> Any:
    """A Keras callback that feeds ``tracker`` from the engine's loop: the run's start and every whole epoch
    (an epoch an abort interrupted is not an epoch: a resume trains it again); the trainer calls
    :meth:`RunTracker.finish` once the job's final status is known."""
    import keras

    class MlflowLogger(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.last_batch = -1

        def on_train_begin(self, logs=None) -> None:
            tracker.begin()

        def on_train_batch_end(self, batch, logs=None) -> None:
            self.last_batch = int(batch)

        def on_epoch_end(self, epoch, logs=None) -> None:
            if self.last_batch + 1 >= int(self.params.get("steps") or 0):
                tracker.epoch(int(epoch) + 1, dict(logs or {}))
            self.last_batch = -1

    return MlflowLogger()


def tracked_callbacks(callbacks: list | None, uri: str | None, state: Any) -> list | None:
    """``callbacks`` and, when the run is tracked (``mlflow=URI``, ``$MLFLOW_TRACKING_URI``, a resumed job's run),
    its MLflow logger; the chief only. The tracker is kept in ``state.extra`` for :func:`finish_tracking`."""
    if not uri or not state.strat.is_chief:
        return callbacks
    params = hparam_values(state.opts.to_dict(), network=state.spec.name, dataset=state.reader.id)
    tracker = RunTracker(uri, state.job, params)
    state.extra["tracker"] = tracker
    return [*(callbacks or []), training_callback(tracker)]


def finish_tracking(state: Any, status: str) -> None:
    """End a 2-D run's MLflow run (if tracked) with the job's final status and its ``model.json`` final metrics."""
    tracker = state.extra.get("tracker")
    if tracker is not None:
        record = read_model_record(state.folder) if (Path(state.folder) / MODEL_FILE).is_file() else {}
        tracker.finish(status, final_values(dict(record.get("final_metrics") or {})))


def resumed_tracking_uri(record: Mapping[str, Any]) -> str | None:
    """The tracking URI of a resume: ``$MLFLOW_TRACKING_URI`` (``digits train --resume --mlflow``), else the server
    the job's run was logged to (its record keeps the URI without credentials), else none."""
    return pop_tracking_uri({}) or (dict(record.get(RUN_KEY) or {}).get("uri") or None)


def _log_model_files(mlflow_client: Any, run_id: str, folder: Path) -> None:
    """What loads the model elsewhere: its record, the dataset mean, a custom network's code, the last snapshot
    (a volume model's ``model.keras``)."""
    mlflow_client.log_artifact(run_id, str(folder / MODEL_FILE), "model")
    for extra in (MEAN_FILE, NETWORK_COPY, VOLUME_MODEL_FILE):
        if (folder / extra).is_file():
            mlflow_client.log_artifact(run_id, str(folder / extra), "model")
    snapshots = sorted((folder / SNAPSHOT_DIR).glob("*.keras"))
    if snapshots:
        mlflow_client.log_artifact(run_id, str(snapshots[-1]), "model")


def _log_export(mlflow_client: Any, run_id: str, job: Any) -> None:
    """The model's SavedModel export (``digits export``'s ``.tar.gz``, without its parity report) under ``export/``.

    It runs as ``digits export`` in a child process: the export is built by the inference layer, above the engine.
    """
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="digits-mlflow-export-") as scratch:
        archive = Path(scratch) / f"{job.id}-savedmodel.tar.gz"
        command = [sys.executable, "-m", "digits_core", "--jobs-dir", str(Path(job.path).parent), "export"]
        command += ["--model", job.id, "--format", "savedmodel", "--parity-sample", "0", "--out", str(archive)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
        if done.returncode != 0 or not archive.is_file():
            raise TrackingError(f"the SavedModel export failed: {(done.stderr or done.stdout).strip()[-500:]}")
        mlflow_client.log_artifact(run_id, str(archive), "export")


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
