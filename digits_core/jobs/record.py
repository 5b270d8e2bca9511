"""The typed records of a job folder: ``job.json``, ``model.json`` and ``dataset.json``.

Every key a job file may hold is declared here, once, with its type. mypy
then refuses a misspelt or mistyped key where a record is indexed or
written, and in :meth:`~digits_core.jobs.Job.create`'s keywords
(:class:`JobFields`); ``.get()`` of an unknown key is not refused, and some
modules are not checked yet, so ``tests/test_job_record.py`` also requires
every key the code uses to be declared. The records stay plain dicts at run
time (:class:`typing.TypedDict`): they round-trip through JSON unchanged and
keys written by a newer version are kept, not dropped.

``job.json`` carries :data:`SCHEMA_VERSION`. A file without one was written
before the version existed and reads as version 1 (no key changed meaning);
a file from a newer schema is refused with a message saying to upgrade,
rather than being half-understood and rewritten. To add a key: declare it in
the matching record below (a new ``job.json`` key goes in :class:`JobFields`),
document it in a comment, and bump :data:`SCHEMA_VERSION` only when an
existing key changes meaning (then teach :func:`check_job_record` the
migration).
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

from .checks import check_record_types, is_unix_time
from .readers import UnreadableRecordError
from .status import JobStatus

#: The ``job.json`` layout this code writes and understands.
SCHEMA_VERSION = 1

#: The job kinds (``evaluation``: a model on a held-out test set, :mod:`digits_core.evaluation`;
#: ``pool``: unlabelled candidates for active learning, :mod:`digits_core.labeling`).
JOB_KINDS = ("dataset", "model", "evaluation", "pool")


class DatasetSummary(TypedDict, total=False):
    """``job.json["dataset"]``: what a finished dataset job built (for job lists)."""

    stages: dict[str, int]  # stage name -> record count
    skipped: int  # entries skipped into the errors report
    feature: dict[str, Any]  # as dataset.json["feature"]
    label: dict[str, Any]  # as dataset.json["label"]


class WorkerReport(TypedDict, total=False):
    """``job.json["worker_report"]``: one training worker's share of a multi-worker run."""

    worker_index: int
    num_workers: int
    steps: int
    images_per_epoch: int


class _JobRecordRequired(TypedDict):
    id: str  # also the folder name, YYYYMMDD-HHMMSS-xxxx
    kind: str  # one of JOB_KINDS
    status_history: list[list[Any]]  # [[status value, unix time], ...], oldest first


class _JobRecordWritten(TypedDict, total=False):
    schema_version: int  # SCHEMA_VERSION of the writer (absent before version 1: read as 1)
    name: str  # the user's name for the job
    created: float  # unix time
    error: str  # the message of the last Error/Aborted status


