"""The audit log: append-only JSON lines in the jobs folder (``audit.jsonl``), rotated by size.

One line per decision or account event: ``time`` (unix), ``user``, ``action``,
``object`` (a job id, a user name or ``null``), ``endpoint``, ``address``
and ``allowed``. It never holds a password or a token: callers pass names
and ids only. When the file passes :data:`MAX_BYTES` it is renamed
``audit.jsonl.1`` (older ones shift up to :data:`KEEP` files) and a new one starts.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

#: The file in the jobs folder.
FILENAME = "audit.jsonl"
#: Size at which the log is rotated, in bytes.
MAX_BYTES = 10 * 1024 * 1024
#: Rotated files kept (``audit.jsonl.1`` newest .. ``audit.jsonl.KEEP`` oldest).
KEEP = 5

_lock = threading.Lock()


class AuditLog:
    """The audit log of one jobs folder.

    Args:
        jobs_dir: The jobs folder.
        max_bytes: Rotation size (tests pass a small one).
    """

    def __init__(self, jobs_dir: str | os.PathLike, max_bytes: int = MAX_BYTES):
        self.path = Path(jobs_dir) / FILENAME
        self.max_bytes = max_bytes

    def record(
        self,
        user: str | None,
        action: str,
        obj: str | None,
        *,
        allowed: bool,
        address: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        """Append one line (and rotate first when the file is full)."""
        entry: dict[str, Any] = {
            "time": round(time.time(), 3),
            "user": user,
            "action": action,
            "object": obj,
            "endpoint": endpoint,
            "address": address,
            "allowed": bool(allowed),
        }
        line = json.dumps(entry, sort_keys=True) + "\n"
        with _lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size + len(line) > self.max_bytes:
                self._rotate()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
            finally:
                os.close(fd)

    def _rotate(self) -> None:
        for n in range(KEEP - 1, 0, -1):
            older = self.path.with_name(f"{FILENAME}.{n}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{FILENAME}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{FILENAME}.1"))

    def tail(self, limit: int = 200) -> list[dict[str, Any]]:
        """The last ``limit`` entries of the current file, newest first (unreadable lines skipped)."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()[-limit:]
        out = []
        for text in reversed(lines):
            try:
                item = json.loads(text)
            except ValueError:
                continue
            if isinstance(item, dict):
                out.append(item)
        return out
