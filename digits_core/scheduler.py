"""Run dataset and training jobs in background worker processes.

The web UI never runs a job in its own process: it saves the job's request
in the job folder's ``job.json`` (status Waiting) and hands the job to a
:class:`Scheduler`. The scheduler starts one worker process per job,
``python -m digits_core.scheduler run JOB_FOLDER``, which calls the same
Python API the command line uses (:func:`digits_core.datasets.create_dataset`,
:func:`digits_core.engine.train`, :func:`digits_core.engine.resume_training`).
A custom network (executable code) is therefore only ever imported in that
worker process.

Limits: at most ``max_dataset_jobs`` dataset jobs (default 2) and
``max_training_jobs`` training jobs (default: one per GPU listed by
``nvidia-smi -L``, one on a CPU-only machine) run at once; the rest wait in
first-in first-out order. On a GPU machine every training job also gets its
own GPUs (:mod:`digits_core.gpus`): its worker sees only those
(``CUDA_VISIBLE_DEVICES``), with TensorFlow's memory growth on, and a job
whose GPUs are busy waits; ``status()`` and the job's ``gpus_assigned``
say who holds which.

State lives only in the job folders, so a server restart loses nothing:
:meth:`Scheduler.recover` marks jobs that were Running as Aborted when their
owner died (a model job can then be resumed from its last snapshot), leaves
alone those whose owner still holds the job lock (see
:class:`digits_core.jobs.JobLock`; e.g. a ``digits train`` started from a
shell), and queues the Waiting ones again.

Workers die with their parent: each watches its parent process and stops
its job (status Aborted) when the server that started it is gone, even
after ``kill -9`` of the server.

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
import subprocess
import sys
import threading
import time
import traceback
from collections import deque

from .datasets.publish import remove_stale_builds
from .errors import DigitsError, JobStateError
from .gpus import GpuAllocator, GpuRequestError, detect_gpus, worker_env
from .jobs import Job, JobLockedError, JobStatus, JobStore, describe_owner

logger = logging.getLogger(__name__)

#: File in a job folder that receives the worker's stdout and stderr.
WORKER_LOG = "worker.log"
#: Seconds a training worker gets to stop by itself after an abort request.
ABORT_GRACE_S = 20.0
#: The file holding a job's worker pid, for people and tools (job.json is the worker's to rewrite).
WORKER_PID_FILE = "worker.pid"
#: Seconds an orphaned worker (its server died) gets to stop by itself before it kills its process group.
ORPHAN_STOP_TIMEOUT = 30.0
#: Exit status of a worker that found its job owned by another live process (the job is left as it is).
EXIT_JOB_LOCKED = 75
#: Environment variable naming the pid of the server that started a worker.
PARENT_PID_ENV = "DIGITS_SCHEDULER_PID"


def default_training_slots() -> int:
    """Return the number of GPUs this machine offers jobs (:func:`digits_core.gpus.detect_gpus`), or 1 without any."""
    return max(1, len(detect_gpus()))


class Scheduler:
    """A queue of jobs and the worker processes that run them.

    Args:
        jobs_dir: The jobs folder.
        max_dataset_jobs: Dataset jobs that may run at once.
        max_training_jobs: Training jobs that may run at once (``None``:
            :func:`default_training_slots`).
        poll_interval: Seconds between two looks at the queue and workers.
        python: The interpreter that runs workers (default: this one).
        gpu_devices: The GPU ids training jobs share (default: :func:`digits_core.gpus.detect_gpus`).
    """

    def __init__(self, jobs_dir=None, *, max_dataset_jobs: int = 2, max_training_jobs: int | None = None,
                 poll_interval: float = 0.5, python: str | None = None, gpu_devices: list[str] | None = None):
        self.store = JobStore(jobs_dir)
        self.gpus = GpuAllocator(detect_gpus() if gpu_devices is None else gpu_devices)
        self.max_dataset_jobs = max(1, int(max_dataset_jobs))
        self.max_training_jobs = max(1, int(max_training_jobs or max(1, len(self.gpus.devices))))
        self.poll_interval = poll_interval
        self.python = python or sys.executable
        self._queue: deque[str] = deque()
        self._running: dict[str, tuple[subprocess.Popen, str]] = {}
        self._abort_deadline: dict[str, float] = {}
        self._abort_requested: set[str] = set()
        self._resubmitted: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> Scheduler:
        """Recover state from the jobs folder and start the scheduling thread."""
        if self._thread is None:
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
                for job_id, (proc, _kind) in list(self._running.items()):
                    self._terminate(proc, timeout)
                    self._finish(job_id, proc, aborted=True)

    def recover(self) -> dict[str, list[str]]:
        """Mark jobs whose owner died as Aborted; queue Waiting jobs again.

        A Running job whose owner still holds its lock (a ``digits train``
        from a shell, a worker still stopping) is left as it is.

        Returns:
            ``{"aborted": [...ids], "queued": [...ids], "alive": [...ids]}``.
        """
        result: dict[str, list[str]] = {"aborted": [], "queued": [], "alive": []}
        for job in reversed(self.store.list(reap=False)):
            if job.id in self._running:
                continue
            if job.status is JobStatus.RUNNING:
                if job.reap():
                    result["aborted"].append(job.id)
                elif job.status is JobStatus.RUNNING:
                    logger.info("Job %s is running in another process (%s); leaving it alone",
                                job.id, describe_owner(job.owner or {}))
                    result["alive"].append(job.id)
            elif job.status is JobStatus.WAITING and job.id not in self._queue:
                self._queue.append(job.id)
                result["queued"].append(job.id)
        remove_stale_builds(self.store.root)  # build folders of dataset jobs whose owner died
        return result

    # -- queue ----------------------------------------------------------------

    def submit(self, job: Job) -> Job:
        """Queue a job whose request is saved in its ``job.json``; its status becomes Waiting."""
        if job.status is not JobStatus.WAITING:
            job.set_status(JobStatus.WAITING)
        with self._lock:
            if job.id in self._running:
                # The job's previous worker is still exiting (e.g. resume right after an abort):
                # queue the job again once that process is gone.
                self._resubmitted.add(job.id)
            elif job.id not in self._queue:
                self._queue.append(job.id)
        self._wake()
        return job

    def resume(self, job: Job) -> Job:
        """Queue an Aborted or Error model job to continue from its last snapshot.

        Raises:
            JobStateError: The job is not a model job, or is still running/waiting.
            JobLockedError: Another live process owns the job.
        """
        if job.kind != "model":
            raise JobStateError(f"Job {job.id} is a {job.kind} job; only model jobs can be resumed.")
        owner = job.owner if job.id not in self._running else None
        if owner is not None:
            raise JobLockedError(job.path, owner)
        if not job.status.is_finished:
            raise JobStateError(f"Job {job.id} is {job.status.value}; only a finished job can be resumed.")
        job.data["resume"] = True
        job.save()
        return self.submit(job)

    def abort(self, job_id: str) -> None:
        """Abort a waiting or running job.

        A waiting job leaves the queue at once. A running training job is
        asked to stop cooperatively (:func:`digits_core.engine.request_abort`)
        and is killed after :data:`ABORT_GRACE_S`; a dataset worker is stopped
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
            proc, kind = entry
            # Kept in memory: the worker owns job.json while it runs.
            self._abort_requested.add(job.id)
            if kind == "model":
                try:
                    from .engine import request_abort

                    request_abort(job)
                except Exception:  # noqa: BLE001 - fall back to stopping the process
                    logger.exception("request_abort failed for %s", job.id)
                self._abort_deadline[job.id] = time.monotonic() + ABORT_GRACE_S
            else:
                self._terminate(proc, 5.0)
        self._wake()

    def status(self) -> dict:
        """Return the queue and the running jobs (for ``/api/scheduler``)."""
        with self._lock:
            return {
                "waiting": list(self._queue),
                "running": {job_id: kind for job_id, (_p, kind) in self._running.items()},
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

    def _wake(self) -> None:
        if self._thread is None:
            return
        # The loop polls; a short interval keeps this simple and robust.

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - the scheduler must survive anything
                logger.exception("scheduler tick failed")
            self._stop.wait(self.poll_interval)

    def _tick(self) -> None:
        with self._lock:
            for job_id, (proc, _kind) in list(self._running.items()):
                if proc.poll() is not None:
                    self._finish(job_id, proc)
                elif job_id in self._abort_deadline and time.monotonic() > self._abort_deadline[job_id]:
                    self._terminate(proc, 5.0)
                    self._finish(job_id, proc, aborted=True)
            limits = {"dataset": self.max_dataset_jobs, "model": self.max_training_jobs}
            for job_id in list(self._queue):
                try:
                    job = self.store.get(job_id)
                except DigitsError:
                    self._queue.remove(job_id)
                    continue
                busy = sum(1 for _p, kind in self._running.values() if kind == job.kind)
                if busy >= limits.get(job.kind, 1):
                    continue
                gpu_ids: list[str] = []
                if job.kind == "model":
                    try:
                        held = self.gpus.try_allocate(job.id, dict(job.data.get("train_options") or {}).get("gpus"))
                    except GpuRequestError as exc:
                        self._queue.remove(job_id)
                        job.set_status(JobStatus.ERROR, error=str(exc))
                        continue
                    if held is None:
                        continue  # its GPUs are busy: it waits, jobs behind it may still start
                    gpu_ids = held
                self._queue.remove(job_id)
                self._launch(job, gpu_ids)

    def _launch(self, job: Job, gpu_ids: list[str] | None = None) -> None:
        from .form_secrets import child_env  # the job's PasswordField values, never written to disk

        extra_env: dict[str, str] = {}
        if job.kind == "model":
            extra_env = worker_env(list(gpu_ids or []), bool(self.gpus.devices))
            job.data["gpus_assigned"] = list(gpu_ids or [])
            job.save()

        log = open(job.path / WORKER_LOG, "ab")
        try:
            proc = subprocess.Popen(
                [self.python, "-m", "digits_core.scheduler", "run", str(job.path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1", PARENT_PID_ENV: str(os.getpid()), **child_env(job.id),
                     **extra_env},
            )
        except OSError as exc:
            self.gpus.release(job.id)
            job.set_status(JobStatus.ERROR, error=f"Could not start a worker process: {exc}")
            return
        finally:
            log.close()
        (job.path / WORKER_PID_FILE).write_text(str(proc.pid), encoding="utf-8")
        self._running[job.id] = (proc, job.kind)

    @staticmethod
    def _terminate(proc: subprocess.Popen, timeout: float) -> None:
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

    def _finish(self, job_id: str, proc: subprocess.Popen, aborted: bool = False) -> None:
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
        if proc.returncode == EXIT_JOB_LOCKED:
            return  # another process owns the job: its status is that owner's to write
        if job.data.pop("resume", None) is not None:
            job.save()
        if job.status.is_finished:
            return
        if aborted or requested:
            job.set_status(JobStatus.ABORTED, error="Aborted by the user.")
        else:
            job.set_status(JobStatus.ERROR, error=f"The worker process ended unexpectedly (exit code {proc.returncode}); "
                                                  f"see {WORKER_LOG} in the job folder.")


def _abort_foreign(job: Job) -> None:
    """Stop a job that another live process owns (not one of this scheduler's workers).

    A training job is asked to stop through its abort file (it keeps its last
    snapshot); any other job's owner gets SIGTERM, if it runs on this host.
    """
    if job.kind == "model":
        from .engine import request_abort

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


# -- the worker side -------------------------------------------------------------


def train_into_job(job: Job, options: dict) -> Job:
    """Run the engine's training into a model job the web UI already created.

    The web UI needs the job (and its id) before the run starts, to queue it
    and show its page; :func:`digits_core.engine.trainer.train_existing_job`
    is :func:`~digits_core.engine.train` on a given job.
    """
    from .engine import train_existing_job

    return train_existing_job(job, **options)


def run_job(job_path: str | os.PathLike) -> int:
    """Run one queued job in this process (the worker side). Returns an exit status.

    The worker owns the job (holds its lock) from start to end; if another
    live process owns it already, nothing is run or written and the status is
    :data:`EXIT_JOB_LOCKED`.
    """
    job = Job.load(job_path)
    try:
        lock = job.acquire_lock()
    except JobLockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_JOB_LOCKED
    from .paths import confined_to

    try:
        # A job queued by the web server reads only under its data roots (None: a job of the CLI/API).
        with confined_to(job.data.get("data_roots")):
            return _run_owned_job(job)
    finally:
        lock.release()


def _run_owned_job(job: Job) -> int:
    try:
        if job.kind == "dataset":
            from .datasets import run_dataset_job

            run_dataset_job(job)
        elif job.kind == "model":
            from . import engine
            from .tf_quiet import quiet_tensorflow_startup

            quiet_tensorflow_startup()  # keeps TensorFlow's C++ start-up lines out of worker.log

            if job.data.get("resume"):
                engine.resume_training(job)
            else:
                train_into_job(job, dict(job.data.get("train_options", {})))
        else:
            raise JobStateError(f"Job {job.id} has kind {job.kind!r}, which no worker runs.")
    except DigitsError as exc:
        job.reload()
        if not job.status.is_finished:
            job.set_status(JobStatus.ERROR, error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:  # noqa: BLE001 - record every failure in the job
        traceback.print_exc()
        job.reload()
        if not job.status.is_finished:
            aborted = isinstance(exc, KeyboardInterrupt)
            job.set_status(JobStatus.ABORTED if aborted else JobStatus.ERROR,
                           error="Aborted by the user." if aborted else f"Internal error: {exc!r} (see {WORKER_LOG}).")
        return 1
    job.reload()
    if not job.status.is_finished:
        job.set_status(JobStatus.DONE)
    return 0


def _sigterm(_signum, _frame):
    raise KeyboardInterrupt


def watch_parent(parent_pid: int, *, interval: float = 0.5, grace: float | None = None) -> threading.Thread:
    """Stop this process when ``parent_pid`` is no longer its parent (the server died, even by ``kill -9``).

    The process first gets SIGTERM (a training job aborts at its next step,
    keeping its last snapshot); if it is still alive ``grace`` seconds later
    (:data:`ORPHAN_STOP_TIMEOUT`), its whole process group is killed.
    A thread, rather than ``PR_SET_PDEATHSIG``: that signal fires when the
    parent's *thread* that started the worker ends, not the parent process.
    """
    grace = ORPHAN_STOP_TIMEOUT if grace is None else grace

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(interval)
        logger.warning("The server (pid %s) that started this worker is gone; stopping the job", parent_pid)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="digits-parent-watch", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    """``python -m digits_core.scheduler run JOB_FOLDER``: the worker process entry point."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "run":
        print("usage: python -m digits_core.scheduler run JOB_FOLDER", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _sigterm)
    parent = os.environ.get(PARENT_PID_ENV)
    if parent and parent.isdigit():
        watch_parent(int(parent))
    return run_job(argv[1])


if __name__ == "__main__":
    sys.exit(main())
