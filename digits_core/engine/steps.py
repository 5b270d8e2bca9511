"""The compiled train and validation steps (``tf.function``, inside a ``tf.distribute`` strategy).

:func:`make_steps` returns ``train_step(x, y, stop) -> (loss, metric, stop)``
and ``val_step(x, y, valid) -> {statistic: sum}``, reduced over replicas. The
task (:mod:`.tasks`) supplies the loss and metrics; ``jit=True`` compiles the
train step with XLA (``jit_compile``); a mixed-precision optimizer
(``LossScaleOptimizer``) gets its loss scaled. :func:`make_multi_step` runs
several train steps in one call (``steps_per_execution``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import TrainingError
from .finetune import scaled_apply
from .tasks import Task


@dataclass
class StepSpec:
    """What the steps compute with.

    Attributes:
        strategy: The ``tf.distribute.Strategy``.
        replicas: Number of replicas the global batch is split over.
        model, optimizer: The Keras model and optimizer (built under the strategy's scope).
        loss_fn: ``loss(y, pred, valid=None)`` (see :meth:`.tasks.Task.loss`).
        task: The run's :class:`~.tasks.Task`.
        num_outputs: Classes or regression outputs.
        standard_output: The model's output has the task's standard shape (metrics computable).
        custom_metrics: Metrics returned by a custom network (names or functions).
        jit: Compile the train step with XLA.
        autograph: Convert Python control flow on tensors (``tf.function(autograph=...)``); the engine
            turns it off when every loss and metric is the engine's own (graph code already: tracing
            without the AST conversion is faster), keeps it for a custom network's loss or metrics
            and for plugin tasks.
        backbone: A :class:`~.finetune.BackboneSchedule` (a pretrained backbone frozen, then slowed), or ``None``.
        single_step: Set by :func:`make_steps`: one replica's step, which :func:`make_multi_step` repeats.
    """

    strategy: Any
    replicas: int
    model: Any
    optimizer: Any
    loss_fn: Callable
    task: Task
    num_outputs: int
    standard_output: bool
    custom_metrics: Any = None
    jit: bool = False
    autograph: bool = True
    backbone: Any = None
    single_step: Any = None


def make_multi_step(spec: StepSpec):
    """``train_steps(iterator, n, stop) -> (losses[n], metrics[n], batch_sizes[n])``: ``n`` train steps in one call.

    The same step as ``train_step`` (:func:`make_steps` must have run for ``spec``), repeated in a
    ``tf.while_loop`` that reads its batches from the dataset iterator inside the graph: one Python
    dispatch, one iterator call and one read-back per execution instead of per step, which is what
    dominates small networks (LeNet: ~1,400 Python calls per step for the call, ``next`` and
    ``float(loss)``). ``n`` is a tensor, so every chunk length shares one trace. One replica only.
    """
    import tensorflow as tf

    step = spec.single_step

    @tf.function(autograph=False)
    def train_steps(iterator, n, stop):
        def body(i, losses, metrics, sizes):
            x, y = iterator.get_next()
            loss, metric, _ = step(x, y, stop)
            return (
                i + 1,
                losses.write(i, tf.cast(loss, tf.float32)),
                metrics.write(i, tf.cast(metric, tf.float32)),
                sizes.write(i, tf.shape(x)[0]),
            )

        arrays = (
            tf.TensorArray(tf.float32, size=n),
            tf.TensorArray(tf.float32, size=n),
            tf.TensorArray(tf.int32, size=n),
        )
        _, losses, metrics, sizes = tf.while_loop(lambda i, *_: i < n, body, (tf.constant(0), *arrays))
        return losses.stack(), metrics.stack(), sizes.stack()

    return train_steps


def make_steps(spec: StepSpec):
    """``(train_step, val_step)`` for one run (see the module docstring)."""
    import keras
    import tensorflow as tf

    strategy, model, optimizer, loss_fn = spec.strategy, spec.model, spec.optimizer, spec.loss_fn
    replicas = float(spec.replicas)
    task, standard, k = spec.task, spec.standard_output, spec.num_outputs
    loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def step(x, y, stop):
        with tf.GradientTape() as tape:
            pred = tf.cast(model(x, training=True), tf.float32)
            loss = loss_fn(y, pred)
            total = loss + tf.add_n(model.losses) if model.losses else loss
            scaled = total / replicas
            if loss_scaled:
                scaled = optimizer.scale_loss(scaled)
        grads = tape.gradient(scaled, model.trainable_variables)
        scaled_apply(optimizer, grads, model.trainable_variables, spec.backbone)
        return loss, task.train_metric(task.name, y, pred, standard), stop

    @tf.function(reduce_retracing=True, jit_compile=spec.jit or None, autograph=spec.autograph)
    def replica_step(x, y, stop):
        return step(x, y, stop)

    spec.single_step = replica_step if spec.jit else step  # what make_multi_step repeats (one replica)

    @tf.function(reduce_retracing=True, autograph=spec.autograph)
    def train_step(x, y, stop):
        # ``stop`` is this worker's abort flag; summed over workers, so an abort on any
        # worker (signal, or the abort file on the chief) stops every worker after the same step
        loss, metric, stop = strategy.run(replica_step if spec.jit else step, args=(x, y, stop))
        mean, total = tf.distribute.ReduceOp.MEAN, tf.distribute.ReduceOp.SUM
        return (
            strategy.reduce(mean, loss, axis=None),
            strategy.reduce(mean, metric, axis=None),
            strategy.reduce(total, stop, axis=None),
        )

    extra = metric_functions(spec.custom_metrics)

    def vstep(x, y, valid):
        pred = tf.cast(model(x, training=False), tf.float32)
        loss = loss_fn(y, pred, valid)
        stats = task.val_stats(task.name, k, y, pred, valid, loss, standard)
        for name, fn in extra:
            values = tf.reshape(tf.cast(fn(y, pred), tf.float32), [tf.shape(pred)[0], -1])
            stats[f"custom_{name}"] = tf.reduce_sum(tf.reduce_mean(values, axis=1) * valid)
        return stats

    @tf.function(reduce_retracing=True, autograph=spec.autograph)
    def val_step(x, y, valid):
        stats = strategy.run(vstep, args=(x, y, valid))
        return {key: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for key, v in stats.items()}

    return train_step, val_step


def engine_code_only(task: Task, custom_loss: Any, custom_metrics: Any) -> bool:
    """Whether the steps run only the engine's own loss and metric code (then autograph is not needed)."""
    if custom_loss is not None or custom_metrics:
        return False
    pieces = (task.make_loss, task.train_metric, task.val_stats)
    return all(str(getattr(fn, "__module__", "")).startswith("digits_core.engine") for fn in pieces)


def metric_functions(metrics) -> list:
    """``(name, fn(y_true, y_pred) -> per-sample values)`` for a custom network's metrics."""
    import keras

    found = []
    for metric in metrics or []:
        if isinstance(metric, str):
            fn = keras.metrics.get(metric)
            name = metric
        else:
            fn, name = metric, str(getattr(metric, "__name__", None) or getattr(metric, "name", "metric"))
        if isinstance(fn, keras.metrics.Metric):  # e.g. "mae" -> MeanAbsoluteError: use its per-sample function
            fn = getattr(fn, "_fn", None)
            if fn is None:
                raise TrainingError(
                    f'Metric "{name}": pass a function or a name such as "mae", not a stateful Metric object.'
                )
        found.append((str(name), fn))
    return found
