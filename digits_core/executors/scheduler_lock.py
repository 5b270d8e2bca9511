"""One scheduler per jobs folder: an OS lock the serving process holds while its scheduler runs.

A second ``digits serve`` on the same jobs folder must not touch a job of
the first (take a Waiting job, reap a Running one, mark it Aborted when it
exits). :func:`acquire` takes an exclusive ``flock`` on
``<jobs>/.scheduler.lock`` *before* the scheduler looks at any job, and
refuses with an error naming the process that holds it. The kernel drops
the lock when that process dies however it dies (even SIGKILL), so a stale
lock never blocks a restart. Inside one process the lock is shared (a test
that builds two apps over one folder is one server).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

from ..errors import ConfigurationError

LOCK_NAME = ".scheduler.lock"

_held: dict[str, tuple[int, int]] = {}  # real jobs folder -> (fd, holders in this process)
_guard = threading.Lock()


class SchedulerLockedError(ConfigurationError):
    """Another live process runs a scheduler over this jobs folder."""


def _describe(path: Path) -> str:
    try:
        owner = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return "another process"
    started = owner.get("started")
    when = (
        time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(started)) if isinstance(started, (int, float)) else ""
    )
    return f"process {owner.get('pid', '?')} on {owner.get('host', '?')} ({owner.get('command', '?')}){when}"


def acquire(jobs_dir: str | os.PathLike) -> str:
    """Take the scheduler lock of ``jobs_dir`` (shared within this process); return its key for :func:`release`.

    Raises:
        SchedulerLockedError: Another process holds it (the message names that process).
    """
    import fcntl

    key = os.path.realpath(os.fspath(jobs_dir))
    with _guard:
        if key in _held:
            fd, count = _held[key]
            _held[key] = (fd, count + 1)
            return key
        os.makedirs(key, exist_ok=True)
        path = Path(key) / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise SchedulerLockedError(
                f"Another DIGITS server already schedules the jobs in {key}: {_describe(path)}. Stop it first, or "
                "give this one another --jobs-dir."
            ) from None
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:200],
        }
        try:  # who holds it, for the second server's message; best effort (a full disk must not stop a start)
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(owner).encode(), 0)
        except OSError:
            pass
        _held[key] = (fd, 1)
        return key


def release(key: str) -> None:
    """Give back one hold of the lock taken by :func:`acquire`; the last one unlocks it."""
    with _guard:
        if key not in _held:
            return
        fd, count = _held[key]
        if count > 1:
            _held[key] = (fd, count - 1)
            return
        del _held[key]
        os.close(fd)  # closing the descriptor drops the flock


__all__ = ["LOCK_NAME", "SchedulerLockedError", "acquire", "release"]
