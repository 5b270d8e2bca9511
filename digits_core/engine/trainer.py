"""The training run: one code path for the API, the CLI and the web UI.

:func:`train` creates a model job and trains it; :func:`resume_training`
continues one from its last snapshot; :func:`request_abort` asks a running
job (in this or another process) to stop at its next step.

The loop is a plain ``tf.function`` train step driven from Python over a
tf.data iterator, inside a ``tf.distribute`` strategy. Each step checks for
abort requests and non-finite losses; metrics stream to ``metrics.jsonl``
and TensorBoard; validation and snapshots happen every
``validation_interval`` / ``snapshot_interval`` epochs (fractions allowed,
rounded to whole steps).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import DigitsError, FormValidationError, JobStateError, TrainingError
from ..jobs import Job, JobStatus
from ..plugin_registry import registry
from . import jobio
from .augmentation import check_augmentation
from .losses import DEFAULT_LOSS, auto_class_weights, make_loss, summarize_val, train_metric, val_stats
from .networks import DEFAULT_NETWORK, NetworkSpec, resolve_network
from .networks.custom import call_builder, load_network_module
from .options import TrainingOptions
from .pipeline import Layout, StageSource, should_preload, train_dataset, val_dataset
from .preprocessing import Preprocessing, compute_scale

logger = logging.getLogger("digits_core.engine")

TASK_OF_LABEL = {"class": "classification", "mask": "segmentation", "regression": "regression"}
_abort_flags: set[str] = set()


class _Aborted(Exception):
    pass


# -- public API -------------------------------------------------------------------


def train(dataset: Any, network: str | Callable | None = None, name: str | None = None, *,
          jobs_dir=None, callbacks: list | None = None, progress: Callable[[dict], None] | None = None,
          **options: Any) -> Job:
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
        callbacks: Keras callbacks (``keras.callbacks.Callback``); setting
            ``model.stop_training = True`` stops the run cooperatively (status Done).
        progress: Called with a dict (``epoch``, ``step``, ``total_steps``,
            ``loss``, ``eta_s``, ``phase``) after every step and validation.
        **options: :class:`~digits_core.engine.options.TrainingOptions` fields
            (``epochs``, ``batch_size``, ``solver``, ``learning_rate``, ``lr_policy``, ...,
            ``aug_flip`` ... for augmentation).

    Returns:
        The model :class:`~digits_core.Job` (status Done, or Aborted after an abort).

    Raises:
        FormValidationError: Invalid options (nothing is created).
        TrainingError: The network or dataset is unusable, or training failed
            (e.g. the loss became NaN); the job is left with status Error.
    """
    strat, reader, spec, opts, task = _plan(dataset, network, options, jobs_dir)
    job = _create_job(strat, reader, spec, name, opts, task, jobs_dir)
    run = _Run(job, reader, spec, opts, task, strat, callbacks=callbacks, progress=progress)
    return run.execute()


def train_existing_job(job: Job, dataset: Any, network: str | Callable | None = None, *,
                       callbacks: list | None = None, progress: Callable[[dict], None] | None = None,
                       **options: Any) -> Job:
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
    strat, reader, spec, opts, task = _plan(dataset, network, options, job.path.parent)
    job.data.update(dataset_id=reader.id, network=spec.name, task=task, form_data=opts.to_dict())
    job.save()
    return _Run(job, reader, spec, opts, task, strat, callbacks=callbacks, progress=progress).execute()


def _plan(dataset: Any, network, options: dict, jobs_dir):
    """Validate options, open the dataset, infer the task and resolve the network (no job yet)."""
    opts = TrainingOptions.from_kwargs(**options)  # reject bad options before any work
    strat = _strategy(opts)
    reader = _open_reader(dataset, jobs_dir)
    task = opts.task or TASK_OF_LABEL.get(reader.label_kind)
    if task is None:
        raise TrainingError(f'Dataset "{reader.id}" has labels of kind "{reader.label_kind}"; pass task=...')
    spec = resolve_network(network or DEFAULT_NETWORK[task])
    given = {k: v for k, v in options.items() if v is not None}
    opts = TrainingOptions.from_kwargs(**{**spec.defaults, **given})
    return strat, reader, spec, opts, task