class JobFields(TypedDict, total=False):
    """The other keys of ``job.json``: what :meth:`~digits_core.jobs.Job.create` takes as keywords.

    Keys for both kinds, then dataset-only and model-only keys.
    """

    form_data: dict[str, Any]  # dataset: the plugin form's values (secrets redacted); model: the options
    data_roots: list[str]  # web jobs: the server-side folders the job may read
    group: str  # job group shown on the home page (digits_core.groups.normalize_group); absent: none
    notes: str  # the user's notes, edited on the job's page (digits_core.web.job_notes)
    owned_by: str  # the user account that created it (digits_core.accounts); absent: no owner (CLI, before accounts)
    visibility: str  # "public": every account may read it; absent: its owner and admins only
    shared_with: list[str]  # groups whose members may read it (digits_core.accounts); absent: none
    # dataset jobs
    plugin_id: str  # the data-ingestion plugin
    max_errors: int | float  # entries (int) or fraction of entries (float < 1) that may be skipped
    workers: int | None  # encoder processes (None: the default)
    pid: int  # the process that built the dataset
    dataset: DatasetSummary  # set when the dataset is published
    # model jobs
    dataset_id: str  # the dataset job trained on
    network: str  # built-in network name, or the custom network file
    task: str  # classification, segmentation, ... (engine.tasks)
    train_options: dict[str, Any]  # web/scheduler jobs: the train() keyword arguments to run with
    custom_network: bool  # the network came as code pasted into the web form
    sweep: dict[str, Any]  # a sweep point: its swept option values, e.g. {"learning_rate": 0.1} (digits_core.sweep)
    scratch: str  # non-chief workers: the temporary folder to remove at the end
    worker_report: WorkerReport  # set at the end of a run
    resume: bool  # scheduler: resume from the last snapshot instead of starting over
    status_note: str  # shown with a Done status, e.g. "stopped early at epoch N ..." (engine.early_stopping)
    resume_epochs: int  # scheduler: the new total number of epochs of that resume (default: as planned)
    gpus_assigned: list[str]  # scheduler: the GPU ids (CUDA_VISIBLE_DEVICES entries) the job runs on
    placement: dict[str, Any]  # Ray executor: executor, node_id, node_address, gpus of the node that ran it;
    # a dataset encoded on Ray adds "encoding": {"executor": "ray", "tasks": N, "nodes": {node id: chunks}}
    # evaluation jobs (digits_core.evaluation; also dataset_id: the test set's dataset, when one was read)
    model_id: str  # the model evaluated
    evaluation: dict[str, Any]  # task, epoch, dataset_id/stage or inputs, and the headline "metrics"
    # pool jobs (digits_core.labeling.pool; the candidates are in pool.json beside job.json)
    pool: dict[str, Any]  # source, task, dimensions, modality
    pool_run: dict[str, Any]  # the queued scoring or round: action, model, strategy, counts, run token, by
    pool_progress: dict[str, Any]  # done, total, skipped of the running scoring
    pool_result: dict[str, Any]  # what the last run did (scored, skipped, proposed, the retrained model)


class JobRecord(_JobRecordRequired, _JobRecordWritten, JobFields):
    """``job.json``: one job's identity, inputs and status history (:class:`JobFields` lists the optional keys).

    Read the common keys through :class:`~digits_core.jobs.Job`'s properties.
    """


class _SnapshotRequired(TypedDict):
    epoch: float  # epochs are numbers: 1.5 is a mid-epoch snapshot
    file: str  # the Keras file under snapshots/


class SnapshotEntry(_SnapshotRequired, total=False):
    """One entry of ``model.json["snapshots"]``."""

    step: int  # the global step it was taken at
    state: str  # the optimizer-state file (.state.npz) for resume


class ModelRecord(TypedDict, total=False):
    """``model.json``: what a model job trained and how to serve it (written through :mod:`digits_core.jobs.model`)."""

    job_id: str
    network: str
    network_source: str  # "builtin" or "file"
    dataset_id: str
    dataset_path: str | None
    dataset_plugin: str | None
    task: str
    options: dict[str, Any]  # TrainingOptions.to_dict()
    seed: int  # the run's seed (a random one is drawn and recorded when none is given)
    batch_size: int  # the global batch
    steps_per_epoch: int
    total_steps: int
    input_shape: list[int]
    feature_shape: list[int]
    feature_dtype: str
    num_outputs: int
    class_labels: list[str] | None
    color_palette: list[list[int]] | None
    mean_subtraction: str
    crop_size: int | None
    preprocessing: dict[str, Any]  # engine.preprocessing.Preprocessing.save()
    loss: str
    class_weights: list[float] | None
    lr_policy: dict[str, Any]
    parameters: int
    distributed: dict[str, Any]
    train_count: int
    val_count: int
    input_pipeline: str  # "preload" or "stream"
    fine_tune: dict[str, Any] | None
    weights: dict[str, Any] | None  # pretrained weights' provenance: name, sha256, source, license
    snapshots: list[SnapshotEntry]
    best_epoch: float | None
    best_metric: float | None
    best_metric_name: str  # the validation metric best_metric is (the task's best_key)
    last_epoch: float
    status: str
    resumed_from: str  # the snapshot file the latest resume started from
    error: str | None  # the message of a run that ended in Error or Aborted
    final_metrics: dict[str, Any]  # the last logs of the run
    stopped_early: bool  # a callback stopped training before the planned epochs
    early_stopping: dict[str, Any]  # engine.early_stopping.EarlyStopping.summary() of a run it stopped
    mlflow: dict[str, Any]  # the job's MLflow run: run_id, experiment_id, uri without credentials (engine.mlflow_log)
    # 3-D volume models (engine.volume_loop): kind "volume" and how the volumes were prepared
    kind: str  # "volume"; absent for the 2-D engine's models
    volume: dict[str, Any]  # engine.volume_train.VolumeConfig as a dict
    input_channels: int
    target_spacing_mm: Any  # the dataset's userdata value (per-axis millimetres)
    normalization: Any  # the dataset's userdata "normalization_used"
    val_cases: list[Any]
    model_file: str  # the Keras file of the trained model
    pretrained: str  # a volume run started from this model file's weights (the pretrained option)
    # read for older model.json files only (the engine writes dataset_id / dataset_plugin)
    dataset: str | dict[str, Any]  # the dataset id, or {"id": ...}
    plugin_id: str  # the dataset's plugin


