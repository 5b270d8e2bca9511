"""Live progress of a dataset job: ``<job>/progress.json`` and the API callback."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

#: Minimum seconds between two writes of progress.json (the last update is always written).
WRITE_INTERVAL_S = 0.5


def _write_json_fast(path: Path, data: dict) -> None:
    """Replace ``path`` atomically (temp file + rename) without fsync: progress is advisory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


class ProgressReporter:
    """Counts records per stage and reports them.

    Every update calls ``callback(snapshot)`` (if given) and, at most every
    :data:`WRITE_INTERVAL_S` seconds, rewrites ``progress.json`` atomically
    so the web UI can poll it.

    The snapshot (also the content of ``progress.json``)::

        {"status": "Running", "stage": "train", "done": 1200, "total": 20000,
         "errors": 3, "rate": 15000.0, "eta_s": 1.25, "elapsed_s": 0.08,
         "stages": {"train": {"done": 1200, "total": 15000, "errors": 3}, ...},
         "updated": 1764680000.0}

    ``done``/``total`` count entries over all stages; ``rate`` is entries
    per second since encoding started.

    Args:
        path: The ``progress.json`` file.
        totals: Entries per stage.
        callback: Called with each snapshot.
    """

    def __init__(self, path: str | Path, totals: dict[str, int], callback: Callable[[dict], None] | None = None):
        self.path = Path(path)
        self.callback = callback
        self.stages = {s: {"done": 0, "total": int(n), "errors": 0} for s, n in totals.items()}
        self.total = sum(totals.values())
        self.stage: str | None = None
        self.status = "Running"
        self.started = time.perf_counter()
        self._last_write = 0.0

    @property
    def done(self) -> int:
        """Entries processed (written or skipped) so far."""
        return sum(s["done"] for s in self.stages.values())

    @property
    def errors(self) -> int:
        """Entries skipped so far."""
        return sum(s["errors"] for s in self.stages.values())

    def snapshot(self) -> dict:
        """Return the current numbers as a JSON-friendly dict."""
        elapsed = time.perf_counter() - self.started
        done = self.done
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else None
        return {
            "status": self.status,
            "stage": self.stage,
            "done": done,
            "total": self.total,
            "errors": self.errors,
            "rate": round(rate, 1),
            "eta_s": None if eta is None else round(eta, 2),
            "elapsed_s": round(elapsed, 3),
            "stages": {k: dict(v) for k, v in self.stages.items()},
            "updated": time.time(),
        }

    def update(self, stage: str, done: int = 0, errors: int = 0, *, force: bool = False) -> None:
        """Add ``done`` processed entries (``errors`` of them skipped) to ``stage`` and report."""
        self.stage = stage
        if stage in self.stages:
            self.stages[stage]["done"] += done
            self.stages[stage]["errors"] += errors
        snap = self.snapshot()
        now = time.monotonic()
        if force or now - self._last_write >= WRITE_INTERVAL_S:
            self._last_write = now
            try:
                _write_json_fast(self.path, snap)
            except OSError:
                pass  # progress is advisory; the job goes on
        if self.callback is not None:
            self.callback(snap)

    def finish(self, status: str) -> None:
        """Record the final status and write progress.json."""
        self.status = status
        self.update(self.stage or "", force=True)