def resume_training(job: Any, *, jobs_dir=None, callbacks: list | None = None,
                    progress: Callable[[dict], None] | None = None, epochs: int | None = None) -> Job:
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
    strat = _strategy(opts)
    reader = _open_reader(info.get("dataset_path") or info["dataset_id"], jobs_dir)
    network = info["network"]
    if info.get("network_source") == "file":
        network = str(job.path / jobio.NETWORK_COPY)
    spec = resolve_network(network)
    (job.path / jobio.ABORT_FILE).unlink(missing_ok=True)
    run = _Run(job, reader, spec, opts, info["task"], strat, callbacks=callbacks, progress=progress,
               resume_from=info["snapshots"][-1])
    return run.execute()


def request_abort(job: Any, jobs_dir=None) -> None:
    """Ask a running training job to stop at its next step (status Aborted, last snapshot kept).

    Works across processes: it writes an ``abort`` file in the job folder,
    which the training loop checks every step.
    """
    folder = jobio.model_folder(job, jobs_dir)
    (folder / jobio.ABORT_FILE).write_text(str(time.time()), encoding="utf-8")
    _abort_flags.add(str(folder.resolve()))


# -- helpers ------------------------------------------------------------------------------


def _strategy(opts: TrainingOptions):
    from .distribute import make_strategy

    return make_strategy(opts.gpus)


def _open_reader(dataset: Any, jobs_dir):
    if hasattr(dataset, "read_batch") and hasattr(dataset, "label_kind"):
        return dataset
    from ..datasets import open_dataset

    return open_dataset(str(dataset), jobs_dir=jobs_dir)


def _create_job(strat, reader, spec: NetworkSpec, name, opts, task, jobs_dir) -> Job:
    fields = dict(dataset_id=reader.id, network=spec.name, task=task, form_data=opts.to_dict())
    if strat.is_chief:
        return Job.create("model", name or f"{spec.name}-{reader.id}", jobs_dir=jobs_dir, **fields)
    scratch = tempfile.mkdtemp(prefix=f"digits-worker{strat.worker_index}-")
    job = Job.create("model", name or spec.name, jobs_dir=scratch, **fields)
    job.data["scratch"] = scratch
    return job


def _num_outputs(task: str, reader, source: StageSource) -> int:
    if task == "regression":
        return int(np.prod(source.label_shape)) if source.label_shape else 1
    for names in (reader.class_labels, reader.color_palette):
        if names:
            return len(names)
    labels = source.labels if source.preload else source.read_labels(np.arange(min(source.n, 256)))
    return int(np.max(labels)) + 1


