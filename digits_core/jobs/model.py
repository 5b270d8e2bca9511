"""A model job's own files, written through the job store: ``model.json`` and ``metrics.jsonl``.

``model.json`` (a :class:`~digits_core.jobs.record.ModelRecord`) is written
whole once, when a run starts (:func:`write_model_record`); afterwards every
change is an intent — :func:`update_model_record`, :func:`add_snapshot`,
:func:`record_best` — that re-reads the file, changes it and rewrites it
atomically under the job folder's record lock
(:func:`~digits_core.jobs.lock.record_lock`, the lock ``job.json``'s writers
take), so a trainer recording a snapshot and another process updating the
record at the same moment lose nothing. Metric points are appended to
``metrics.jsonl`` one line per point (:func:`metric_lines` is the one
format; :func:`record_metrics` appends them with a single ``O_APPEND``
write, so concurrent writers interleave whole lines).

:class:`ModelJobFiles` gives :class:`~digits_core.jobs.Job` the same intents
as methods (``job.add_snapshot(...)``, ``job.record_metric(...)``).
The functions take a folder because a training run also writes them where no
``job.json`` exists yet (a non-chief worker's scratch folder, a bare folder
given to :func:`digits_core.engine.train`).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TrainingError
from .lock import record_lock
from .record import ModelRecord, SnapshotEntry, write_json_atomic

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

MODEL_FILE = "model.json"
METRICS_FILE = "metrics.jsonl"


def read_model_record(folder: str | os.PathLike) -> ModelRecord:
    """Parse ``model.json`` of a model job folder.

    Raises:
        TrainingError: The file does not exist (the job has not started training) or cannot be read.
    """
    path = Path(folder) / MODEL_FILE
    try:
        record: ModelRecord = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainingError(f"{path} does not exist: the model job has not started training.") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise TrainingError(f"Cannot read {path}: {exc}") from exc
    return record


def write_model_record(folder: str | os.PathLike, record: ModelRecord) -> None:
    """Write a whole ``model.json`` (the start of a run), atomically and under the record lock."""
    with record_lock(folder):
        write_json_atomic(Path(folder) / MODEL_FILE, record)


def change_model_record(folder: str | os.PathLike, change: Callable[[ModelRecord], bool | None]) -> ModelRecord:
    """Re-read ``model.json``, apply ``change`` and rewrite it, under the record lock.

    ``change`` returns False when it changed nothing (then nothing is written).
    Returns the record as it now is on disk.

    Raises:
        TrainingError: There is no readable ``model.json``.
    """
    with record_lock(folder):
        record = read_model_record(folder)
        if change(record) is not False:
            write_json_atomic(Path(folder) / MODEL_FILE, record)
    return record


def update_model_record(folder: str | os.PathLike, **fields: Unpack[ModelRecord]) -> ModelRecord:
    """Set these ``model.json`` keys (declared in :class:`~digits_core.jobs.record.ModelRecord`); others are kept."""
    return change_model_record(folder, lambda record: record.update(fields))


def add_snapshot(folder: str | os.PathLike, epoch: float, step: int, file: str, state: str) -> ModelRecord:
    """List a snapshot written under ``snapshots/`` (replacing one of the same file) and make it the last epoch."""
    entry: SnapshotEntry = {"epoch": round(float(epoch), 4), "step": int(step), "file": file, "state": state}

    def append(record: ModelRecord) -> None:
        record["snapshots"] = [s for s in record.get("snapshots", []) if s["file"] != file] + [entry]
        record["last_epoch"] = entry["epoch"]

    return change_model_record(folder, append)


def record_best(
    folder: str | os.PathLike, epoch: float, value: float, name: str, better: Callable[[float, float], bool]
) -> bool:
    """Make ``value`` of validation metric ``name`` at ``epoch`` the best one if it beats the recorded best.

    Returns True when it did.
    """
    improved = False

    def compare(record: ModelRecord) -> bool:
        nonlocal improved
        best = record.get("best_metric")
        if best is not None and not better(value, best):
            return False
        record["best_epoch"], record["best_metric"], record["best_metric_name"] = round(epoch, 4), value, name
        improved = True
        return True

    change_model_record(folder, compare)
    return improved


def metric_lines(epoch: float, step: int, values: dict[str, float], now: float | None = None) -> str:
    """The ``metrics.jsonl`` lines of one logged point: one object per name (non-finite values as ``null``)."""
    stamp = round(time.time() if now is None else now, 3)  # wall time: the model page can plot against it
    lines = []
    for name, value in values.items():
        number = float(value)
        lines.append(
            json.dumps(
                {
                    "epoch": round(float(epoch), 6),
                    "step": int(step),
                    "name": name,
                    "value": number if math.isfinite(number) else None,
                    "time": stamp,
                }
            )
            + "\n"
        )
    return "".join(lines)


def record_metrics(folder: str | os.PathLike, epoch: float, step: int, values: dict[str, float]) -> None:
    """Append one point per name to ``metrics.jsonl`` in one ``O_APPEND`` write (whole lines, any writer)."""
    data = metric_lines(epoch, step, values).encode("utf-8")
    fd = os.open(
        Path(folder) / METRICS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644
    )
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class ModelJobFiles:
    """The model-file intents as :class:`~digits_core.jobs.Job` methods (``path`` is the job folder)."""

    path: Path

    def model_record(self) -> ModelRecord:
        """The job's ``model.json`` (raises :class:`~digits_core.errors.TrainingError` before training started)."""
        return read_model_record(self.path)

    def update_model(self, **fields: Unpack[ModelRecord]) -> ModelRecord:
        """Set ``model.json`` keys; see :func:`update_model_record`."""
        return update_model_record(self.path, **fields)

    def add_snapshot(self, epoch: float, step: int, file: str, state: str) -> ModelRecord:
        """List a snapshot in ``model.json``; see :func:`add_snapshot`."""
        return add_snapshot(self.path, epoch, step, file, state)

    def record_metric(self, epoch: float, step: int, values: dict[str, Any]) -> None:
        """Append metric points to ``metrics.jsonl``; see :func:`record_metrics`."""
        record_metrics(self.path, epoch, step, values)
