"""The training run: one code path for the API, the CLI and the web UI.

:func:`train` creates a model job and trains it; :func:`train_existing_job`
trains into a job created beforehand (the web UI's queue);
:func:`resume_training` continues one from its last snapshot;
:func:`request_abort` asks a running job (in this or another process) to
stop at its next step; :func:`load_snapshot` loads a trained model.

A run is three units: :mod:`.setup` builds everything before the first
step (:class:`~.setup.RunState`), :mod:`.loop` runs the steps
(callbacks: :mod:`.callbacks`; compiled steps: :mod:`.steps`; snapshots:
:mod:`.snapshots`), and :func:`_execute` here owns the job's life cycle
(status, signals, hooks, clean-up). Task-specific pieces (loss, metrics,
labels) come from :mod:`.tasks`.
"""

from __future__ import annotations

import logging
import math
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import DigitsError, FormValidationError, JobStateError, TrainingError
from ..faults import disk_error_message, signal_reason
from ..jobs import Job, JobStatus
from ..jobs.model import MODEL_FILE, update_model_record
from ..jobs.record import ModelRecord
from ..phase_marks import mark
from ..plugins.registry import registry
from ..submit.records import create_model_record
from . import jobio
from .distribute import make_strategy
from .hparams import write_run_hparams
from .loop import ABORT_FLAGS, AbortSignal, TrainingLoop
from .mlflow_log import finish_tracking, pop_tracking_uri, resumed_tracking_uri, tracked_callbacks
from .networks import (
    DEFAULT_NETWORK,
    NetworkSpec,
    check_network_input,
    check_network_kind,
    check_network_task,
    resolve_network,
)
from .option_specs import refuse_sweep
from .options import TrainingOptions
from .precision import check_hardware
from .setup import RunPlan, RunState, prepare_run
from .snapshots import load_snapshot
from .tasks import Task, task_for_label_kind, task_named
from .volume_nets import VOLUME_NETWORKS
from .weights import resolve_weights

__all__ = ["train", "train_existing_job", "resume_training", "request_abort", "load_snapshot"]

logger = logging.getLogger("digits_core.engine")

Progress = Callable[[dict], None]


# -- public API -------------------------------------------------------------------


