"""Executors: where jobs run.

* ``local`` (default, :class:`~digits_core.executors.local.Scheduler`): one
  worker process per job on this machine.

Both share the queue in :mod:`~digits_core.executors.queue` and the worker
side in :mod:`~digits_core.executors.worker`.
"""

from __future__ import annotations

from .local import Scheduler
from .queue import JobQueue

__all__ = ["JobQueue", "Scheduler"]
