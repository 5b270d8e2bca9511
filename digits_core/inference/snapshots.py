"""A model job's ``model.json`` and snapshots: which file serves which epoch.

Epochs are numbers (``1.5`` names a mid-epoch snapshot); the last snapshot
serves when no epoch is given, as in DIGITS. No TensorFlow here.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import InferenceError, JobNotFoundError
from ..jobs import JOB_FILE, Job, JobStore
from ..jobs.record import ModelRecord

MODEL_FILE = "model.json"
SNAPSHOT_DIR = "snapshots"
SNAPSHOT_PATTERN = re.compile(r"^epoch-(\d+(?:\.\d+)?)\.keras$")


def find_model_job(model_id: str | os.PathLike, jobs_dir: str | os.PathLike | None = None) -> Job:
    """Return the model :class:`~digits_core.Job` for an id, unique id prefix or job folder.

    Raises:
        JobNotFoundError: No such model job.
    """
    text = str(model_id)
    candidate = Path(text).expanduser()
    if ("/" in text or os.sep in text) and (candidate / JOB_FILE).is_file():
        job = Job.load(candidate)
        if job.kind != "model":
            raise JobNotFoundError(f"{candidate} is a {job.kind} job, not a model job.")
        return job
    try:
        return JobStore(jobs_dir).get(text, kind="model")
    except JobNotFoundError as exc:
        raise JobNotFoundError(f"{exc} Run `digits model list` to see the models.") from exc


def read_model_info(job: Any) -> ModelRecord:
    """Return the parsed ``model.json`` of a model job.

    Raises:
        InferenceError: It is missing or unreadable (the job never started training).
    """
    path = Path(job.path) / MODEL_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InferenceError(
            f'Model job "{job.id}" has no {MODEL_FILE}: it has not trained yet (status {job.status.value}).'
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InferenceError(f"Cannot read {path}: {exc}") from exc


def _epoch_number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def list_snapshots(job: Any, info: Mapping[str, Any] | None = None) -> dict[int | float, Path]:
    """Return ``{epoch: snapshot file}`` of a model job (fractional epochs as floats).

    The engine lists snapshots in ``model.json["snapshots"]`` (``{"epoch", "file"}``);
    without that list, the ``snapshots/epoch-NNN.keras`` files are used.
    """
    folder = Path(job.path) / SNAPSHOT_DIR
    found = {}
    listed = (info or {}).get("snapshots")
    if listed:
        for snap in listed:
            path = folder / snap["file"]
            if path.is_file():
                found[_epoch_number(str(snap["epoch"]))] = path
    elif folder.is_dir():
        for child in folder.iterdir():
            match = SNAPSHOT_PATTERN.match(child.name)
            if match:
                found[_epoch_number(match.group(1))] = child
    return dict(sorted(found.items()))


def snapshot_problem(path: str | os.PathLike) -> str | None:
    """Why a snapshot file cannot serve, in a sentence naming its file (``None`` when it looks whole).

    A ``.keras`` snapshot is a zip archive: one cut short (a copy interrupted,
    a full disk outside the engine's atomic writes) has no central directory
    or lacks the model's config or weights. Reads the archive's directory
    only, never the weights.
    """
    path = Path(path)
    if path.suffix != ".keras":
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            size = path.stat().st_size
            ends = [info.header_offset + info.compress_size for info in archive.infolist()]
    except (OSError, zipfile.BadZipFile, ValueError):
        names, size, ends = set(), 0, [1]
    if "config.json" not in names or not any(n.endswith(".weights.h5") for n in names) or max(ends) > size:
        return (
            f"the snapshot file {path.name} is incomplete or damaged (a truncated Keras archive); "
            "train or resume the model to write it again, or delete the model"
        )
    return None


def resolve_epoch(
    job: Any, epoch: int | float | None, info: Mapping[str, Any] | None = None
) -> tuple[int | float, Path]:
    """Pick the snapshot: ``epoch`` when given, else the last one (as DIGITS did).

    Raises:
        InferenceError: No snapshot, or none for that epoch (the message lists those there are).
    """
    snapshots = list_snapshots(job, info)
    if not snapshots:
        raise InferenceError(
            f'Model job "{job.id}" has no snapshot yet (status {job.status.value}); wait for the first epoch to finish.'
        )
    if epoch is None:
        epoch = max(snapshots)
    try:
        epoch = _epoch_number(str(epoch))
        return epoch, snapshots[epoch]
    except (KeyError, ValueError):
        raise InferenceError(
            f'Model job "{job.id}" has no snapshot for epoch {epoch} '
            f"(snapshots: {', '.join(str(e) for e in snapshots)})."
        ) from None