def train(
    dataset: Any,
    network: str | Callable | None = None,
    name: str | None = None,
    *,
    jobs_dir=None,
    callbacks: list | None = None,
    progress: Progress | None = None,
    on_job: Callable[[Job], None] | None = None,
    group: str | None = None,
    sweep: dict | None = None,
    **options: Any,
) -> Job:
    """Train a network on a dataset in a new model job.

    Args:
        dataset: A dataset job id (or unique prefix), a dataset folder, or an
            opened :class:`~digits_core.datasets.Dataset` (any object with the reader API).
        network: A built-in or plugin network name (``lenet``, ``alexnet``, ``googlenet``,
            ``unet``, ``fcn``, ``regression``), the path of a ``.py`` file defining
            ``build_model(input_shape, num_outputs, **params)``, or such a callable.
            ``None`` picks the task's default (LeNet, U-Net, regression CNN).
        name: The model job's name.
        jobs_dir: Jobs folder.
        callbacks: Keras callbacks (``keras.callbacks.Callback``; every method Keras documents
            is called, see :mod:`digits_core.engine.callbacks`); setting
            ``model.stop_training = True`` stops the run cooperatively (status Done).
        progress: Called with a dict (``epoch``, ``step``, ``total_steps``,
            ``loss``, ``eta_s``, ``phase``) after every step and validation. Raising
            in it aborts the run (status Aborted).
        on_job: Called with the new :class:`~digits_core.Job` as soon as it exists,
            before training starts (e.g. to keep its id for :func:`request_abort`).
        group: The job group (``job.json`` key ``group``; see :mod:`digits_core.groups`).
        sweep: For one point of a sweep, its swept values (``job.json`` key ``sweep``;
            :func:`digits_core.sweeps.train_sweep` sets it). Several values of an option
            are refused here: train them with :func:`digits_core.sweeps.train_sweep`.
        **options: :class:`~digits_core.engine.options.TrainingOptions` fields
            (``epochs``, ``batch_size``, ``solver``, ``learning_rate``, ``lr_policy``, ...,
            ``aug_flip`` ... for augmentation), and ``mlflow``: an MLflow tracking URI
            (default ``$MLFLOW_TRACKING_URI``; see :mod:`digits_core.engine.mlflow_log`).

    Returns:
        The model :class:`~digits_core.Job` (status Done, or Aborted after an abort).

    Raises:
        FormValidationError: Invalid options (nothing is created).
        TrainingError: The network or dataset is unusable, or training failed
            (e.g. the loss became NaN); the job is left with status Error.
    """
    from ..groups import normalize_group

    tracking = pop_tracking_uri(options)
    refuse_sweep(options)
    from .volume_train import train_volume, volume_dataset_folder  # volume runs have their own loop (issue 29)

    if volume_dataset_folder(dataset, jobs_dir) is not None:  # a DHWC dataset: unet3d / unet2.5d (issue 29)
        return train_volume(
            dataset,
            network,
            name,
            jobs_dir=jobs_dir,
            progress=progress,
            on_job=on_job,
            group=normalize_group(group),
            tracking=tracking,
            **options,
        )
    extra = {"group": normalize_group(group), "sweep": sweep or None}
    strat, reader, spec, opts, task = _plan(dataset, network, options, jobs_dir)
    job = _create_job(strat, reader, spec, name, opts, task, jobs_dir, {k: v for k, v in extra.items() if v})
    if on_job is not None:
        try:
            on_job(job)
        except BaseException:
            job.set_status(JobStatus.ABORTED, error="Stopped before training started: the on_job callback raised.")
            raise
    state = RunState(RunPlan(job=job, reader=reader, spec=spec, opts=opts, strat=strat, folder=job.path), task)
    return _execute(state, tracked_callbacks(callbacks, tracking, state), progress)


