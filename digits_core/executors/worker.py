"""The worker side of every executor: run one queued job in this process.

A local worker is ``python -m digits_core.scheduler run JOB_FOLDER``
(:func:`main`); a Ray worker calls :func:`run_job` inside a Ray task
(:mod:`digits_core.executors.ray_executor`). Either way the job runs through
the same Python API the command line uses
(:func:`digits_core.datasets.create_dataset`, :func:`digits_core.engine.train`,
:func:`digits_core.engine.resume_training`), holding the job's OS lock
(:class:`digits_core.jobs.JobLock`) from start to end.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback

from ..errors import DigitsError, JobStateError
from ..faults import disk_error, disk_error_message, note_stop_cause, stop_cause
from ..jobs import Job, JobLockedError, JobStatus

logger = logging.getLogger(__name__)

#: File in a job folder that receives the worker's stdout and stderr.
WORKER_LOG = "worker.log"
#: Seconds an orphaned worker (its server died) gets to stop by itself before it kills its process group.
ORPHAN_STOP_TIMEOUT = 30.0
#: Exit status of a worker that found its job owned by another live process (the job is left as it is).
EXIT_JOB_LOCKED = 75
#: Environment variable naming the pid of the server that started a worker.
PARENT_PID_ENV = "DIGITS_SCHEDULER_PID"


def train_into_job(job: Job, options: dict) -> Job:
    """Run the engine's training into a model job the web UI already created.

    The web UI needs the job (and its id) before the run starts, to queue it
    and show its page; :func:`digits_core.engine.trainer.train_existing_job`
    is :func:`~digits_core.engine.train` on a given job.
    """
    from ..engine import train_existing_job

    return train_existing_job(job, **options)


def run_job(job_path: str | os.PathLike, *, placement: dict | None = None, encode_on_ray: bool = False) -> int:
    """Run one queued job in this process (the worker side). Returns an exit status.

    The worker owns the job (holds its lock) from start to end; if another
    live process owns it already, nothing is run or written and the status is
    :data:`EXIT_JOB_LOCKED`.

    Args:
        job_path: The job folder.
        placement: Where the job runs (e.g. the Ray node), saved in ``job.json`` once the job is owned.
        encode_on_ray: A dataset job encodes its chunks as Ray tasks on the cluster this process runs on
            (see :mod:`digits_core.executors.ray_encode`).
    """
    job = Job.load(job_path)
    try:
        lock = job.acquire_lock()
    except JobLockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_JOB_LOCKED
    from ..paths import confined_to

    if placement is not None:
        job.update(placement=placement)

    try:
        # A job queued by the web server reads only under its data roots (None: a job of the CLI/API).
        with confined_to(job.data.get("data_roots")):
            return _run_owned_job(job, encode_on_ray)
    finally:
        lock.release()


def _run_owned_job(job: Job, encode_on_ray: bool = False) -> int:
    try:
        if job.kind == "dataset":
            from ..datasets import run_dataset_job
            from .ray_encode import CURRENT_CLUSTER

            run_dataset_job(job, ray_address=CURRENT_CLUSTER if encode_on_ray else None)
        elif job.kind == "model":
            from .. import engine
            from ..tf_quiet import quiet_tensorflow_startup

            quiet_tensorflow_startup(lean=True)  # C++ start-up lines out of worker.log; a lean digits process

            if job.data.get("resume"):
                engine.resume_training(job, epochs=job.data.get("resume_epochs"))
            else:
                train_into_job(job, job.train_options)
        elif job.kind == "pool":  # active learning: a pool's scoring or round (digits_core.labeling.jobs)
            from ..labeling.jobs import run_pool_job  # uphill-free: loaded only for the kind it runs
            from ..tf_quiet import quiet_tensorflow_startup  # (as for model jobs) only when TensorFlow will load

            quiet_tensorflow_startup(lean=True)
            run_pool_job(job)
        else:
            raise JobStateError(f"Job {job.id} has kind {job.kind!r}, which no worker runs.")
    except DigitsError as exc:
        message = disk_error_message(exc, job.path.parent) or str(exc)
        _say(f"error: {message}")
        _record_end(job, JobStatus.ERROR, message)
        return 1
    except BaseException as exc:  # noqa: BLE001 - record every failure in the job
        _say(traceback.format_exc())
        aborted = isinstance(exc, KeyboardInterrupt)
        cause = stop_cause()
        message = (
            (f"Aborted: {cause}." if cause else "Aborted by the user.")
            if aborted
            else (disk_error_message(exc, job.path.parent) or f"Internal error: {exc!r} (see {WORKER_LOG}).")
        )
        _record_end(job, JobStatus.ABORTED if aborted else JobStatus.ERROR, message)
        return 1
    job.reload()
    if not job.status.is_finished:
        job.set_status(JobStatus.DONE)
    return 0


def _say(text: str) -> None:
    """Write to worker.log (stderr); on a full disk the job record (retried by the server) must do."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def _record_end(job: Job, status: JobStatus, error: str, attempts: int = 5) -> None:
    """Set the job's end status; on a full disk retry a few times (the server retries after the worker exits)."""
    for attempt in range(attempts):
        try:
            job.reload()
            if not job.status.is_finished:
                job.set_status(status, error=error)
            return
        except OSError as exc:
            if disk_error(exc) is None or attempt == attempts - 1:
                _say(f"error: could not record the end of job {job.id}: {exc}")
                return
            time.sleep(0.5)


def _sigterm(_signum, _frame):
    cause = stop_cause()  # the job's Aborted message (a dataset build records the interrupt's text)
    raise KeyboardInterrupt(f"Aborted: {cause}." if cause else "")


def server_died_cause(pid: int) -> str:
    """The Aborted message of a job whose server died (killed, even by ``kill -9``, or its machine stopped)."""
    return (
        f"the digits server (pid {pid}) that ran this job died, so its worker stopped the job; "
        "resume a model job to continue from its last snapshot"
    )


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
        note_stop_cause(server_died_cause(parent_pid))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="digits-parent-watch", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:
    """``python -m digits_core.scheduler run JOB_FOLDER``: the local worker process entry point."""
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
