"""The knobs of a dataset job: error budget, worker count, chunk size."""

from __future__ import annotations

import math
import os
from typing import Any

from ..errors import DatasetError

#: Default ``max_errors``: the fraction of entries that may be skipped.
DEFAULT_MAX_ERRORS = 0.05
#: Largest chunk of entries sent to a worker at once.
MAX_CHUNK = 512


def parse_max_errors(value: Any) -> float | int:
    """Normalise a ``max_errors`` setting.

    Accepts ``None`` (default 5 %), an int >= 0 or a string of one (a count
    of entries), a float in ``[0, 1)`` or a string like ``"0.1"`` /
    ``"10%"`` (a fraction of all entries).

    Raises:
        DatasetError: The value is none of these.
    """
    if value is None:
        return DEFAULT_MAX_ERRORS
    original = value
    try:
        if isinstance(value, str):
            text = value.strip()
            if text.endswith("%"):
                value = float(text[:-1]) / 100.0
            elif text.isdigit():
                value = int(text)
            else:
                value = float(text)
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            if value < 0:
                raise ValueError
            return value
        value = float(value)
        if value.is_integer() and value >= 1:
            return int(value)
        if not 0 <= value < 1:
            raise ValueError
        return value
    except ValueError:
        raise DatasetError(f'max_errors "{original}" is not a count (e.g. 10), a fraction (e.g. 0.05) '
                           "or a percentage (e.g. 5%).") from None


def allowed_errors(max_errors: float | int, total: int) -> int:
    """Return how many of ``total`` entries may be skipped under ``max_errors``."""
    if isinstance(max_errors, int):
        return max_errors
    return int(math.floor(max_errors * total))


def resolve_workers(workers: int | None) -> int:
    """Return the worker count: ``workers`` or the number of CPUs this process may use."""
    if workers is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return max(1, os.cpu_count() or 1)
    workers = int(workers)
    if workers < 1:
        raise DatasetError(f"workers must be at least 1, not {workers}")
    return workers


def chunk_size(total: int, workers: int) -> int:
    """Entries per task: large enough that inter-process traffic does not dominate."""
    return max(1, min(MAX_CHUNK, math.ceil(total / (workers * 4))))
