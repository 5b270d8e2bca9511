"""Run dataset and training jobs in background workers (compatibility module).

The scheduler lives in :mod:`digits_core.executors`: the queue every executor
shares (:mod:`~digits_core.executors.queue`), the local executor
(:mod:`~digits_core.executors.local`, the default: one worker process per job
on this machine), the Ray executor (:mod:`~digits_core.executors.ray_executor`)
and the worker side (:mod:`~digits_core.executors.worker`). This module keeps
the names it always had, and the local worker's command line,
``python -m digits_core.scheduler run JOB_FOLDER``.
"""

from __future__ import annotations

import sys

from .executors.local import WORKER_PID_FILE, ProcessWorker, Scheduler, default_training_slots
from .executors.queue import ABORT_GRACE_S, JobQueue, WorkerHandle, _abort_foreign
from .executors.worker import (
    EXIT_JOB_LOCKED,
    ORPHAN_STOP_TIMEOUT,
    PARENT_PID_ENV,
    WORKER_LOG,
    main,
    run_job,
    train_into_job,
    watch_parent,
)

__all__ = [
    "ABORT_GRACE_S",
    "EXIT_JOB_LOCKED",
    "JobQueue",
    "ORPHAN_STOP_TIMEOUT",
    "PARENT_PID_ENV",
    "ProcessWorker",
    "Scheduler",
    "WORKER_LOG",
    "WORKER_PID_FILE",
    "WorkerHandle",
    "default_training_slots",
    "main",
    "run_job",
    "train_into_job",
    "watch_parent",
    "_abort_foreign",
]

if __name__ == "__main__":
    sys.exit(main())
