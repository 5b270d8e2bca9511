"""Small formatting and data helpers shared by the web pages."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from flask import Response, jsonify, request

from ..errors import FormValidationError
from ..jobs import Job, JobStatus
from ..jobs.readers import UnreadableRecordError, parse_json_line, read_json_record

STATUS_CLASSES = {
    "Initialized": "muted",
    "Waiting": "muted",
    "Running": "info",
    "Done": "ok",
    "Error": "bad",
    "Aborted": "warn",
    "Stopped early": "warn",
}


def wants_json() -> bool:
    """True when the client asked for JSON (``/api/`` or ``.json`` URL, or an Accept header)."""
    path = request.path
    if path.startswith("/api/") or path.endswith(".json"):
        return True
    best = request.accept_mimetypes.best_match(["application/json", "text/html"])
    return best == "application/json" and request.accept_mimetypes[best] > request.accept_mimetypes["text/html"]


def json_body() -> dict:
    """The request's JSON object body.

    Raises:
        FormValidationError: The body is not a JSON object.
    """
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise FormValidationError({"body": ["send a JSON object (Content-Type: application/json)"]}, "request")
    return data


def invalid_json(exc: FormValidationError) -> tuple[Response, int]:
    """The JSON answer to a bad form or request value: 400 with the message and the failing fields."""
    return jsonify({"error": {"code": 400, "title": "Invalid value", "message": str(exc), "fields": exc.errors}}), 400


def status_class(status: JobStatus | str) -> str:
    """CSS class for a status badge."""
    return STATUS_CLASSES.get(getattr(status, "value", status), "muted")


def format_time(ts: float | str | None) -> str:
    """``2026-12-02 12:30`` from a UNIX time."""
    if not ts:
        return ""
    return datetime.fromtimestamp(float(ts)).strftime("%Y-%m-%d %H:%M")


def format_size(num: float | None) -> str:
    """Human-readable byte count."""
    if num is None:
        return ""
    num = float(num)
    for unit in ("B", "KB", "MB", "GB"):
        if num < 1024 or unit == "GB":
            return f"{num:.0f} {unit}" if unit == "B" else f"{num:.1f} {unit}"
        num /= 1024
    return f"{num:.1f} TB"


def format_duration(seconds: float | None) -> str:
    """``1h 02m 03s`` style duration."""
    if seconds is None:
        return ""
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else (f"{m}m {s:02d}s" if m else f"{s}s")


def folder_size(path: Path) -> int:
    """Total size of the files under ``path`` (LMDB files count their real size)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(dirpath, name))
                total += min(st.st_size, st.st_blocks * 512) if hasattr(st, "st_blocks") else st.st_size
            except OSError:
                pass
    return total


def read_json(path: Path, default: Any = None) -> Any:
    """Parse a JSON file, or return ``default`` if it is missing, half-written or unreadable.

    Read as the job store reads its records (:func:`digits_core.jobs.readers.read_json_record`:
    bounded size and nesting, strict UTF-8, finite numbers).
    """
    try:
        return read_json_record(path)
    except (OSError, UnreadableRecordError):
        return default


def read_progress(job: Job) -> dict | None:
    """The job's ``progress.json`` (datasets) or ``None``."""
    return read_json(job.path / "progress.json")


def overall_progress(job: Job) -> float | None:
    """A 0..1 progress figure for the jobs tables, or ``None`` when unknown (or its files make no sense)."""
    if job.status is JobStatus.DONE:
        return 1.0
    try:
        return _progress_from_files(job)
    except (TypeError, ValueError, AttributeError, ZeroDivisionError, OverflowError):
        return None  # progress.json / model.json are read, not trusted: a damaged one only hides the bar


def _progress_from_files(job: Job) -> float | None:
    progress = read_progress(job)
    if isinstance(progress, dict):
        for key in ("fraction", "progress", "overall"):
            value = progress.get(key)
            if isinstance(value, (int, float)):
                return float(value) if value <= 1 else float(value) / 100.0
        done = total = 0
        stages = progress.get("stages")
        if isinstance(stages, dict):
            for stage in stages.values():
                if isinstance(stage, dict):
                    done += stage.get("done", stage.get("processed", 0)) or 0
                    total += stage.get("total", 0) or 0
            if total:
                return done / total
        epoch, epochs = progress.get("epoch"), progress.get("epochs")
        if isinstance(epoch, (int, float)) and epochs:
            return min(1.0, float(epoch) / float(epochs))
    if job.kind == "model":
        model = read_json(job.path / "model.json", {}) or {}
        epochs = (model.get("options") or {}).get("epochs") or job.train_options.get("epochs")
        last = last_metric_epoch(job)
        if epochs and last is not None:
            return min(1.0, last / float(epochs))
    return None


def last_metric_epoch(job: Job) -> float | None:
    """The highest epoch in ``metrics.jsonl`` (read from the end; lines that are not points are passed over)."""
    path = job.path / "metrics.jsonl"
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 4096))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        point = parse_json_line(line)
        epoch = point.get("epoch") if point else None
        if isinstance(epoch, (int, float)) and not isinstance(epoch, bool):
            return float(epoch)
    return None


def job_summary(job: Job, with_size: bool = True) -> dict:
    """One row of the home page tables."""
    status = job.status
    history = job.status_history
    started = next((t for s, t in history if s == "Running"), None)
    ended = history[-1][1] if status.is_finished else None
    row = {
        "id": job.id,
        "kind": job.kind,
        "name": job.name,
        "status": status.value,
        "created": job.created,
        "progress": overall_progress(job),
        "plugin_id": job.plugin_id,
        "group": job.group,
        "error": job.error,
        "runtime": (ended or time.time()) - started if started else None,
    }
    if with_size:
        row["size"] = folder_size(job.path)
    return row


def format_shape(shape: Sequence[int | None] | None) -> str:
    """A shape as pages show it, ``32 × 32 × 1``; a free dimension (``None``) reads "any" (``any × 5``)."""
    return " × ".join("any" if dim is None else str(dim) for dim in (shape or []))


def new_dataset_menu() -> list[tuple[str, list[tuple[str, str]]]]:
    """``[(category, [(plugin_id, title), ...]), ...]`` of the loaded data plugins.

    In a category, the general-purpose family comes first: the plugins of the distribution that
    brings most of the category's plugins (the bundled image plugins among "Images"), then the
    specialised ones (a PACS source, one public data set), each part by title.
    """
    from ..plugins.registry import registry

    distribution = {r.id: r.distribution for r in registry.records() if r.kind == "data"}
    groups: dict[str, list[tuple[str, str]]] = {}
    for plugin_id, cls in sorted(registry.data_ingestions().items()):
        try:
            category, title = cls.get_category() or "Other", cls.get_title()
        except Exception:  # noqa: BLE001 - a plugin bug must not break the menu
            continue
        groups.setdefault(category, []).append((plugin_id, title))
    for items in groups.values():
        family = Counter(distribution.get(plugin_id) for plugin_id, _ in items)
        items.sort(key=lambda item: (-family[distribution.get(item[0])], item[1].lower()))
    return sorted(groups.items())


def worker_log_tail(job: Job, lines: int = 40) -> str | None:
    """The end of the job's ``worker.log`` (shown when a job failed), or ``None``."""
    path = job.path / "worker.log"
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 16384))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return "\n".join(text.splitlines()[-lines:]) or None
