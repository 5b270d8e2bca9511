"""Executors: where jobs run.

* ``local`` (default, :class:`~digits_core.executors.local.Scheduler`): one
  worker process per job on this machine.
* ``ray`` (:class:`~digits_core.executors.ray_executor.RayScheduler`, needs the
  ``digits-core[ray]`` extra): one Ray task per job on a Ray cluster, with the
  job's CPU/GPU request.

Both share the queue in :mod:`~digits_core.executors.queue` and the worker
side in :mod:`~digits_core.executors.worker`. Ray is imported only when the
Ray executor is chosen.
"""

from __future__ import annotations

import os

from ..errors import ConfigurationError
from .local import Scheduler
from .queue import JobQueue

#: Environment variable giving the Ray cluster address (``--ray-address``).
RAY_ADDRESS_ENV = "DIGITS_RAY_ADDRESS"
#: The executors :func:`make_scheduler` knows.
EXECUTORS = ("local", "ray")


def make_scheduler(executor: str = "local", jobs_dir=None, *, ray_address: str | None = None, **options) -> JobQueue:
    """Create the scheduler of an executor.

    Args:
        executor: ``"local"`` or ``"ray"``.
        jobs_dir: The jobs folder (for Ray: a path every node sees, e.g. a shared filesystem).
        ray_address: The Ray cluster (``HOST:PORT``; default ``$DIGITS_RAY_ADDRESS``); Ray only.
        **options: ``max_dataset_jobs``, ``max_training_jobs``, ``poll_interval``.

    Raises:
        ConfigurationError: Unknown executor, no Ray address, or Ray not installed.
    """
    if executor == "local":
        return Scheduler(jobs_dir, **options)
    if executor == "ray":
        from .ray_executor import RayScheduler

        address = ray_address or os.environ.get(RAY_ADDRESS_ENV)
        if not address:
            raise ConfigurationError(
                f"--executor ray needs the cluster's address: --ray-address HOST:PORT or ${RAY_ADDRESS_ENV}."
            )
        return RayScheduler(jobs_dir, address=address, **options)
    raise ConfigurationError(f"--executor {executor!r} is not one of {', '.join(EXECUTORS)}.")


__all__ = ["EXECUTORS", "JobQueue", "RAY_ADDRESS_ENV", "Scheduler", "make_scheduler"]
