"""Jobs started in the background of this process, with a handle: id at once, abort, wait.

::

    from digits_core.handles import start_dataset, start_training

    handle = start_training("DATASET_ID", "lenet", name="m", epochs=5, progress=print)
    print(handle.id)            # the model job exists already
    handle.abort()              # stops at the next step: status Aborted, snapshots kept
    job = handle.wait()         # the Job (Done / Aborted); raises the run's error (status Error)

The run happens in a thread of this process (TensorFlow releases the GIL
while it computes). Cancelling is always *Aborted*, never *Error*: by
:meth:`JobHandle.abort`, or by raising in the ``progress`` callback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from .datasets.create import create_dataset_job, run_dataset_job
from .engine.trainer import request_abort, train
from .jobs import Job, JobStatus

Progress = Callable[[dict], None]


class JobHandle:
    """A job running in a background thread (see the module docstring).

    Attributes:
        job: The :class:`~digits_core.Job` (its folder exists when the handle is returned).
    """

    def __init__(self, job: Job, thread: threading.Thread, outcome: dict, abort: Callable[[], None]):
        self.job = job
        self._thread = thread
        self._outcome = outcome
        self._abort = abort

    @property
    def id(self) -> str:
        """The job id (usable at once, e.g. with ``digits model show``)."""
        return self.job.id

    @property
    def status(self) -> JobStatus:
        """The job's current status, read from its folder."""
        return self.job.reload().status

    def done(self) -> bool:
        """True once the run has ended (Done, Aborted or Error)."""
        return not self._thread.is_alive()

    def abort(self) -> None:
        """Ask the run to stop soon; it ends with status Aborted."""
        self._abort()

    def wait(self, timeout: float | None = None) -> Job:
        """Wait for the end of the run.

        Returns:
            The job (status Done or Aborted).

        Raises:
            TimeoutError: Still running after ``timeout`` seconds.
            DigitsError: The run failed (status Error), e.g. ``TrainingError``.
        """
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"Job {self.id} is still running after {timeout} s.")
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self.job.reload()


def _start(target: Callable[[], Any], outcome: dict, name: str) -> threading.Thread:
    def run() -> None:
        try:
            target()
        except KeyboardInterrupt:  # an abort: the job already says Aborted
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to wait()
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def start_training(
    dataset: Any,
    network: Any = None,
    name: str | None = None,
    *,
    jobs_dir=None,
    callbacks: list | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> JobHandle:
    """Start :func:`digits_core.engine.train` in the background; returns once the model job exists.

    Arguments are those of :func:`~digits_core.engine.train`.

    Raises:
        FormValidationError, TrainingError: Raised here when the run fails before its job exists
            (bad options, unknown network or dataset).
    """
    created = threading.Event()
    box: dict = {}
    outcome: dict = {}

    def on_job(job: Job) -> None:
        box["job"] = job
        created.set()

    def target() -> None:
        try:
            train(
                dataset,
                network,
                name,
                jobs_dir=jobs_dir,
                callbacks=callbacks,
                progress=progress,
                on_job=on_job,
                **options,
            )
        finally:
            created.set()

    thread = _start(target, outcome, "digits-train")
    created.wait()
    if "job" not in box:
        thread.join()
        raise outcome.get("error") or RuntimeError("training ended before its job was created")
    job = box["job"]
    return JobHandle(job, thread, outcome, lambda: request_abort(job))


def start_dataset(
    plugin_id: str,
    form_data: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    workers: int | None = None,
    jobs_dir=None,
    max_errors: Any = None,
    progress: Progress | None = None,
) -> JobHandle:
    """Start :func:`digits_core.datasets.create_dataset` in the background; returns once the job exists.

    Arguments are those of :func:`~digits_core.datasets.create_dataset`. The
    form is validated before this returns; the job is Aborted (its partial
    build removed) by :meth:`JobHandle.abort` or when ``progress`` raises.

    Raises:
        FormValidationError, DatasetError, PluginNotFoundError: Invalid plugin, form or options.
    """
    job = create_dataset_job(plugin_id, form_data, name=name, jobs_dir=jobs_dir, max_errors=max_errors, workers=workers)
    stop = threading.Event()
    outcome: dict = {}

    def report(snapshot: dict) -> None:
        if stop.is_set():
            raise KeyboardInterrupt("Aborted from the Python API.")
        if progress is not None:
            try:
                progress(snapshot)
            except Exception as exc:  # noqa: BLE001 - the caller's way to cancel
                raise KeyboardInterrupt(f"progress callback raised {type(exc).__name__}: {exc}") from exc

    thread = _start(lambda: run_dataset_job(job, workers=workers, progress=report), outcome, "digits-dataset")
    return JobHandle(job, thread, outcome, stop.set)
