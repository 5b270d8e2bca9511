"""The training loop: steps, logging windows, validation, snapshots, abort, callbacks.

One :class:`TrainingLoop` runs the steps of a prepared
:class:`~digits_core.engine.setup.RunState` from ``start_step`` to
``total_steps``. Per step it checks for an abort (file, flag, signal, or
any worker of a multi-worker run), runs the compiled train step, stops on a
non-finite loss, and feeds the Keras callbacks (:mod:`.callbacks`), the
``progress`` function, ``metrics.jsonl``/TensorBoard, validation and
snapshots at their step intervals.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ..errors import TrainingError
from ..jobs.model import record_best
from ..phase_marks import mark
from . import jobio
from .callbacks import CallbackDriver
from .distribute import distribute_input
from .early_stopping import EarlyStopping
from .pipeline import train_dataset, val_dataset
from .setup import RunState
from .snapshot_writer import SnapshotWriter
from .steps import StepSpec, engine_code_only, make_multi_step, make_steps

ABORT_FLAGS: set[str] = set()  # job folders asked to abort from this process (see ``request_abort``)


class AbortSignal:
    """Why the run should stop (``reason``), from a signal, an abort file, this process or a callback."""

    def __init__(self, folder) -> None:
        self.reason: str | None = None
        self.path = folder / jobio.ABORT_FILE
        self.key = str(folder.resolve())

    def poll(self) -> str | None:
        """Notice an abort requested since the last step; returns the reason (or ``None``)."""
        if self.reason is None and (self.path.exists() or self.key in ABORT_FLAGS):
            self.reason = "abort requested"
        return self.reason

    def clear(self) -> None:
        """Consume the request (a resumed run must not stop at once)."""
        ABORT_FLAGS.discard(self.key)
        self.path.unlink(missing_ok=True)


class _Means:
    """Running sums of loss and the training metric (a logging window, or an epoch)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss = self.metric = 0.0
        self.steps = self.images = 0
        self.start = time.perf_counter()

    def add(self, loss: float, metric: float, images: int) -> None:
        self.loss += loss
        self.metric += metric
        self.steps += 1
        self.images += images

    def logs(self, metric_name: str | None) -> dict:
        n = max(self.steps, 1)
        out = {"loss": self.loss / n}
        if metric_name:
            out[metric_name] = self.metric / n
        return out


def _trace_once(train_step, train_ds, flag, state: RunState) -> None:
    """Trace the train step for any batch size before the first step.

    A stage whose size is not a multiple of the batch ends each epoch with a
    smaller batch, which would trace the step a second time (a second
    graph, optimized again) at the end of the first epoch; tracing it once
    for the pipeline's own element shapes (batch axis ``None``) serves both.
    Single-replica runs without XLA only (a distributed dataset's batches are
    per-replica values; XLA compiles per shape anyway).
    """
    import tensorflow as tf

    if state.strat.replicas != 1 or state.opts.jit or not isinstance(train_ds, tf.data.Dataset):
        return
    x_spec, y_spec = train_ds.element_spec
    train_step.get_concrete_function(x_spec, y_spec, tf.TensorSpec.from_tensor(flag))