class DatasetRecord(TypedDict, total=False):
    """``dataset.json``: a published dataset (written by :mod:`digits_core.datasets.publish`)."""

    format: str
    format_version: int
    id: str
    name: str
    plugin_id: str
    plugin_version: str | None
    created: float
    feature: dict[str, Any]  # shape, dtype, layout
    label: dict[str, Any]  # kind, dtype, shape
    stages: dict[str, dict[str, Any]]  # stage -> count, lmdb folder, ...
    userdata: dict[str, Any]
    class_labels: list[str] | None
    num_classes: int | None
    color_palette: list[list[int]] | None
    mean: dict[str, Any] | None
    errors: dict[str, Any]
    workers: int
    timing: dict[str, Any]


class SweepRecord(TypedDict, total=False):
    """``JOBS_DIR/.sweeps/<id>/sweep.json``: one hyper-parameter search, the group of its trial jobs
    (written by :mod:`digits_core.tuning` through :mod:`digits_core.jobs.sweep`)."""

    id: str
    name: str
    group: str  # the trials' job group
    folder: str  # the sweep's folder
    jobs_dir: str
    dataset: str  # the dataset job id
    network: str
    settings: dict[str, Any]  # tuning.TuneSettings as a dict (scheduler, trials, max_epochs, metric, mode, ...)
    options: dict[str, Any]  # the training options every trial shares
    spaces: dict[str, Any]  # option -> search space (search_space.Space.to_dict())
    search: list[str]  # the spaces as OPTION=EXPR lines
    grid_size: int | None
    trials: list[dict[str, Any]]  # the sampled points: one {option: value} per trial, in order
    ray_address: str | None
    status: str  # Running, Done, Error, Aborted
    created: float
    finished: float
    resumed: float
    abort_requested: float
    error: str
    promoted: str  # the trial job promoted as the sweep's result
    owned_by: str | None  # the user account that started it, owner of its trials (digits_core.accounts); None: none


class JobRecordError(UnreadableRecordError):
    """``job.json`` is not a job record this version understands (the message names the file and why).

    A :class:`~digits_core.jobs.readers.UnreadableRecordError` (so a
    :class:`~digits_core.errors.JobNotFoundError`): :meth:`JobStore.list
    <digits_core.jobs.JobStore.list>` leaves such a folder out and
    :meth:`JobStore.scan <digits_core.jobs.JobStore.scan>` reports it as unreadable.
    """


