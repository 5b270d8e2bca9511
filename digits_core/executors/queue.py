"""The job queue every executor shares: order, limits, GPUs, abort, resume, recovery.

An executor (:mod:`~digits_core.executors.local`,
:mod:`~digits_core.executors.ray_executor`) only says how a job's worker is
started and stopped (:meth:`JobQueue._start_worker` returning a
:class:`WorkerHandle`); everything else is here, so both executors keep the
same semantics.

State lives only in the job folders, so a server restart loses nothing:
:meth:`JobQueue.recover` marks jobs that were Running as Aborted when their
owner died (a model job can then be resumed from its last snapshot), leaves
alone those whose owner still holds the job lock (see
:class:`digits_core.jobs.JobLock`; e.g. a ``digits train`` started from a
shell), and queues the Waiting ones again.

Job requests in ``job.json``:

* dataset job: ``plugin_id``, ``form_data`` (validated), ``workers``.
* model job: ``train_options`` (keyword arguments of
  :func:`digits_core.engine.train`); ``resume: true`` resumes instead.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from typing import Protocol

from ..datasets.publish import remove_stale_builds
from ..errors import DigitsError, JobStateError
from ..gpus import GpuAllocator, GpuRequestError
from ..jobs import Job, JobLockedError, JobStatus, JobStore, describe_owner
from ..jobs.lock import unwatch_worker, watch_worker
from . import scheduler_lock
from .worker import EXIT_JOB_LOCKED, WORKER_LOG

logger = logging.getLogger(__name__)

#: Seconds a training worker gets to stop by itself after an abort request.
ABORT_GRACE_S = 20.0


class WorkerHandle(Protocol):
    """What the queue needs from a running worker (a local process, a Ray task)."""

    @property
    def returncode(self) -> int | None:
        """The exit status once the worker ended (``None`` before)."""

    def poll(self) -> int | None:
        """The worker's exit status once it ended, else ``None`` (never blocks)."""

    def stop(self, timeout: float) -> None:
        """Stop the worker now (a dataset job, or a training job past its abort grace)."""

    def failure(self) -> str:
        """Why the worker ended without finishing its job, for the job's error message."""