class TrainingLoop:
    """Runs one prepared training run (see the module docstring).

    Args:
        state: The prepared run.
        writer: The :class:`~digits_core.engine.jobio.MetricsWriter`.
        callbacks: Keras callbacks (user and plugin).
        progress: ``progress(dict)`` after every step and validation (see :func:`~digits_core.engine.train`).
        abort: The run's :class:`AbortSignal`.
        heartbeat: Called at every logging window (shows the job is alive).
    """

    def __init__(
        self,
        state: RunState,
        writer,
        callbacks: list,
        progress: Callable[[dict], None] | None,
        abort: AbortSignal,
        heartbeat: Callable[[], None],
    ):
        self.s = state
        self.writer = writer
        self.progress = progress
        self.abort = abort
        self.heartbeat = heartbeat
        self.last_logs: dict = {}
        self.validations = 0
        self.stopped_early = False
        self.early = EarlyStopping.from_options(state.opts)
        self.metric_name = state.task.train_metric_name if state.standard_output else None
        schedule = state.extra.get("backbone_schedule")
        if schedule is not None:
            callbacks = [schedule.callback(), *callbacks]
        self.cb = CallbackDriver(
            callbacks, state.model, epochs=state.opts.epochs, steps_per_epoch=state.steps_per_epoch
        )
        single = state.strat.replicas == 1 and state.strat.num_workers == 1
        self.snapshots = SnapshotWriter(state.folder, state.model, state.optimizer, background=single)

    # -- datasets and steps -------------------------------------------------------------------

    def _distribute(self, make):
        return distribute_input(self.s.strat, make)

    def _datasets(self):
        s, opts = self.s, self.s.opts
        start_epoch, skip = divmod(s.start_step, s.steps_per_epoch)
        train_ds = self._distribute(
            lambda ctx: train_dataset(
                s.train_src,
                layout=s.layout,
                prep=s.prep,
                aug=opts.augmentation,
                seed=s.seed,
                shuffle=opts.shuffle,
                start_epoch=start_epoch,
                epochs=opts.epochs,
                skip_batches=skip,
            )
        )
        val_ds = None
        if s.val_src:
            val_ds = self._distribute(lambda ctx: val_dataset(s.val_src, layout=s.layout, prep=s.prep)[0])
        return train_ds, val_ds

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> None:
        """Train to ``total_steps`` (or an abort / early stop); raises :class:`TrainingError` on divergence.

        No snapshot write is left in flight when it returns or raises.
        """
        try:
            self._run()
        except BaseException:
            self.snapshots.close(quiet=True)
            raise
        self.snapshots.close()

    def _run(self) -> None:
        import tensorflow as tf

        s = self.s
        self.spec = StepSpec(
            strategy=s.strat.strategy,
            replicas=s.strat.replicas,
            model=s.model,
            optimizer=s.optimizer,
            loss_fn=s.loss_fn,
            task=s.task,
            num_outputs=s.num_outputs,
            standard_output=s.standard_output,
            custom_metrics=s.custom_metrics,
            jit=s.opts.jit,
            autograph=not engine_code_only(s.task, s.custom_loss, s.custom_metrics),
            backbone=s.extra.get("backbone_schedule"),
        )
        train_step, self.val_step = make_steps(self.spec)
        if self.early is not None and not (s.val_src and s.val_every):
            raise TrainingError(
                "early_stopping_metric needs validation: this run has no validation set or a validation interval of 0"
            )
        train_ds, self.val_ds = self._datasets()
        spe, multi = s.steps_per_epoch, s.strat.num_workers > 1
        flags = (tf.constant(0.0), tf.constant(1.0))
        window, epoch_means = _Means(), _Means()
        run_start = time.perf_counter()
        step = s.start_step
        iterator = iter(train_ds)
        mark("input pipeline")
        train_steps = self._multi_step(train_ds)
        if train_steps is None:  # (the several-steps function is traced once anyway: its batch axis is free)
            _trace_once(train_step, train_ds, flags[0], s)
        self.cb.train_begin()
        if step % spe == 0:
            self.cb.epoch_begin(step // spe)
        else:  # a resumed run starts inside an epoch
            self.cb.epoch_open = step // spe
        while step < s.total_steps:
            if self.abort.poll() and not multi:
                self._aborted(epoch_means)
                return
            if train_steps is not None:  # several steps in one call; no interval falls inside one (_chunk)
                losses, metrics, sizes = train_steps(iterator, tf.constant(self._chunk(step)), flags[0])
                done = list(zip(losses.numpy().tolist(), metrics.numpy().tolist(), sizes.numpy().tolist()))
            else:
                x, y = next(iterator)
                self.cb.batch_begin(step % spe)
                loss_t, metric_t, stop = train_step(x, y, flags[1 if self.abort.reason else 0])
                if multi and float(stop) > 0:  # every worker leaves after this same step
                    self.abort.reason = self.abort.reason or "abort requested on another worker"
                    self._aborted(epoch_means)
                    return
                images = s.layout.global_batch if s.strat.replicas > 1 else int(x.shape[0])
                done = [(float(loss_t), float(metric_t), images)]
            for loss, metric, images in done:
                if step == s.start_step:
                    mark("first step (tracing)")
                step += 1
                if self._after_step(step, loss, metric, images, window, epoch_means, run_start):
                    break
            if s.model.stop_training:
                break
        mark("steps")
        self._train_end(step)

    def _chunk(self, step: int) -> int:
        """Steps the next execution may run: up to ``steps_per_execution``, ending at the next step where
        anything happens (a log window, validation, snapshot, epoch end or the last step), so those run
        exactly where a step-by-step run has them."""
        s = self.s
        n = min(int(s.opts.steps_per_execution), s.total_steps - step)
        for every in (s.log_every, s.val_every, s.snap_every, s.steps_per_epoch):
            if every:
                n = min(n, every - step % every)
        return max(n, 1)

    def _multi_step(self, train_ds):
        """The several-steps-per-call function when ``steps_per_execution`` > 1 applies, else ``None``.

        One replica and one worker only, and no Keras callbacks (they see each batch as it ends; Keras's
        own ``steps_per_execution`` likewise calls them once per execution).
        """
        import tensorflow as tf

        s = self.s
        if (
            int(s.opts.steps_per_execution) <= 1
            or s.strat.replicas != 1
            or s.strat.num_workers != 1
            or self.cb.active
            or not isinstance(train_ds, tf.data.Dataset)
        ):
            return None
        return make_multi_step(self.spec)

    def _after_step(self, step: int, loss: float, metric: float, images: int, window, epoch_means, run_start) -> bool:
        """Book-keeping after step ``step`` (1-based): logs, validation, snapshots, epoch ends; ``True``: stop."""
        s, spe = self.s, self.s.steps_per_epoch
        epoch = step / spe
        if not math.isfinite(loss):
            raise TrainingError(
                f"Training diverged: the loss became {loss} at epoch {epoch:.2f} (step {step}). "
                "Lower the learning rate, check the labels, or use a different solver."
            )
        window.add(loss, metric, images)
        epoch_means.add(loss, metric, images)
        self.cb.batch_end((step - 1) % spe, epoch_means.logs(self.metric_name))
        end_of_epoch = step % spe == 0
        if step % s.log_every == 0 or end_of_epoch or step == s.total_steps:
            mark("steps")
            self._log_window(window, epoch, step)
            mark("metrics writes")
        if s.val_every and (step % s.val_every == 0 or step == s.total_steps):
            mark("steps")
            self.validate(epoch, step)
            mark("validation" if self.validations > 1 else "first validation (tracing)")
        if step == s.total_steps or (s.snap_every and step % s.snap_every == 0):
            mark("steps")
            self._snapshot(epoch, step, last=step == s.total_steps)
            mark("snapshot")
        self._report(
            {
                "phase": "train",
                "epoch": epoch,
                "step": step,
                "total_steps": s.total_steps,
                "epochs": s.opts.epochs,
                "loss": loss,
                "eta_s": (time.perf_counter() - run_start) / max(step - s.start_step, 1) * (s.total_steps - step),
            }
        )
        if end_of_epoch:
            self.cb.epoch_end(step // spe - 1, self._epoch_logs(epoch_means))
            epoch_means.reset()
            if step < s.total_steps and not s.model.stop_training and not self.abort.reason:
                self.cb.epoch_begin(step // spe)
        if s.model.stop_training:
            self.stopped_early = True
            if not (s.snap_every and step % s.snap_every == 0) and step != s.total_steps:
                self._snapshot(epoch, step, last=True)
            return True
        return False

    def _train_end(self, step: int) -> None:
        s = self.s
        if self.snapshots.wait():  # train_end callbacks see every snapshot listed
            mark("snapshot")
        self.cb.train_end(dict(self.last_logs))
        s.job.update(
            worker_report={
                "worker_index": s.strat.worker_index,
                "num_workers": s.strat.num_workers,
                "steps": step - s.start_step,
                "images_per_epoch": len(range(s.strat.worker_index, s.train_src.n, s.strat.num_workers)),
            }
        )

    def _aborted(self, epoch_means: _Means) -> None:
        self.abort.clear()
        logs = self._epoch_logs(epoch_means) if epoch_means.steps else dict(self.last_logs)
        self.cb.aborted(logs)

    def _epoch_logs(self, means: _Means) -> dict:
        logs = dict(self.last_logs)
        logs.update(means.logs(self.metric_name))
        return logs

    def _report(self, values: dict) -> None:
        """Call ``progress``; an exception there aborts the run (status Aborted, not Error)."""
        if not self.progress:
            return
        try:
            self.progress(values)
        except Exception as exc:  # noqa: BLE001 - the caller's way to cancel
            self.abort.reason = self.abort.reason or f"progress callback raised {type(exc).__name__}: {exc}"

    def _log_window(self, window: _Means, epoch: float, step: int) -> None:
        values = window.logs(self.metric_name)
        values["lr"] = self._lr_at(step - 1)
        values["images_per_sec"] = window.images / max(time.perf_counter() - window.start, 1e-9)
        ordered = {"loss": values["loss"], "lr": values["lr"], "images_per_sec": values["images_per_sec"]}
        if self.metric_name:
            ordered[self.metric_name] = values[self.metric_name]
        self.writer.write(epoch, step, ordered)
        self.last_logs.update(ordered)
        window.reset()
        self.heartbeat()
        self.snapshots.poll()

    def _lr_at(self, step: int) -> float:
        optimizer = getattr(self.s.optimizer, "inner_optimizer", self.s.optimizer)
        schedule = optimizer._learning_rate
        if callable(schedule):
            return float(schedule(step))
        return float(optimizer.learning_rate)

    def _snapshot(self, epoch: float, step: int, *, last: bool = False) -> None:
        if self.s.strat.is_chief:
            self.snapshots.save(epoch, step, last=last)

    # -- validation ---------------------------------------------------------------------------------

    def validate(self, epoch: float, step: int) -> None:
        """Run the validation set; log ``val_*`` metrics, track the best epoch."""
        s = self.s
        self.validations += 1
        self.cb.test_begin()
        sums: dict = {}
        for batch, (x, y, valid) in enumerate(self.val_ds):
            if self.abort.reason and s.strat.num_workers == 1:  # a stop must not wait for a long validation
                return  # (several workers validate together: each must run every batch)
            self.cb.test_batch_begin(batch)
            for key, value in self.val_step(x, y, valid).items():
                sums[key] = sums.get(key, 0) + np.asarray(value, np.float64)
            if self.cb.active:
                self.cb.test_batch_end(batch, self._val_values(sums))
        values = self._val_values(sums)
        if s.task.evaluate is not None and s.standard_output:
            values.update(s.task.evaluate(s.model, self.val_ds, s.num_outputs, s.reader.class_labels))
        if not math.isfinite(values["val_loss"]):
            raise TrainingError(
                f"Training diverged: the validation loss is {values['val_loss']} at epoch "
                f"{epoch:.2f}. Lower the learning rate."
            )
        self.writer.write(epoch, step, values)
        self.last_logs.update(values)
        self.cb.test_end(values)
        key, better = s.task.best_key(s.standard_output)
        if key in values and s.strat.is_chief:
            record_best(s.folder, epoch, values[key], key, better)
        if self.early is not None and self.early.observe(epoch, values, s.model):
            s.model.stop_training = True
            self.writer.write(
                epoch,
                step,
                {
                    "early_stopped": 1.0,
                    "early_stopping_best_epoch": self.early.best_epoch,
                    "early_stopping_best": self.early.best,
                },
            )
        self._report({"phase": "val", "epoch": epoch, "step": step, "total_steps": s.total_steps, **values})

    def _val_values(self, sums: dict) -> dict:
        values = self.s.task.summarize_val(self.s.task.name, sums)
        for key in sums:
            if key.startswith("custom_"):
                values[f"val_{key[len('custom_') :]}"] = float(sums[key]) / max(float(sums["count"]), 1.0)
        return values