def check_job_record(data: Any, path: str | Path) -> JobRecord:
    """Check the shape of a parsed ``job.json`` and bring it to :data:`SCHEMA_VERSION`.

    What every reader relies on is checked (``id``, ``kind``, a non-empty
    ``status_history`` of known statuses and times, the schema version) and
    every declared key's type (:class:`JobRecord`; ``null`` passes for an
    optional key); unknown keys are kept.

    Args:
        data: The parsed JSON.
        path: The file, for messages.

    Returns:
        ``data`` as a :class:`JobRecord` (``schema_version`` filled in).

    Raises:
        JobRecordError: The record is malformed or from a newer schema.
    """
    if not isinstance(data, dict):
        raise JobRecordError(path, "it is not a job record (a JSON object was expected)")
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise JobRecordError(path, '"schema_version" must be a positive integer')
    if version > SCHEMA_VERSION:
        raise JobRecordError(
            path,
            f"it was written by a newer DIGITS Core (job schema {version}, this version "
            f"reads up to {SCHEMA_VERSION}); upgrade digits-core to open this job",
            hint="Nothing was changed on disk.",
        )
    for key in ("id", "kind"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise JobRecordError(path, f'"{key}" is missing or not a string')
    if data["kind"] not in JOB_KINDS:
        raise JobRecordError(path, f'kind "{data["kind"][:40]}" is not one of {", ".join(JOB_KINDS)}')
    history = data.get("status_history")
    statuses = {status.value for status in JobStatus}
    if (
        not isinstance(history, list)
        or not history
        or not all(isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) for e in history)
    ):
        raise JobRecordError(path, '"status_history" must be a non-empty list of [status, time] pairs')
    for status, when in history:
        if status not in statuses:
            raise JobRecordError(path, f'"status_history" holds an unknown status (one of {", ".join(statuses)})')
        if not is_unix_time(when):
            raise JobRecordError(path, '"status_history" holds a time that is not a Unix time in seconds')
    if data.get("created") is not None and not is_unix_time(data["created"]):
        raise JobRecordError(path, '"created" is not a Unix time in seconds')
    check_record_types(data, JobRecord, path, JobRecordError)
    data["schema_version"] = SCHEMA_VERSION
    record: JobRecord = data  # type: ignore[assignment]  # checked above
    return record


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so readers see the old or the new file, never a mix."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def new_job_id(now: float | None = None) -> str:
    """Return a fresh job id, ``YYYYMMDD-HHMMSS-xxxx``."""
    stamp = datetime.fromtimestamp(now if now is not None else time.time()).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(2)}"


class JobRecordView:
    """The read side of a job: properties over its ``job.json`` record (:attr:`data`).

    :class:`~digits_core.jobs.Job` adds the folder, the writer API and ownership.
    """

    data: JobRecord

    @property
    def id(self) -> str:
        """The job id (also its folder name)."""
        return self.data["id"]

    @property
    def kind(self) -> str:
        """``"dataset"`` or ``"model"``."""
        return self.data["kind"]

    @property
    def name(self) -> str:
        """The user's name for the job."""
        return self.data.get("name", "")

    @property
    def status(self) -> JobStatus:
        """The latest status."""
        return JobStatus(self.data["status_history"][-1][0])

    @property
    def error(self) -> str | None:
        """The error message of a job that ended in Error, else ``None``."""
        return self.data.get("error")

    @property
    def created(self) -> float | None:
        """Creation time (unix seconds)."""
        return self.data.get("created")

    @property
    def status_history(self) -> list[tuple[str, float]]:
        """Every status with its unix time, oldest first."""
        return [(str(s), float(t)) for s, t in self.data["status_history"]]

    @property
    def group(self) -> str | None:
        """The job group shown on the home page (``None``: no group)."""
        return self.data.get("group") or None

    @property
    def plugin_id(self) -> str | None:
        """A dataset job's data-ingestion plugin id (``None`` for a model job)."""
        return self.data.get("plugin_id")

    @property
    def form_data(self) -> dict[str, Any]:
        """A dataset job's plugin form values (secrets redacted); a model job's options."""
        return dict(self.data.get("form_data") or {})

    @property
    def dataset_id(self) -> str | None:
        """A model job's dataset job id (from ``train_options`` for a job not started yet)."""
        return self.data.get("dataset_id") or (self.data.get("train_options") or {}).get("dataset")

    @property
    def network(self) -> str | None:
        """A model job's network name (or custom network file)."""
        return self.data.get("network") or (self.data.get("train_options") or {}).get("network")

    @property
    def train_options(self) -> dict[str, Any]:
        """A queued model job's :func:`~digits_core.engine.train` keyword arguments (empty when none)."""
        return dict(self.data.get("train_options") or {})
