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
write under the record lock, so concurrent writers interleave whole lines),
and only this module writes that file: :func:`start_metrics` creates it when
a run starts and, on a resume, rewrites it without the points logged after
the snapshot resumed from (:func:`drop_metric_points_after`), under the same
lock.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TrainingError
from .checks import check_record_types
from .lock import record_lock
from .readers import UnreadableRecordError, max_metric_line_bytes, parse_json_line, read_json_object
from .record import ModelRecord, SnapshotEntry, write_json_atomic

if TYPE_CHECKING:
    from typing import Unpack  # Python 3.11; annotations are not evaluated at run time

MODEL_FILE = "model.json"
METRICS_FILE = "metrics.jsonl"


class UnreadableModelRecordError(UnreadableRecordError, TrainingError):
    """``model.json`` cannot be read as a model record (the message names the file and why).

    Both an :class:`~digits_core.jobs.readers.UnreadableRecordError` (pages
    show what is wrong) and a :class:`~digits_core.errors.TrainingError`
    (what callers of :func:`read_model_record` already handle).
    """


def read_model_record(folder: str | os.PathLike) -> ModelRecord:
    """Parse ``model.json`` of a model job folder, as possibly hostile input (:mod:`digits_core.jobs.readers`).

    Raises:
        TrainingError: The file does not exist (the job has not started training).
        UnreadableModelRecordError: The file cannot be read, or a declared key has the wrong type
            (a :class:`~digits_core.errors.TrainingError` too).
    """
    path = Path(folder) / MODEL_FILE
    try:
        data = read_json_object(path)
    except FileNotFoundError:
        raise TrainingError(f"{path} does not exist: the model job has not started training.") from None
    except UnreadableRecordError as exc:
        raise UnreadableModelRecordError(exc.file, exc.reason) from None
    check_record_types(data, ModelRecord, path, UnreadableModelRecordError)
    record: ModelRecord = data  # type: ignore[assignment]  # checked above
    return record


def model_record_problem(folder: str | os.PathLike) -> UnreadableRecordError | None:
    """What is wrong with the folder's ``model.json``, or ``None`` (also when there is none yet)."""
    try:
        read_model_record(folder)
    except UnreadableRecordError as exc:
        return exc
    except TrainingError:
        return None
    return None


@dataclass
class MetricPoints:
    """The points of a ``metrics.jsonl`` (:func:`read_metric_points`).

    Attributes:
        points: One object per readable line, in file order.
        skipped: Lines that were not a JSON object (undecodable, malformed, oversized, non-finite, nested).
    """

    points: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0


def read_metric_points(folder: str | os.PathLike) -> MetricPoints:
    """Every point of the folder's ``metrics.jsonl``; a bad line is skipped and counted, never fatal.

    A missing file gives no points. A partly written last line (a run being
    written or killed) counts as skipped too. Lines are read one at a time
    (each at most :func:`~digits_core.jobs.readers.max_metric_line_bytes`).
    """
    result = MetricPoints()
    limit = max_metric_line_bytes()
    try:
        handle = open(Path(folder) / METRICS_FILE, "rb")
    except FileNotFoundError:
        return result
    except OSError:
        result.skipped = 1
        return result
    with handle:
        while True:
            line = handle.readline(limit + 1)
            if not line:
                break
            if len(line) > limit and not line.endswith(b"\n"):
                result.skipped += 1
                while line and not line.endswith(b"\n"):  # the rest of the oversized line
                    line = handle.readline(limit + 1)
                continue
            if not line.strip():
                continue
            point = parse_metric_point(line)
            if point is None:
                result.skipped += 1
            else:
                result.points.append(point)
    return result


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_metric_point(line: bytes | str) -> dict[str, Any] | None:
    """One ``metrics.jsonl`` line as a point, or ``None`` when it is not one (readers skip and count it).

    A point is a JSON object with a text ``name``, a number or ``null`` ``value``, a number ``epoch``
    and, when present, numbers for ``step`` and ``time`` (as :func:`metric_lines` writes them; see
    :func:`~digits_core.jobs.readers.parse_json_line` for what a line may not be).
    """
    point = parse_json_line(line)
    if point is None or not isinstance(point.get("name"), str) or "value" not in point:
        return None
    if not (point["value"] is None or _number(point["value"])) or not _number(point.get("epoch")):
        return None
    if any(key in point and not _number(point[key]) for key in ("epoch", "step", "time")):
        return None
    return point


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

    Returns True when it did. A value that is not a finite number (a detector's mAP before it finds
    any box is NaN) is never the best: it would beat nothing afterwards, and JSON has no NaN.
    """
    try:
        if not math.isfinite(float(value)):
            return False
    except (TypeError, ValueError):
        return False
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


_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def record_metrics(folder: str | os.PathLike, epoch: float, step: int, values: dict[str, float]) -> None:
    """Append one point per name to ``metrics.jsonl`` in one ``O_APPEND`` write, under the record lock.

    Raises:
        OSError: The write failed (a full disk: the caller names it, :func:`digits_core.faults.disk_error_message`).
    """
    data = metric_lines(epoch, step, values).encode("utf-8")
    with record_lock(folder):
        fd = os.open(Path(folder) / METRICS_FILE, _APPEND_FLAGS, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def drop_metric_points_after(folder: str | os.PathLike, step: int) -> None:
    """Rewrite ``metrics.jsonl`` atomically, under the record lock, without the points after ``step``.

    Partly written and damaged lines go too (:func:`parse_metric_point`: the half-written last line of a killed
    run, or a line that is not a metric point). Nothing happens when the file does not exist.
    """
    path = Path(folder) / METRICS_FILE
    with record_lock(folder):
        if not path.is_file():
            return
        kept = []
        for line in path.read_bytes().splitlines():
            point = parse_metric_point(line)
            if point is not None and int(point.get("step", 0)) <= step:
                kept.append(line + b"\n")
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(b"".join(kept))
        os.replace(tmp, path)


def start_metrics(folder: str | os.PathLike, resume_step: int | None = None) -> None:
    """Start a run's ``metrics.jsonl``: create it (empty) if missing; on a resume, drop the points after the step
    of the snapshot resumed from (:func:`drop_metric_points_after`), so the curves go on without duplicates."""
    if resume_step is not None:
        drop_metric_points_after(folder, int(resume_step))
    with record_lock(folder):
        os.close(os.open(Path(folder) / METRICS_FILE, _APPEND_FLAGS, 0o644))


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
