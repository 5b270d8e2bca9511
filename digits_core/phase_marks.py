"""Phase timestamps of a command, written only when ``DIGITS_PHASE_LOG`` names a file.

``bench/train_phases.py`` sets ``DIGITS_PHASE_LOG=FILE`` and runs ``digits
dataset create`` and ``digits train``; each :func:`mark` appends one JSON line
``{"phase": NAME, "t": UNIX_SECONDS}`` meaning "the phase NAME ended now": the
time since the previous mark (or since the process started, for the first one)
belongs to NAME. A phase that recurs (``steps``, ``validation``, ``snapshot``,
``metrics writes``) has one line per occurrence; the bench sums them.

Without the variable :func:`mark` only tests a module global, so the engine
calls it on its normal path (never per step: at phase boundaries only).
Standard library only: ``digits --help`` imports this module.
"""

from __future__ import annotations

import json
import os
import time
from typing import IO

#: The environment variable naming the file the marks are appended to.
PHASE_LOG_ENV = "DIGITS_PHASE_LOG"

_path = os.environ.get(PHASE_LOG_ENV) or None
_file: IO[str] | None = None


def enabled() -> bool:
    """Whether marks are being written (``DIGITS_PHASE_LOG`` was set when this module was imported)."""
    return _path is not None


def log_to(path: str | os.PathLike | None) -> None:
    """Write the marks of this process to ``path`` from now on (``None``: stop); for in-process runs and tests."""
    global _path, _file
    if _file is not None:
        _file.close()
        _file = None
    _path = None if path is None else str(path)


def mark(phase: str) -> None:
    """Record that ``phase`` ended now (nothing happens unless ``DIGITS_PHASE_LOG`` is set)."""
    global _file
    if _path is None:
        return
    if _file is None:
        _file = open(_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - kept open for the process
    _file.write(json.dumps({"phase": phase, "t": time.time()}) + "\n")


def read_marks(path: str | os.PathLike, started: float, ended: float | None = None) -> list[tuple[str, float]]:
    """``(phase, seconds)`` in order from a phase log, the first phase timed from ``started``.

    Args:
        path: The file ``DIGITS_PHASE_LOG`` named.
        started: When the process was launched (``time.time()``).
        ended: When it exited: adds an ``exit`` phase from the last mark.
    """
    phases: list[tuple[str, float]] = []
    previous = started
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            phases.append((str(entry["phase"]), float(entry["t"]) - previous))
            previous = float(entry["t"])
    if ended is not None:
        phases.append(("exit", ended - previous))
    return phases


if _path is not None:  # the interpreter (and site) started before anything of ours was imported
    mark("interpreter")
