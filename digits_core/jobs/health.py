"""Whether a readable job's other records read: ``model.json`` of a model job, ``dataset.json`` of a dataset job.

Listings call :func:`record_problem` for every job they show, so a job whose
``job.json`` reads but whose ``model.json`` is damaged is marked unreadable
(with the file and the reason) instead of breaking the page that opens it.
The answer is remembered per file size and modification time, so a listing
reads each record once until it changes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .checks import check_record_types
from .model import MODEL_FILE, model_record_problem
from .readers import UnreadableRecordError, read_json_object
from .record import DatasetRecord

#: Where a dataset job keeps its published ``dataset.json`` (the second: older layouts).
DATASET_FILES = ("dataset/dataset.json", "dataset.json")

_cache: dict[str, tuple[tuple[int, int], UnreadableRecordError | None]] = {}
_cache_lock = threading.Lock()
_CACHE_SIZE = 4096


def dataset_record_problem(folder: str | os.PathLike) -> UnreadableRecordError | None:
    """What is wrong with the folder's published ``dataset.json``, or ``None`` (also when there is none)."""
    for name in DATASET_FILES:
        path = Path(folder) / name
        try:
            data = read_json_object(path)
            check_record_types(data, DatasetRecord, path, UnreadableRecordError)
        except FileNotFoundError:
            continue
        except UnreadableRecordError as exc:
            return exc
        missing = [key for key, ok in _dataset_essentials(data).items() if not ok]
        return UnreadableRecordError(path, f"it lacks {', '.join(missing)}") if missing else None
    return None


def _dataset_essentials(data: dict) -> dict[str, bool]:
    """What every reader of a published dataset relies on (both writers, 2-D and volume, write them)."""
    feature, label = data.get("feature"), data.get("label")
    return {
        "feature.shape": isinstance(feature, dict) and isinstance(feature.get("shape"), list),
        "feature.dtype": isinstance(feature, dict) and isinstance(feature.get("dtype"), str),
        "label.kind": isinstance(label, dict) and isinstance(label.get("kind"), str),
        "label.dtype": isinstance(label, dict) and isinstance(label.get("dtype"), str),
        "label.shape": isinstance(label, dict) and isinstance(label.get("shape"), list),
        "stages": isinstance(data.get("stages"), dict),
    }


def record_problem(folder: str | os.PathLike, kind: str) -> UnreadableRecordError | None:
    """What is wrong with the kind's own record in a job folder (``model.json`` or ``dataset.json``), else ``None``.

    Args:
        folder: The job folder.
        kind: The job's kind, ``"model"`` or ``"dataset"``.
    """
    path = Path(folder) / (MODEL_FILE if kind == "model" else DATASET_FILES[0])
    if kind == "dataset" and not path.exists():
        path = Path(folder) / DATASET_FILES[1]
    try:
        stat = path.stat()
    except OSError:
        return None  # not written yet (or gone): nothing to report
    key, stamp = str(path), (stat.st_mtime_ns, stat.st_size)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    problem = model_record_problem(folder) if kind == "model" else dataset_record_problem(folder)
    with _cache_lock:
        if len(_cache) >= _CACHE_SIZE:
            _cache.clear()
        _cache[key] = (stamp, problem)
    return problem


__all__ = ["DATASET_FILES", "dataset_record_problem", "record_problem"]