def train_existing_job(
    job: Job,
    dataset: Any,
    network: str | Callable | None = None,
    *,
    callbacks: list | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> Job:
    """Train into a model job that was created beforehand (e.g. queued by the web UI).

    Does exactly what :func:`train` does, with the job folder given instead
    of created, so a scheduler can show the job before its run starts.

    Args:
        job: A model :class:`~digits_core.Job` (status Initialized or Waiting).
        dataset, network, callbacks, progress, **options: As for :func:`train`.

    Returns:
        ``job``, with status Done (or Aborted after an abort).

    Raises:
        FormValidationError, TrainingError: As for :func:`train`.
    """
    from .volume_train import train_volume_into, volume_dataset_folder  # as in train()

    tracking = pop_tracking_uri(options)
    if volume_dataset_folder(dataset, job.path.parent) is not None:  # a DHWC dataset (issue 29)
        return train_volume_into(job, dataset, network, progress=progress, tracking=tracking, **options)
    strat, reader, spec, opts, task = _plan(dataset, network, options, job.path.parent)
    job.update(dataset_id=reader.id, network=spec.name, task=task.name, form_data=opts.to_dict())
    state = RunState(RunPlan(job=job, reader=reader, spec=spec, opts=opts, strat=strat, folder=job.path), task)
    return _execute(state, tracked_callbacks(callbacks, tracking, state), progress)


def resume_training(
    job: Any,
    *,
    jobs_dir=None,
    callbacks: list | None = None,
    progress: Progress | None = None,
    epochs: int | None = None,
) -> Job:
    """Continue an Aborted (or Error) model job from its last snapshot.

    Weights, optimizer state (including the step counter, hence the LR
    schedule position), epoch position and random streams are restored, so
    the result matches an uninterrupted run.

    Args:
        job: The model job (Job, id or folder).
        jobs_dir: Jobs folder.
        callbacks, progress: As for :func:`train`.
        epochs: Optionally train to a larger total number of epochs.

    Raises:
        JobStateError: The job has no snapshot to resume from, or another live
            process runs it (:class:`~digits_core.jobs.JobLockedError`; resuming
            works at once after that process died, there is no grace period).
    """
    job = jobio.load_model_job(job, jobs_dir)
    lock = job.acquire_lock()  # JobLockedError while another process owns the job
    try:
        return _resume_owned(job, jobs_dir, callbacks, progress, epochs)
    finally:
        lock.release()


def _resume_owned(job: Job, jobs_dir, callbacks, progress, epochs) -> Job:
    info = jobio.read_model_info(job.path)
    if not info.get("snapshots"):
        raise JobStateError(f'Model job "{job.id}" has no snapshot to resume from; start a new training.')
    opts = TrainingOptions.from_dict(info["options"])
    if epochs is not None:
        if int(epochs) < math.ceil(info["snapshots"][-1]["epoch"]):
            raise FormValidationError({"epochs": ["must not be below the epochs already trained"]}, "resume")
        opts.epochs = int(epochs)
    strat = make_strategy(opts.gpus)
    reader = _open_reader(info.get("dataset_path") or info["dataset_id"], jobs_dir)
    network = info["network"]
    if info.get("network_source") == "file":
        network = str(job.path / jobio.NETWORK_COPY)
    spec = resolve_network(network)
    (job.path / jobio.ABORT_FILE).unlink(missing_ok=True)
    state = RunState(
        RunPlan(
            job=job,
            reader=reader,
            spec=spec,
            opts=opts,
            strat=strat,
            folder=job.path,
            resume_from=info["snapshots"][-1],
        ),
        task_named(info["task"]),
    )
    return _execute(state, tracked_callbacks(callbacks, resumed_tracking_uri(info), state), progress)


def request_abort(job: Any, jobs_dir=None) -> None:
    """Ask a running training job to stop at its next step (status Aborted, last snapshot kept).

    Works across processes: it writes an ``abort`` file in the job folder,
    which the training loop checks every step.
    """
    folder = jobio.model_folder(job, jobs_dir)
    (folder / jobio.ABORT_FILE).write_text(str(time.time()), encoding="utf-8")
    ABORT_FLAGS.add(str(folder.resolve()))


# -- planning ----------------------------------------------------------------------


def _plan(dataset: Any, network, options: dict, jobs_dir):
    """Validate options, open the dataset, infer the task and resolve the network (no job yet)."""
    opts = TrainingOptions.from_kwargs(**options)  # reject bad options before any work
    checked = check_weights(network, options)  # a missing weights file fails before TensorFlow loads
    reader = _open_reader(dataset, jobs_dir)
    task = _task_of(opts, reader)
    check_network_kind(network, task.name, reader.id)  # a volume network on 2-D data: refused before TensorFlow loads
    strat = make_strategy(opts.gpus)
    if not network and task.name not in DEFAULT_NETWORK:  # raw arrays: only the user's network knows their meaning
        raise FormValidationError(
            {
                "network": [
                    f"{task.name} labels have no default network: give a network file (build_model returning the model "
                    "and its loss; see docs/porting-digits6.md)"
                ]
            },
            "training options",
        )
    spec = resolve_network(network or DEFAULT_NETWORK[task.name])
    check_network_task(spec, task.name, reader.id)  # before any job folder exists
    if not checked:
        check_weights(spec, options)
    opts = TrainingOptions.resolve(defaults_for(spec, task.name), options)
    check_hardware(opts.precision, opts.mixed_precision)  # float16 needs a GPU, bfloat16 native support
    check_network_input(spec, reader.feature_shape(), opts.crop_size, dict(opts.network_params))
    return strat, reader, spec, opts, task


def defaults_for(spec: NetworkSpec, task: str | None) -> dict:
    """A network's recommended options for ``task``: its ``defaults``, with the entries of its optional
    ``by_task`` table (task name to options, e.g. a backbone's segmentation schedule) for ``task`` laid over them."""
    defaults = {k: v for k, v in (spec.defaults or {}).items() if k != "by_task"}
    defaults.update(((spec.defaults or {}).get("by_task") or {}).get(task, {}))
    return defaults


def check_weights(network: Any, options: dict, *, download: bool = True) -> bool:
    """Resolve the ``weights`` option of a named network (see :mod:`.weights`); False when the network is not known yet.

    Raises:
        WeightsError: Unknown, missing or tampered weights, or weights given to a network that takes none.
    """
    if isinstance(network, NetworkSpec):
        spec = network
    elif network in VOLUME_NETWORKS:  # built by the volume trainer, no pretrained weights of their own
        resolve_weights(options.get("weights"), network, {}, download=download)
        return True
    elif isinstance(network, str) and network and not network.endswith(".py") and not Path(network).exists():
        spec = resolve_network(network)  # a name: plugin metadata only, nothing built
    else:
        return False
    resolve_weights(options.get("weights") or spec.defaults.get("weights"), spec.name, spec.weights, download=download)
    return True


def _task_of(opts: TrainingOptions, reader) -> Task:
    if opts.task:
        return task_named(opts.task)
    task = task_for_label_kind(reader.label_kind)
    if task is None:
        raise TrainingError(f'Dataset "{reader.id}" has labels of kind "{reader.label_kind}"; pass task=...')
    return task


def _open_reader(dataset: Any, jobs_dir):
    if hasattr(dataset, "read_batch") and hasattr(dataset, "label_kind"):
        return dataset
    from ..datasets import open_dataset  # the datasets package imports the engine's pipeline helpers

    return open_dataset(str(dataset), jobs_dir=jobs_dir)


def _create_job(strat, reader, spec: NetworkSpec, name, opts, task: Task, jobs_dir, extra: dict) -> Job:
    fields = dict(dataset_id=reader.id, network=spec.name, task=task.name, form_data=opts.to_dict(), **extra)
    if strat.is_chief:  # owned from creation: a kill before Running leaves an Aborted job, not an Initialized one
        return create_model_record(name or f"{spec.name}-{reader.id}", jobs_dir=jobs_dir, hold=True, **fields)
    scratch = tempfile.mkdtemp(prefix=f"digits-worker{strat.worker_index}-")
    job = create_model_record(name or spec.name, jobs_dir=scratch, **fields)
    job.update(scratch=scratch)
    return job


# -- the life cycle of a run -------------------------------------------------------


def _execute(state: RunState, callbacks: list | None, progress: Progress | None) -> Job:
    """Run a model job to its end: status Running → Done / Aborted / Error, hooks, clean-up."""
    job, folder = state.job, state.folder
    abort = AbortSignal(folder)
    status, error = JobStatus.DONE, None
    loop: TrainingLoop | None = None
    writer = None
    job.set_status(JobStatus.RUNNING, reopen=state.resume_from is not None)  # a resume reopens a finished job
    old_handlers = _install_signals(abort)
    mark("job set-up")
    try:
        prepare_run(state)
        writer = jobio.MetricsWriter(
            folder, enabled=state.strat.is_chief, resume_step=state.start_step if state.resume_from else None
        )
        mark("metrics writes")
        heartbeat = _heartbeat(state)
        heartbeat()
        loop = TrainingLoop(state, writer, list(callbacks or []) + _hook_callbacks(job), progress, abort, heartbeat)
        loop.run()
        if abort.reason:
            status = JobStatus.ABORTED
        elif loop.stopped_early and (folder / jobio.PRUNE_FILE).is_file():
            status = JobStatus.STOPPED_EARLY  # a tuning scheduler pruned the trial (digits_core.sweeps.tune)
    except DigitsError as exc:
        status, error = JobStatus.ERROR, exc
    except KeyboardInterrupt:  # a second stop signal: Aborted now, the last snapshot kept
        status = JobStatus.ABORTED
        abort.reason = abort.reason or "interrupted"
    except Exception as exc:  # noqa: BLE001 - any failure ends the job in Error
        logger.exception("training failed")
        full = disk_error_message(exc, state.folder.parent)  # a record write (model.json, metrics) on a full disk
        status, error = JobStatus.ERROR, TrainingError(full or f"Training failed: {type(exc).__name__}: {exc}")
    finally:
        _restore_signals(old_handlers)
        if writer:
            writer.close()
    last_logs = dict(loop.last_logs) if loop else {}
    if error is not None and loop is not None:
        loop.cb.failed(last_logs)
    message = str(error) if error else (f"Aborted: {abort.reason}" if status is JobStatus.ABORTED else None)
    early = loop.early if loop is not None and loop.early is not None and loop.early.stopped_epoch else None
    _finish_info(state, status, message, last_logs, bool(loop and loop.stopped_early), early)
    note = _status_note(folder, status, early)
    if note:  # what the final status means: "stopped early at epoch N (best ...)", "pruned at rung 3: ..."
        job.finish(status, error=message, status_note=note)
    else:
        job.finish(status, error=message)
    finish_tracking(state, status.value)  # the MLflow run's end, once the job's final status is known
    registry.call_hook("digits_training_finished", job=job, status=status.value, logs=last_logs)
    (folder / "heartbeat").unlink(missing_ok=True)
    scratch = job.data.get("scratch")
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    mark("job finish")
    if error is not None:
        raise error
    return job


def _hook_callbacks(job: Job) -> list:
    found: list = []
    for result in registry.call_hook("digits_training_callbacks", job=job):
        found.extend(result if isinstance(result, (list, tuple)) else [result])
    return found


def _heartbeat(state: RunState) -> Callable[[], None]:
    last = [float("-inf")]  # at most one write a second: a small set's log window closes every step (issue 44)

    def beat() -> None:
        now = time.time()
        if state.strat.is_chief and now - last[0] >= 1.0:
            last[0] = now
            (state.folder / "heartbeat").write_text(str(now), encoding="utf-8")

    return beat


def _status_note(folder, status: JobStatus, early) -> str | None:
    if status is JobStatus.STOPPED_EARLY:
        pruned = jobio.read_prune(folder)
        return f"pruned at ASHA's rung of epoch {pruned.get('rung')}: {pruned.get('reason')}"
    if early is not None and status is JobStatus.DONE:
        return early.note
    return None


def _finish_info(
    state: RunState, status: JobStatus, message: str | None, logs: dict, stopped_early: bool, early=None
) -> None:
    if not state.strat.is_chief or not (state.folder / MODEL_FILE).is_file():
        return
    # a metric that is not a number yet (a detector's mAP before it finds a box) is null: JSON has no NaN
    final = {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in logs.items()}
    result: ModelRecord = {"status": status.value, "error": message, "final_metrics": final}
    if stopped_early:
        result["stopped_early"] = True
    if early is not None:
        result["early_stopping"] = early.summary()
    update_model_record(state.folder, **result)
    write_run_hparams(state.folder, dict(jobio.read_model_info(state.folder)), state.job.id)


def _install_signals(abort: AbortSignal) -> dict:
    """SIGTERM/SIGINT/SIGHUP abort the run cooperatively (main thread only); returns the handlers to restore.

    The first signal stops the run at its next step (or validation batch); a second one stops it at once.
    """
    old: dict = {}
    if threading.current_thread() is not threading.main_thread():
        return old

    def handler(signum, frame):
        if abort.reason:  # a second signal: stop now, not at the next step
            raise KeyboardInterrupt
        abort.reason = signal_reason(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    return old


def _restore_signals(old: dict) -> None:
    for sig, handler in old.items():
        signal.signal(sig, handler)
