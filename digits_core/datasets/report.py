"""The errors report of a dataset job: ``<job>/errors.jsonl``, one skipped entry per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from ..errors import DatasetError


class ErrorsReport:
    """Records skipped entries and enforces the job's error budget.

    Each line of the file is ``{"stage": ..., "entry": str(entry), "error": message}``.
    The file is created on the first error only.

    Args:
        path: The ``errors.jsonl`` file.
        allowed: How many entries may be skipped.
        total: All entries of the job (for the message).
    """

    def __init__(self, path: str | Path, allowed: int, total: int):
        self.path = Path(path)
        self.allowed = allowed
        self.total = total
        self.count = 0
        self._first: list[str] = []
        self._file: IO[str] | None = None

    def record(self, stage: str, entry, error: str) -> None:
        """Add one skipped entry."""
        self.count += 1
        if len(self._first) < 5:
            self._first.append(f"{entry}: {error}")
        if self._file is None:
            self._file = open(self.path, "w", encoding="utf-8")
        self._file.write(json.dumps({"stage": stage, "entry": str(entry), "error": error}) + "\n")

    @property
    def first(self) -> str:
        """The first error as ``entry: message`` (``"none"`` if there is none)."""
        return self._first[0] if self._first else "none"

    def check_budget(self) -> None:
        """Raise :class:`DatasetError` once more entries failed than ``allowed``."""
        if self.count > self.allowed:
            raise DatasetError(
                f"{self.count} entries failed, more than max-errors allows ({self.allowed} of {self.total}); "
                f"no dataset was published. See {self.path}; first error: {self.first}"
            )

    def close(self) -> None:
        """Close the file (safe to call twice)."""
        if self._file is not None:
            self._file.close()
            self._file = None
