"""Model job files: ``model.json``, ``metrics.jsonl``, TensorBoard events, snapshots.

Layout of a model job folder::

    job.json                 kind "model", status history (digits_core.jobs)
    model.json               network, options, dataset, task, shapes, labels, preprocessing,
                             snapshots, best/last epoch, fine-tune report
    mean.npy                 the dataset mean used for mean subtraction (float32 H×W×C)
    network.py               copy of a custom network file (so snapshots reload anywhere)
    metrics.jsonl            one {"epoch", "step", "name", "value", "time"} object per line, streamed
    tb/                      TensorBoard event files (same scalars)
    snapshots/epoch-NNN.keras        full Keras models (load with load_snapshot)
    snapshots/epoch-NNN.state.npz    optimizer state + position, for resume
    abort                    present while an abort was requested (request_abort)

No TensorFlow at import time.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..errors import JobNotFoundError, TrainingError
from ..faults import disk_error_message
from ..jobs import Job, JobStore
from ..jobs.model import (
    MODEL_FILE,
    read_metric_points,
    read_model_record,
    record_metrics,
    start_metrics,
)
from ..jobs.record import ModelRecord

SNAPSHOT_DIR = "snapshots"
TB_DIR = "tb"
ABORT_FILE = "abort"
#: Written by a tuning scheduler that pruned the trial: JSON {"rung", "reason"} (digits_core.sweeps.tune).
PRUNE_FILE = "prune"
NETWORK_COPY = "network.py"


def model_folder(job: Any, jobs_dir=None) -> Path:
    """The folder of a model job given as a :class:`Job`, a folder path or a job id."""
    if isinstance(job, Job):
        return job.path
    path = Path(str(job)).expanduser()
    if (path / MODEL_FILE).is_file() or (path / "job.json").is_file():
        return path
    return JobStore(jobs_dir).get(str(job), kind="model").path


def load_model_job(job: Any, jobs_dir=None) -> Job:
    """Return the model :class:`Job` for a Job, folder or id."""
    if isinstance(job, Job):
        return job
    folder = model_folder(job, jobs_dir)
    loaded = Job.load(folder)
    if loaded.kind != "model":
        raise JobNotFoundError(f'Job "{loaded.id}" is a {loaded.kind} job, not a model job.')
    return loaded


def read_prune(folder: str | os.PathLike) -> dict:
    """The pruning record a tuning scheduler wrote (:data:`PRUNE_FILE`; empty when there is none or it is unreadable)."""
    try:
        return dict(json.loads((Path(folder) / PRUNE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return {}


def read_model_info(folder: str | os.PathLike) -> ModelRecord:
    """Parse ``model.json`` of a model job folder (:func:`digits_core.jobs.model.read_model_record`)."""
    return read_model_record(folder)


def read_metrics(job: Any, jobs_dir=None) -> list[dict]:
    """All points of ``metrics.jsonl``; a bad or partly written line is skipped (:func:`read_metric_points`)."""
    return read_metric_points(model_folder(job, jobs_dir)).points


def epoch_tag(epoch: float) -> str:
    """Snapshot name part for an epoch: ``007`` for 7, ``000.5`` for 0.5."""
    epoch = round(float(epoch), 4)
    whole = int(math.floor(epoch))
    frac = round(epoch - whole, 4)
    if frac == 0:
        return f"{whole:03d}"
    return f"{whole:03d}" + f"{frac:.4f}".rstrip("0")[1:]


class MetricsWriter:
    """Streams metric points to ``metrics.jsonl`` through the job store and to TensorBoard.

    The file is written only by :mod:`digits_core.jobs.model` (:func:`~digits_core.jobs.model.record_metrics`
    appends each point, :func:`~digits_core.jobs.model.start_metrics` starts the file), under the record lock.

    Args:
        folder: The model job folder.
        tensorboard: Also write TensorBoard scalars under ``tb/``.
        enabled: False on non-chief workers (writes nothing).
        resume_step: On resume, the step of the snapshot resumed from: points
            logged after it (by the run that was interrupted) are dropped, so
            the resumed run continues the curves without duplicate points.
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        *,
        tensorboard: bool = True,
        enabled: bool = True,
        resume_step: int | None = None,
    ):
        self.enabled = enabled
        self._folder: Path | None = None
        self._tb = None
        if not enabled:
            return
        start_metrics(folder, resume_step)
        self._folder = Path(folder)
        if tensorboard:
            import tensorflow as tf
            from tensorflow.core.framework import summary_pb2

            self._tb = tf.summary.create_file_writer(str(Path(folder) / TB_DIR))
            # TensorBoard's scalar plugin format, written with core TF (no tensorboard package needed)
            self._scalar_metadata = summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
            )

    def write(self, epoch: float, step: int, values: dict[str, float]) -> None:
        """Write one point per name."""
        folder = self._folder
        if not self.enabled or folder is None:
            return
        try:
            record_metrics(folder, epoch, step, values)
        except OSError as exc:
            message = disk_error_message(exc, folder.parent)
            if message is None:
                raise
            raise TrainingError(message) from exc
        if self._tb is not None:
            import tensorflow as tf

            with self._tb.as_default():
                for name, value in values.items():
                    if math.isfinite(float(value)):
                        tf.summary.write(
                            name, tf.constant(float(value), tf.float32), step=int(step), metadata=self._scalar_metadata
                        )

    def close(self) -> None:
        self._folder = None
        if self._tb is not None:
            self._tb.flush()
            self._tb.close()
            self._tb = None