class _Run:
    """One training run of a model job (new or resumed)."""

    def __init__(self, job, reader, spec, opts, task, strat, *, callbacks=None, progress=None, resume_from=None):
        self.job, self.reader, self.spec, self.opts, self.task = job, reader, spec, opts, task
        self.strat = strat
        self.user_callbacks = list(callbacks or [])
        self.progress = progress
        self.resume_from = resume_from
        self.folder = job.path
        self.writer = None
        self.model = None
        self.last_logs: dict = {}
        self.abort_reason: str | None = None
        self._old_handlers: dict = {}

    # -- top level --------------------------------------------------------------------

    def execute(self) -> Job:
        status, error = JobStatus.DONE, None
        self.job.set_status(JobStatus.RUNNING)
        self._install_signals()
        try:
            self._setup()
            self._loop()
            if self.abort_reason:
                status = JobStatus.ABORTED
        except _Aborted:
            status = JobStatus.ABORTED
        except DigitsError as exc:
            status, error = JobStatus.ERROR, exc
        except Exception as exc:  # noqa: BLE001 - any failure ends the job in Error
            logger.exception("training failed")
            status, error = JobStatus.ERROR, TrainingError(f"Training failed: {type(exc).__name__}: {exc}")
        finally:
            self._restore_signals()
            if self.writer:
                self.writer.close()
        message = str(error) if error else (f"Aborted: {self.abort_reason}" if status is JobStatus.ABORTED else None)
        self._finish_info(status, message)
        self.job.set_status(status, error=message)
        registry.call_hook("digits_training_finished", job=self.job, status=status.value, logs=dict(self.last_logs))
        (self.folder / "heartbeat").unlink(missing_ok=True)
        if self.job.data.get("scratch"):
            shutil.rmtree(self.job.data["scratch"], ignore_errors=True)
        if error is not None:
            raise error
        return self.job

    # -- setup ------------------------------------------------------------------------

    def _setup(self) -> None:
        import keras
        import tensorflow as tf

        opts, reader, task = self.opts, self.reader, self.task
        seed = opts.seed
        if seed is None:
            seed = self._stored_seed()
        self.seed = int(seed)
        keras.utils.set_random_seed(self.seed)
        if opts.seed is not None:
            tf.config.experimental.enable_op_determinism()

        stages = reader.stages
        if "train" not in stages:
            raise TrainingError(f'Dataset "{reader.id}" has no training images.')
        self.train_src = StageSource(reader, "train",
                                     should_preload(reader, "train", opts.preload, opts.preload_limit_mb))
        self.val_src = None
        if "val" in stages and opts.validation_interval > 0:
            self.val_src = StageSource(reader, "val", should_preload(reader, "val", opts.preload, opts.preload_limit_mb))

        feature_shape = tuple(reader.feature_shape())
        if opts.crop_size and opts.crop_size > min(feature_shape[:2]):
            raise FormValidationError({"crop_size": [f"{opts.crop_size} is larger than the images "
                                                     f"({feature_shape[0]}x{feature_shape[1]})"]}, "training options")
        mean = reader.mean() if opts.mean_subtraction != "none" else None
        if opts.mean_subtraction != "none" and mean is None:
            raise TrainingError(f'Dataset "{reader.id}" has no mean image; use mean_subtraction="none".')
        if self.resume_from:
            self.prep = Preprocessing.load(self.folder)
        else:
            mean_arr = 0.0 if mean is None else (
                mean if opts.mean_subtraction == "image" else mean.reshape(-1, mean.shape[-1]).mean(axis=0))
            scale = compute_scale(reader.feature_dtype(), self.train_src.sample(seed=self.seed), mean_arr)
            self.prep = Preprocessing(opts.mean_subtraction, mean, scale, opts.crop_size, feature_shape)
        check_augmentation(opts.augmentation, self.prep.input_shape[:2], feature_shape[2])

        self.num_outputs = _num_outputs(task, reader, self.train_src)
        self.class_weights = None
        if task != "regression" and opts.class_weights is not None:
            if opts.class_weights == "auto":
                labels = self.train_src.labels if self.train_src.preload else \
                    self.train_src.read_labels(np.arange(min(self.train_src.n, 4096)))
                self.class_weights = auto_class_weights(labels, self.num_outputs)
            else:
                if len(opts.class_weights) != self.num_outputs:
                    raise FormValidationError({"class_weights": [
                        f"give {self.num_outputs} weights (one per class), not {len(opts.class_weights)}"]},
                        "training options")
                self.class_weights = list(opts.class_weights)

        batch = opts.batch_size or self.spec.batch_size
        self.layout = Layout(batch, num_pipelines=self.strat.num_workers, pipeline_id=self.strat.worker_index,
                             replicas=self.strat.replicas)
        if batch < self.strat.replicas:
            raise FormValidationError({"batch_size": [f"must be at least the number of replicas ({self.strat.replicas})"]},
                                      "training options")
        self.steps_per_epoch = self.layout.steps_per_epoch(self.train_src.n)
        self.total_steps = self.steps_per_epoch * opts.epochs
        self.val_every = self._interval_steps(opts.validation_interval) if self.val_src else 0
        self.snap_every = self._interval_steps(opts.snapshot_interval) if opts.snapshot_interval > 0 else 0
        self.log_every = max(1, self.steps_per_epoch // opts.log_every)

        with self.strat.strategy.scope():
            self._build_model()
            from .solvers import optimizer_for

            self.optimizer = optimizer_for(opts, self.total_steps)
            self.optimizer.build(self.model.trainable_variables)
            self.start_step = 0
            if self.resume_from:
                self._restore_state(self.resume_from)
        self.loss_fn = make_loss(task, opts.loss or DEFAULT_LOSS[task], self.num_outputs, self.class_weights,
                                 self.custom_loss)
        self.writer = jobio.MetricsWriter(self.folder, enabled=self.strat.is_chief)
        if not self.resume_from:
            self._write_initial_info()
        elif self.strat.is_chief:
            info = jobio.read_model_info(self.folder)
            info.update(options=self.opts.to_dict(), total_steps=self.total_steps, status="Running",
                        resumed_from=self.resume_from["file"])
            jobio.write_model_info(self.folder, info)
        self._heartbeat()

    def _stored_seed(self) -> int:
        if self.resume_from:
            return int(jobio.read_model_info(self.folder)["seed"])
        cluster = None
        from .distribute import cluster_from_env

        cluster = cluster_from_env()
        if cluster is not None:  # every worker must agree on the seed
            return abs(hash(str(sorted(cluster["cluster"].items())))) % (2 ** 31)
        return int.from_bytes(os.urandom(4), "little") % (2 ** 31)

    def _interval_steps(self, interval_epochs: float) -> int:
        return max(1, int(round(interval_epochs * self.steps_per_epoch)))

    def _build_model(self) -> None:
        import keras

        self.custom_loss = None
        self.custom_metrics = None
        if self.resume_from:
            self.model = keras.models.load_model(self.folder / jobio.SNAPSHOT_DIR / self.resume_from["file"],
                                                 compile=False, safe_mode=False)
        else:
            model, loss, metrics = call_builder(self.spec.build, self.prep.input_shape, self.num_outputs,
                                                dict(self.opts.network_params), origin=self.spec.name,
                                                path=self.spec.path)
            self.model = model
            self.custom_loss, self.custom_metrics = loss, metrics
            self.fine_tune_report = self._fine_tune() if self.opts.pretrained else None
        if self.resume_from and self.spec.source == "file":
            # re-run the builder only to recover a custom loss (weights come from the snapshot)
            _, self.custom_loss, self.custom_metrics = call_builder(self.spec.build, self.prep.input_shape, self.num_outputs,
                                                  dict(self.opts.network_params), origin=self.spec.name,
                                                  path=self.spec.path)
        self._check_model()

    def _check_model(self) -> None:
        model, task = self.model, self.task
        where = self.spec.path or self.spec.name
        in_shape = tuple(model.inputs[0].shape[1:]) if model.inputs else None
        if in_shape and tuple(d for d in in_shape) != tuple(self.prep.input_shape):
            if any(d is not None and d != e for d, e in zip(in_shape, self.prep.input_shape)) or len(in_shape) != 3:
                raise TrainingError(f"{where}: the model's input shape {in_shape} does not match the "
                                    f"dataset's (cropped) images {tuple(self.prep.input_shape)}.")
        out_shape = tuple(model.outputs[0].shape[1:]) if model.outputs else ()
        if task == "classification":
            expected = (self.num_outputs,)
        elif task == "segmentation":
            expected = (*self.prep.input_shape[:2], self.num_outputs)
        else:
            expected = (self.num_outputs,)
        self.standard_output = out_shape == expected
        if not self.standard_output and self.custom_loss is None:
            raise TrainingError(
                f"{where}: the model's output shape {out_shape} does not fit {task} with "
                f"{self.num_outputs} outputs (expected {expected}); return a matching model, or "
                "(model, loss, metrics) with your own loss.")

    def _fine_tune(self) -> dict:
        """Copy weights by layer name from a previous model job or a Keras file."""
        import keras

        source = str(self.opts.pretrained)
        path = Path(source).expanduser()
        try:
            if path.is_file() and source.endswith(".weights.h5"):
                raise TrainingError(
                    f'pretrained "{source}": Keras 3 ".weights.h5" files store weights by position, not by layer '
                    'name; pass the full model saved as ".keras" (model.save("net.keras")), a Keras 2 ".h5" '
                    "weights file, or a model job id.")
            if path.is_file() and source.endswith(".h5"):
                donor_weights = _read_legacy_h5(path)
            else:
                if path.is_file():
                    donor = keras.models.load_model(path, compile=False, safe_mode=False)
                else:
                    donor = load_snapshot(source, jobs_dir=self.folder.parent)
                donor_weights = {layer.name: layer.get_weights() for layer in donor.layers if layer.weights}
        except DigitsError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise TrainingError(f'pretrained "{source}": cannot read weights: {type(exc).__name__}: {exc}') from exc
        loaded, mismatched, missing = [], [], []
        for layer in self.model.layers:
            if not layer.weights:
                continue
            weights = donor_weights.get(layer.name)
            if weights is None:
                missing.append(layer.name)
                continue
            if [tuple(w.shape) for w in weights] != [tuple(w.shape) for w in layer.get_weights()]:
                mismatched.append(layer.name)
                continue
            layer.set_weights(weights)
            loaded.append(layer.name)
        if not loaded:
            raise TrainingError(f'pretrained "{source}": no layer name and shape matches the network '
                                f"(network layers: {', '.join(l.name for l in self.model.layers if l.weights)}).")
        report = {"source": source, "loaded": loaded, "shape_mismatch": mismatched, "not_in_source": missing}
        logger.info("fine-tune: loaded %d layers from %s", len(loaded), source)
        return report

    def _restore_state(self, snap: dict) -> None:
        state = np.load(self.folder / jobio.SNAPSHOT_DIR / snap["state"])
        arrays = [state[f"opt_{i}"] for i in range(int(state["count"]))]
        variables = self.optimizer.variables
        if len(arrays) != len(variables):
            raise TrainingError(f"Snapshot {snap['state']} has {len(arrays)} optimizer variables, the optimizer "
                                f"{len(variables)}; was the solver changed?")
        for var, value in zip(variables, arrays):
            var.assign(value)
        self.start_step = int(snap["step"])

    def _write_initial_info(self) -> None:
        if not self.strat.is_chief:
            return
        info = {
            "job_id": self.job.id,
            "network": self.spec.name,
            "network_source": self.spec.source,
            "dataset_id": self.reader.id,
            "dataset_path": str(getattr(self.reader, "path", "")) or None,
            "dataset_plugin": getattr(self.reader, "plugin_id", None),
            "task": self.task,
            "options": self.opts.to_dict(),
            "seed": self.seed,
            "batch_size": self.layout.global_batch,
            "steps_per_epoch": self.steps_per_epoch,
            "total_steps": self.total_steps,
            "input_shape": list(self.prep.input_shape),
            "feature_shape": list(self.prep.feature_shape),
            "feature_dtype": str(self.reader.feature_dtype()),
            "num_outputs": self.num_outputs,
            "class_labels": self.reader.class_labels,
            "color_palette": self.reader.color_palette,
            "mean_subtraction": self.prep.mean_subtraction,
            "crop_size": self.prep.crop_size,
            "preprocessing": self.prep.save(self.folder),
            "loss": self.opts.loss or (DEFAULT_LOSS[self.task] if self.custom_loss is None else "custom"),
            "class_weights": self.class_weights,
            "lr_policy": self.opts.lr_policy_params(),
            "parameters": int(self.model.count_params()),
            "distributed": self.strat.describe(),
            "train_count": self.train_src.n,
            "val_count": self.val_src.n if self.val_src else 0,
            "input_pipeline": "preload" if self.train_src.preload else "stream",
            "fine_tune": getattr(self, "fine_tune_report", None),
            "snapshots": [],
            "best_epoch": None,
            "best_metric": None,
            "last_epoch": 0,
            "status": "Running",
        }
        if self.spec.source == "file" and self.spec.path:
            shutil.copyfile(self.spec.path, self.folder / jobio.NETWORK_COPY)
        jobio.write_model_info(self.folder, info)

    # -- the loop -----------------------------------------------------------------------

    def _make_functions(self):
        import tensorflow as tf

        strategy = self.strat.strategy
        model, optimizer, loss_fn = self.model, self.optimizer, self.loss_fn
        replicas = float(self.strat.replicas)
        task, standard, k = self.task, self.standard_output, self.num_outputs

        def step(x, y, stop):
            with tf.GradientTape() as tape:
                pred = model(x, training=True)
                loss = loss_fn(y, pred)
                total = loss + tf.add_n(model.losses) if model.losses else loss
                scaled = total / replicas
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss, train_metric(task, y, pred, standard), stop

        @tf.function(reduce_retracing=True)
        def train_step(x, y, stop):
            # ``stop`` is this worker's abort flag; summed over workers, so an abort on any
            # worker (signal, or the abort file on the chief) stops every worker after the same step
            loss, metric, stop = strategy.run(step, args=(x, y, stop))
            mean, total = tf.distribute.ReduceOp.MEAN, tf.distribute.ReduceOp.SUM
            return (strategy.reduce(mean, loss, axis=None), strategy.reduce(mean, metric, axis=None),
                    strategy.reduce(total, stop, axis=None))

        extra = _metric_functions(self.custom_metrics)

        def vstep(x, y, valid):
            pred = model(x, training=False)
            loss = loss_fn(y, pred, valid)
            stats = val_stats(task, k, y, pred, valid, loss, standard)
            for name, fn in extra:
                values = tf.reshape(tf.cast(fn(y, pred), tf.float32), [tf.shape(pred)[0], -1])
                stats[f"custom_{name}"] = tf.reduce_sum(tf.reduce_mean(values, axis=1) * valid)
            return stats

        @tf.function(reduce_retracing=True)
        def val_step(x, y, valid):
            stats = strategy.run(vstep, args=(x, y, valid))
            return {key: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for key, v in stats.items()}

        return train_step, val_step

    def _distribute(self, make):
        strategy = self.strat.strategy
        if self.strat.kind == "default":
            import tensorflow as tf

            return make(tf.distribute.InputContext())
        return strategy.distribute_datasets_from_function(make)

    def _loop(self) -> None:
        import keras
        import tensorflow as tf

        opts = self.opts
        train_step, val_step = self._make_functions()
        start_epoch, skip = divmod(self.start_step, self.steps_per_epoch)
        train_ds = self._distribute(lambda ctx: train_dataset(
            self.train_src, layout=self.layout, prep=self.prep, aug=opts.augmentation, seed=self.seed,
            shuffle=opts.shuffle, start_epoch=start_epoch, epochs=opts.epochs, skip_batches=skip))
        if self.val_src:
            self.val_ds = self._distribute(lambda ctx: val_dataset(self.val_src, layout=self.layout, prep=self.prep)[0])
            self.val_steps = val_dataset(self.val_src, layout=self.layout, prep=self.prep)[1]

        hook_callbacks = []
        for result in registry.call_hook("digits_training_callbacks", job=self.job):
            hook_callbacks.extend(result if isinstance(result, (list, tuple)) else [result])
        callbacks = keras.callbacks.CallbackList(self.user_callbacks + hook_callbacks, model=self.model)
        self.model.stop_training = False
        has_callbacks = bool(self.user_callbacks or hook_callbacks)
        callbacks.on_train_begin()

        step = self.start_step
        spe = self.steps_per_epoch
        iterator = iter(train_ds)
        window_loss = window_metric = 0.0
        window_n = 0
        window_images = 0
        window_start = time.perf_counter()
        run_start = time.perf_counter()
        epoch_loss = epoch_n = 0.0
        abort_path = self.folder / jobio.ABORT_FILE
        folder_key = str(self.folder.resolve())
        if has_callbacks and step % spe == 0:
            callbacks.on_epoch_begin(step // spe)
        multi = self.strat.num_workers > 1
        flags = (tf.constant(0.0), tf.constant(1.0))
        while step < self.total_steps:
            if self.abort_reason is None and (abort_path.exists() or folder_key in _abort_flags):
                self.abort_reason = "abort requested"
            if self.abort_reason and not multi:
                _abort_flags.discard(folder_key)
                abort_path.unlink(missing_ok=True)
                return
            x, y = next(iterator)
            loss, metric, stop = train_step(x, y, flags[1 if self.abort_reason else 0])
            if multi and float(stop) > 0:  # every worker leaves after this same step
                self.abort_reason = self.abort_reason or "abort requested on another worker"
                _abort_flags.discard(folder_key)
                abort_path.unlink(missing_ok=True)
                return
            loss = float(loss)
            step += 1
            epoch = step / spe
            if not math.isfinite(loss):
                raise TrainingError(
                    f"Training diverged: the loss became {loss} at epoch {epoch:.2f} (step {step}). "
                    "Lower the learning rate, check the labels, or use a different solver.")
            batch_images = self.layout.global_batch if self.strat.replicas > 1 else int(x.shape[0])
            window_loss += loss
            window_metric += float(metric)
            window_n += 1
            window_images += batch_images
            epoch_loss += loss
            epoch_n += 1
            if has_callbacks:
                callbacks.on_train_batch_end(step - 1 - (step - 1) // spe * spe, {"loss": loss})
            end_of_epoch = step % spe == 0
            if step % self.log_every == 0 or end_of_epoch or step == self.total_steps:
                elapsed = time.perf_counter() - window_start
                values = {"loss": window_loss / window_n,
                          "lr": float(self._lr_at(step - 1)),
                          "images_per_sec": window_images / max(elapsed, 1e-9)}
                metric_name = "mae" if self.task == "regression" else "accuracy"
                if self.standard_output:
                    values[metric_name] = window_metric / window_n
                self.writer.write(epoch, step, values)
                self.last_logs.update(values)
                window_loss = window_metric = 0.0
                window_n = window_images = 0
                window_start = time.perf_counter()
                self._heartbeat()
            if self.val_every and (step % self.val_every == 0 or step == self.total_steps):
                self._validate(val_step, epoch, step)
            if self.snap_every and (step % self.snap_every == 0 or step == self.total_steps):
                self._snapshot(epoch, step)
            elif step == self.total_steps:
                self._snapshot(epoch, step)
            if self.progress:
                done = step - self.start_step
                rate = (time.perf_counter() - run_start) / max(done, 1)
                self.progress({"phase": "train", "epoch": epoch, "step": step, "total_steps": self.total_steps,
                               "epochs": opts.epochs, "loss": loss, "eta_s": rate * (self.total_steps - step)})
            if end_of_epoch and has_callbacks:
                logs = {k: v for k, v in self.last_logs.items()}
                logs["loss"] = epoch_loss / max(epoch_n, 1)
                callbacks.on_epoch_end(step // spe - 1, logs)
                if step < self.total_steps and not self.model.stop_training:
                    callbacks.on_epoch_begin(step // spe)
            if end_of_epoch:
                epoch_loss = epoch_n = 0.0
            if self.model.stop_training:
                self.stopped_early = True
                if not (self.snap_every and step % self.snap_every == 0):
                    self._snapshot(epoch, step)
                break
        callbacks.on_train_end(dict(self.last_logs))
        self.job.data["worker_report"] = {
            "worker_index": self.strat.worker_index, "num_workers": self.strat.num_workers,
            "steps": step - self.start_step, "images_per_epoch": len(range(self.strat.worker_index,
                                                                             self.train_src.n, self.strat.num_workers)),
        }

    def _lr_at(self, step: int) -> float:
        schedule = self.optimizer._learning_rate
        if callable(schedule):
            return float(schedule(step))
        return float(self.optimizer.learning_rate)

    def _validate(self, val_step, epoch: float, step: int) -> None:
        sums: dict = {}
        for x, y, valid in self.val_ds:
            stats = val_step(x, y, valid)
            for key, value in stats.items():
                value = np.asarray(value, np.float64)
                sums[key] = sums.get(key, 0) + value
        values = summarize_val(self.task, sums)
        for key in sums:
            if key.startswith("custom_"):
                values[f"val_{key[len('custom_'):]}"] = float(sums[key]) / max(float(sums["count"]), 1.0)
        if not math.isfinite(values["val_loss"]):
            raise TrainingError(f"Training diverged: the validation loss is {values['val_loss']} at epoch "
                                f"{epoch:.2f}. Lower the learning rate.")
        self.writer.write(epoch, step, values)
        self.last_logs.update(values)
        key, better = self._best_key()
        if key in values and self.strat.is_chief:
            info = jobio.read_model_info(self.folder)
            if info.get("best_metric") is None or better(values[key], info["best_metric"]):
                info["best_epoch"], info["best_metric"], info["best_metric_name"] = round(epoch, 4), values[key], key
                jobio.write_model_info(self.folder, info)
        if self.progress:
            self.progress({"phase": "val", "epoch": epoch, "step": step, "total_steps": self.total_steps, **values})

    def _best_key(self):
        if self.task == "segmentation" and self.standard_output:
            return "val_dice", lambda a, b: a > b
        if self.task == "classification" and self.standard_output:
            return "val_accuracy", lambda a, b: a > b
        return "val_loss", lambda a, b: a < b

    def _snapshot(self, epoch: float, step: int) -> None:
        if not self.strat.is_chief:
            return
        snap_dir = self.folder / jobio.SNAPSHOT_DIR
        snap_dir.mkdir(exist_ok=True)
        tag = jobio.epoch_tag(epoch)
        model_file, state_file = f"epoch-{tag}.keras", f"epoch-{tag}.state.npz"
        tmp = snap_dir / f".tmp-{model_file}"
        self.model.save(tmp)
        os.replace(tmp, snap_dir / model_file)
        arrays = {f"opt_{i}": np.asarray(v.numpy()) for i, v in enumerate(self.optimizer.variables)}
        with open(snap_dir / f".tmp-{state_file}", "wb") as handle:
            np.savez(handle, count=len(arrays), step=step, **arrays)
        os.replace(snap_dir / f".tmp-{state_file}", snap_dir / state_file)
        info = jobio.read_model_info(self.folder)
        info["snapshots"] = [s for s in info["snapshots"] if s["file"] != model_file]
        info["snapshots"].append({"epoch": round(epoch, 4), "step": step, "file": model_file, "state": state_file})
        info["last_epoch"] = round(epoch, 4)
        jobio.write_model_info(self.folder, info)

    def _finish_info(self, status: JobStatus, message: str | None) -> None:
        if not self.strat.is_chief or not (self.folder / jobio.MODEL_FILE).is_file():
            return
        info = jobio.read_model_info(self.folder)
        info["status"] = status.value
        info["error"] = message
        info["final_metrics"] = dict(self.last_logs)
        if getattr(self, "stopped_early", False):
            info["stopped_early"] = True
        jobio.write_model_info(self.folder, info)

    def _heartbeat(self) -> None:
        if self.strat.is_chief:
            (self.folder / "heartbeat").write_text(str(time.time()), encoding="utf-8")

    # -- signals ---------------------------------------------------------------------------

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum, frame):
            self.abort_reason = f"received {signal.Signals(signum).name}"

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):
                pass

    def _restore_signals(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers = {}


def _metric_functions(metrics) -> list:
    """``(name, fn(y_true, y_pred) -> per-sample values)`` for a custom network's metrics."""
    import keras

    found = []
    for metric in metrics or []:
        if isinstance(metric, str):
            fn = keras.metrics.get(metric)
            name = metric
        else:
            fn, name = metric, getattr(metric, "__name__", None) or getattr(metric, "name", "metric")
        if isinstance(fn, keras.metrics.Metric):  # e.g. "mae" -> MeanAbsoluteError: use its per-sample function
            fn = getattr(fn, "_fn", None)
            if fn is None:
                raise TrainingError(f'Metric "{name}": pass a function or a name such as "mae", not a stateful '
                                    "Metric object.")
        found.append((str(name), fn))
    return found


def _read_legacy_h5(path: Path) -> dict:
    """Layer name -> weight arrays from a Keras 2 HDF5 file (``save_weights("x.h5")`` or a full ``.h5`` model)."""
    import h5py

    found: dict[str, list] = {}
    with h5py.File(path, "r") as handle:
        root = handle["model_weights"] if "model_weights" in handle else handle
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in root.attrs.get("layer_names", [])]
        if not names:
            raise TrainingError(f"{path}: not a Keras 2 HDF5 weights file (no layer_names attribute).")
        for name in names:
            group = root[name]
            weight_names = [w.decode() if isinstance(w, bytes) else str(w) for w in group.attrs.get("weight_names", [])]
            if weight_names:
                found[name] = [group[w][()] for w in weight_names]
    return found


def load_snapshot(job: Any, epoch: float | None = None, *, jobs_dir=None):
    """Load a snapshot of a model job as a Keras model.

    Args:
        job: The model job (Job, id or folder).
        epoch: The snapshot's epoch; ``None`` for the last one.
        jobs_dir: Jobs folder.

    Returns:
        The ``keras.Model`` (not compiled). Its inputs expect data prepared with
        :class:`~digits_core.engine.preprocessing.Preprocessing` (``Preprocessing.load(job)``).

    Raises:
        TrainingError: The job has no snapshot (at that epoch).
    """
    import keras

    folder = jobio.model_folder(job, jobs_dir)
    info = jobio.read_model_info(folder)
    snaps = info.get("snapshots") or []
    if not snaps:
        raise TrainingError(f"Model job {folder.name} has no snapshot yet.")
    if epoch is None:
        snap = snaps[-1]
    else:
        matches = [s for s in snaps if abs(float(s["epoch"]) - float(epoch)) < 1e-6]
        if not matches:
            available = ", ".join(f"{s['epoch']:g}" for s in snaps)
            raise TrainingError(f"Model job {folder.name} has no snapshot at epoch {epoch} (available: {available}).")
        snap = matches[0]
    if info.get("network_source") == "file" and (folder / jobio.NETWORK_COPY).is_file():
        load_network_module(folder / jobio.NETWORK_COPY)  # registers the file's custom layers
    return keras.models.load_model(folder / jobio.SNAPSHOT_DIR / snap["file"], compile=False, safe_mode=False)
