"""The local executor (the default): each job runs in a worker process on this machine.

The web UI never runs a job in its own process: it saves the job's request
in the job folder's ``job.json`` (status Waiting) and hands the job to a
:class:`Scheduler`. The scheduler starts one worker process per job,
``python -m digits_core.scheduler run JOB_FOLDER``
(:func:`digits_core.executors.worker.main`). A custom network (executable
code) is therefore only ever imported in that worker process.

Limits: at most ``max_dataset_jobs`` dataset jobs (default 2) and
``max_training_jobs`` training jobs (default: one per GPU listed by
``nvidia-smi -L``, one on a CPU-only machine) run at once; the rest wait in
first-in first-out order. On a GPU machine every training job also gets its
own GPUs (:mod:`digits_core.gpus`): its worker sees only those
(``CUDA_VISIBLE_DEVICES``), with TensorFlow's memory growth on, and a job
whose GPUs are busy waits; ``status()`` and the job's ``gpus_assigned``
say who holds which.

Workers die with their parent: each watches its parent process and stops
its job (status Aborted) when the server that started it is gone, even
after ``kill -9`` of the server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from ..gpus import detect_gpus, worker_env
from ..jobs import Job
from .queue import JobQueue
from .worker import PARENT_PID_ENV, WORKER_LOG

#: The file holding a job's worker pid, for people and tools (job.json is the worker's to rewrite).
WORKER_PID_FILE = "worker.pid"


def default_training_slots() -> int:
    """Return the number of GPUs this machine offers jobs (:func:`digits_core.gpus.detect_gpus`), or 1 without any."""
    return max(1, len(detect_gpus()))


class ProcessWorker:
    """A job's local worker process (a :class:`~digits_core.executors.queue.WorkerHandle`)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def stop(self, timeout: float) -> None:
        """SIGTERM to the worker's process group, SIGKILL after ``timeout`` seconds."""
        proc = self.proc
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait(5)

    def failure(self) -> str:
        code = self.proc.returncode
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
            return f"The worker process {how} (exit code {code}); see {WORKER_LOG} in the job folder."
        return f"The worker process ended unexpectedly (exit code {code}); see {WORKER_LOG} in the job folder."


class Scheduler(JobQueue):
    """The local executor: a queue of jobs and the worker processes that run them.

    Args:
        jobs_dir: The jobs folder.
        max_dataset_jobs: Dataset jobs that may run at once.
        max_training_jobs: Training jobs that may run at once (``None``:
            :func:`default_training_slots`).
        poll_interval: Seconds between two looks at the queue and workers.
        python: The interpreter that runs workers (default: this one).
        gpu_devices: The GPU ids training jobs share (default: :func:`digits_core.gpus.detect_gpus`).
    """

    executor = "local"

    def __init__(
        self,
        jobs_dir=None,
        *,
        max_dataset_jobs: int = 2,
        max_training_jobs: int | None = None,
        poll_interval: float = 0.5,
        python: str | None = None,
        gpu_devices: list[str] | None = None,
    ):
        super().__init__(
            jobs_dir,
            max_dataset_jobs=max_dataset_jobs,
            max_training_jobs=max_training_jobs,
            poll_interval=poll_interval,
            gpu_devices=detect_gpus() if gpu_devices is None else gpu_devices,
        )
        self.python = python or sys.executable

    def _start_worker(self, job: Job, gpu_ids: list[str]) -> ProcessWorker:
        from ..form_secrets import child_env  # the job's PasswordField values, never written to disk

        extra_env: dict[str, str] = {}
        if job.kind == "model":
            extra_env = worker_env(list(gpu_ids), bool(self.gpus.devices))
            job.update(gpus_assigned=list(gpu_ids))
        log = open(job.path / WORKER_LOG, "ab")
        try:
            proc = subprocess.Popen(
                [self.python, "-m", "digits_core.scheduler", "run", str(job.path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={
                    **os.environ,
                    "PYTHONUNBUFFERED": "1",
                    PARENT_PID_ENV: str(os.getpid()),
                    **child_env(job.id),
                    **extra_env,
                },
            )
        finally:
            log.close()
        (job.path / WORKER_PID_FILE).write_text(str(proc.pid), encoding="utf-8")
        return ProcessWorker(proc)


__all__ = ["ProcessWorker", "Scheduler", "WORKER_PID_FILE", "default_training_slots"]