class JobQueue:
    """A queue of jobs and the workers that run them (subclasses start the workers).

    Args:
        jobs_dir: The jobs folder.
        max_dataset_jobs: Dataset jobs that may run at once.
        max_training_jobs: Training jobs that may run at once (``None``: one per GPU in ``gpu_devices``, at least 1).
        poll_interval: Seconds between two looks at the queue and workers.
        gpu_devices: The GPU ids training jobs share.
    """

    def __init__(
        self,
        jobs_dir=None,
        *,
        max_dataset_jobs: int = 2,
        max_training_jobs: int | None = None,
        poll_interval: float = 0.5,
        gpu_devices: list[str] | None = None,
    ):
        self.store = JobStore(jobs_dir)
        self.gpus = GpuAllocator(list(gpu_devices or []))
        self.max_dataset_jobs = max(1, int(max_dataset_jobs))
        self.max_training_jobs = max(1, int(max_training_jobs or max(1, len(self.gpus.devices))))
        self.poll_interval = poll_interval
        self._queue: deque[str] = deque()
        self._running: dict[str, tuple[WorkerHandle, str]] = {}
        self._abort_deadline: dict[str, float] = {}
        self._abort_requested: set[str] = set()
        self._resubmitted: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock_key: str | None = None
        self._unrecorded: dict[str, tuple[JobStatus, str]] = {}  # job id -> end not written yet (disk full)

    # -- what an executor provides ---------------------------------------------

    def _start_worker(self, job: Job, gpu_ids: list[str]) -> WorkerHandle:
        """Start the worker that runs ``job`` (holding ``gpu_ids``); raise ``OSError`` if it cannot start."""
        raise NotImplementedError

    def _allocate_gpus(self, job: Job) -> list[str] | None:
        """The GPUs a model job gets now, or ``None`` while they are busy (it waits).

        Raises:
            GpuRequestError: The request can never be met.
        """
        return self.gpus.try_allocate(job.id, dict(job.data.get("train_options") or {}).get("gpus"))

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> JobQueue:
        """Take the jobs folder's scheduler lock, recover state from the folder and start the scheduling thread.

        Raises:
            SchedulerLockedError: Another process schedules this folder (nothing was touched).
        """
        if self._thread is None:
            if self._lock_key is None:
                self._lock_key = scheduler_lock.acquire(self.store.root)
            self.recover()
            self._thread = threading.Thread(target=self._loop, name="digits-scheduler", daemon=True)
            self._thread.start()
        return self

    def shutdown(self, *, abort_running: bool = True, timeout: float = 10.0) -> None:
        """Stop scheduling; optionally stop running workers (their jobs become Aborted)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if abort_running:
            with self._lock:
                for job_id, (handle, _kind) in list(self._running.items()):
                    handle.stop(timeout)
                    self._finish(job_id, handle, aborted=True)
        if self._lock_key is not None and not self._running:
            scheduler_lock.release(self._lock_key)
            self._lock_key = None

    def recover(self) -> dict[str, list[str]]:
        """Mark jobs whose owner died as Aborted; queue Waiting jobs again.

        A Running job whose owner still holds its lock (a ``digits train``
        from a shell, a worker still stopping) is left as it is.

        Returns:
            ``{"aborted": [...ids], "queued": [...ids], "alive": [...ids]}``.
        """
        result: dict[str, list[str]] = {"aborted": [], "queued": [], "alive": []}
        remove_stale_builds(self.store.root)  # first: on a full disk, the dead builds' space lets the rest be written
        for job in reversed(self.store.list(reap=False)):
            if job.id in self._running:
                continue
            if job.status is JobStatus.RUNNING:
                if _reap(job):
                    result["aborted"].append(job.id)
                elif job.status is JobStatus.RUNNING:
                    logger.info(
                        "Job %s is running in another process (%s); leaving it alone",
                        job.id,
                        describe_owner(job.owner or {}),
                    )
                    result["alive"].append(job.id)
            elif job.status is JobStatus.WAITING and job.id not in self._queue:
                self._queue.append(job.id)
                result["queued"].append(job.id)
        return result

    # -- queue ----------------------------------------------------------------

    def submit(self, job: Job) -> Job:
        """Queue a job whose request is saved in its ``job.json``; its status becomes Waiting."""
        if job.status is not JobStatus.WAITING:
            job.set_status(JobStatus.WAITING)
        with self._lock:
            if job.id in self._running:
                # The job's previous worker is still exiting (e.g. resume right after an abort):
                # queue the job again once that worker is gone.
                self._resubmitted.add(job.id)
            elif job.id not in self._queue:
                self._queue.append(job.id)
        return job

    def resume(self, job: Job, *, epochs: int | None = None) -> Job:
        """Queue an Aborted or Error model job to continue from its last snapshot.

        ``epochs`` sets a new total number of epochs (default: the planned one).

        Raises:
            JobStateError: The job is not a model job, or is not Aborted or Error (a Done job is finished).
            JobLockedError: Another live process owns the job.
        """
        if job.kind != "model":
            raise JobStateError(f"Job {job.id} is a {job.kind} job; only model jobs can be resumed.")
        owner = job.owner if job.id not in self._running else None
        if owner is not None:
            raise JobLockedError(job.path, owner)
        if job.status not in (JobStatus.ABORTED, JobStatus.ERROR):
            raise JobStateError(f"Job {job.id} is {job.status.value}; only an Aborted or Error job can be resumed.")
        job.forget("resume_epochs")
        if epochs is not None:
            job.resume(JobStatus.WAITING, resume=True, resume_epochs=int(epochs))
        else:
            job.resume(JobStatus.WAITING, resume=True)
        return self.submit(job)

    def abort(self, job_id: str) -> None:
        """Abort a waiting or running job.

        A waiting job leaves the queue at once. A running training job is
        asked to stop cooperatively (:func:`digits_core.engine.request_abort`)
        and is stopped after :data:`ABORT_GRACE_S`; a dataset worker is stopped
        at once. The job ends Aborted.

        Raises:
            JobStateError: The job is not waiting or running.
        """
        job = self.store.get(job_id)
        with self._lock:
            if job.id in self._queue:
                self._queue.remove(job.id)
                job.set_status(JobStatus.ABORTED, error="Aborted by the user before it started.")
                return
            entry = self._running.get(job.id)
            if entry is None:
                if job.status is JobStatus.RUNNING and job.is_alive:
                    _abort_foreign(job)
                    return
                if job.status in (JobStatus.RUNNING, JobStatus.WAITING):
                    job.set_status(JobStatus.ABORTED, error="Aborted by the user.")
                    return
                raise JobStateError(f"Job {job.id} is {job.status.value}; there is nothing to abort.")
            handle, kind = entry
            # Kept in memory: the worker owns job.json while it runs.
            self._abort_requested.add(job.id)
            if kind == "model":
                try:
                    from ..engine import request_abort

                    request_abort(job)
                except Exception:  # noqa: BLE001 - fall back to stopping the worker
                    logger.exception("request_abort failed for %s", job.id)
                self._abort_deadline[job.id] = time.monotonic() + ABORT_GRACE_S
            else:
                handle.stop(5.0)

    def status(self) -> dict:
        """Return the queue and the running jobs (for ``/api/scheduler``)."""
        with self._lock:
            return {
                "waiting": list(self._queue),
                "running": {job_id: kind for job_id, (_h, kind) in self._running.items()},
                "max_dataset_jobs": self.max_dataset_jobs,
                "max_training_jobs": self.max_training_jobs,
                "gpus": {"devices": list(self.gpus.devices), "free": self.gpus.free(), "held": self.gpus.holdings()},
            }

    def is_active(self, job_id: str) -> bool:
        """True while the job waits in the queue or runs."""
        with self._lock:
            return job_id in self._queue or job_id in self._running

    def wait(self, job_id: str, timeout: float = 60.0) -> Job:
        """Block until the job leaves the queue and its worker ends; return it reloaded."""
        deadline = time.monotonic() + timeout
        while self.is_active(job_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"Job {job_id} still active after {timeout}s")
            time.sleep(0.1)
        return self.store.get(job_id)

    # -- internals ------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the scheduler must survive anything
                logger.exception("scheduler tick failed")
            self._stop.wait(self.poll_interval)

    def _tick(self) -> None:
        with self._lock:
            for job_id, (status, error) in list(self._unrecorded.items()):
                self._record_end(job_id, status, error)
            for job_id, (handle, _kind) in list(self._running.items()):
                if handle.poll() is not None:
                    self._finish(job_id, handle)
                elif job_id in self._abort_deadline and time.monotonic() > self._abort_deadline[job_id]:
                    handle.stop(5.0)
                    self._finish(job_id, handle, aborted=True)
            limits = {"dataset": self.max_dataset_jobs, "model": self.max_training_jobs}
            for job_id in list(self._queue):
                try:
                    job = self.store.get(job_id)
                except DigitsError:
                    self._queue.remove(job_id)
                    continue
                busy = sum(1 for _h, kind in self._running.values() if kind == job.kind)
                if busy >= limits.get(job.kind, 1):
                    continue
                gpu_ids: list[str] = []
                if job.kind == "model":
                    try:
                        held = self._allocate_gpus(job)
                    except GpuRequestError as exc:
                        self._queue.remove(job_id)
                        job.set_status(JobStatus.ERROR, error=str(exc))
                        continue
                    if held is None:
                        continue  # its GPUs are busy: it waits, jobs behind it may still start
                    gpu_ids = held
                self._queue.remove(job_id)
                self._launch(job, gpu_ids)

    def _launch(self, job: Job, gpu_ids: list[str]) -> None:
        watch_worker(job.path)  # its end (exit code, signal) is ours to record, not the reaper's
        try:
            handle = self._start_worker(job, gpu_ids)
        except OSError as exc:
            unwatch_worker(job.path)
            self.gpus.release(job.id)
            job.set_status(JobStatus.ERROR, error=f"Could not start a worker: {exc}")
            return
        self._running[job.id] = (handle, job.kind)

    def _finish(self, job_id: str, handle: WorkerHandle, aborted: bool = False) -> None:
        try:
            self._finish_job(job_id, handle, aborted)
        finally:
            if job_id not in self._unrecorded:  # recorded (or not ours to record): reaping applies again
                unwatch_worker(self.store.root / job_id)

    def _finish_job(self, job_id: str, handle: WorkerHandle, aborted: bool) -> None:
        self._running.pop(job_id, None)
        self.gpus.release(job_id)
        self._abort_deadline.pop(job_id, None)
        if job_id in self._resubmitted:
            self._resubmitted.discard(job_id)
            self._abort_requested.discard(job_id)
            self._queue.append(job_id)
            return
        try:
            # Not store.get: it would mark a crashed worker's job Aborted; a crash is an Error with its exit code.
            job = Job.load(self.store.root / job_id)
        except DigitsError:
            return
        requested = job.id in self._abort_requested
        self._abort_requested.discard(job.id)
        if handle.returncode == EXIT_JOB_LOCKED:
            return  # another process owns the job: its status is that owner's to write
        if aborted or requested:
            self._record_end(job_id, JobStatus.ABORTED, "Aborted by the user.")
        else:
            self._record_end(job_id, JobStatus.ERROR, handle.failure())

    def _record_end(self, job_id: str, status: JobStatus, error: str) -> None:
        """Write how a worker's job ended; on a full disk keep it and try again next tick (the job is not lost)."""
        try:
            job = Job.load(self.store.root / job_id)
            job.forget("resume", "resume_epochs")
            if not job.status.is_finished:
                job.set_status(status, error=error)
        except DigitsError:
            pass
        except OSError as exc:
            if job_id not in self._unrecorded:
                logger.warning("cannot record the end of job %s yet (%s); retrying", job_id, exc.strerror or exc)
            self._unrecorded[job_id] = (status, error)
            return
        self._unrecorded.pop(job_id, None)
        unwatch_worker(self.store.root / job_id)


def _reap(job: Job) -> bool:
    """:meth:`Job.reap`, but a full disk only postpones it (the next start or listing tries again)."""
    try:
        return job.reap()
    except OSError as exc:
        logger.warning("cannot mark job %s Aborted yet (%s)", job.id, exc.strerror or exc)
        return False


def _abort_foreign(job: Job) -> None:
    """Stop a job that another live process owns (not one of this scheduler's workers).

    A training job is asked to stop through its abort file (it keeps its last
    snapshot); any other job's owner gets SIGTERM, if it runs on this host.
    """
    if job.kind == "model":
        from ..engine import request_abort

        request_abort(job)
        return
    owner = job.owner or {}
    if owner.get("host") != socket.gethostname() or not owner.get("pid"):
        raise JobStateError(f"Job {job.id} runs in another process ({describe_owner(owner)}); stop it there.")
    try:
        os.kill(int(owner["pid"]), signal.SIGTERM)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        raise JobStateError(f"Job {job.id} runs in a process of another user ({describe_owner(owner)}).") from exc


__all__ = ["ABORT_GRACE_S", "JobQueue", "WorkerHandle", "WORKER_LOG"]
