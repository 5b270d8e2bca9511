"""What differs between tasks, in one place: loss, metrics, outputs, labels.

The training run asks the :class:`Task` of the job for everything that
depends on the kind of labels; nothing else in the engine branches on the
task name. A new task (e.g. object detection on ``boxes`` labels) is one
:class:`Task` passed to :func:`register_task`::

    register_task(Task(name="detection", label_kind="boxes", default_loss="yolo", losses=("yolo",),
                       make_loss=my_loss, train_metric=my_metric, val_stats=my_val_stats,
                       summarize_val=my_summary, output_shape=my_output_shape, best=("val_map", "max"),
                       fix_labels=my_label_fn))

No TensorFlow is imported at module level; the callables import it when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import losses as _losses


def _same_shape_output(input_shape: tuple, num_outputs: int) -> tuple:
    return (*input_shape[:2], num_outputs)


def _vector_output(input_shape: tuple, num_outputs: int) -> tuple:
    return (num_outputs,)


def _classes_in(reader: Any, source: Any) -> int:
    """Number of classes: the dataset's class names or palette, else the largest label + 1."""
    for names in (reader.class_labels, reader.color_palette):
        if names:
            return len(names)
    labels = source.labels if source.preload else source.read_labels(np.arange(min(source.n, 256)))
    return int(np.max(labels)) + 1


def _integer_labels(labels: np.ndarray) -> np.ndarray:
    return labels.astype(np.int32, copy=False)


def _flat_float_labels(labels: np.ndarray) -> np.ndarray:
    labels = labels.astype(np.float32, copy=False)
    return labels.reshape(len(labels), -1)


def _regression_outputs(reader: Any, source: Any) -> int:
    return int(np.prod(source.label_shape)) if source.label_shape else 1


def _float_labels(labels: np.ndarray) -> np.ndarray:
    return labels.astype(np.float32, copy=False)


def _image_channels(reader: Any, source: Any) -> int:
    return int(source.label_shape[-1])


@dataclass(frozen=True)
class Task:
    """The task-specific pieces of a training run.

    Attributes:
        name: Task name as stored in ``model.json`` (``classification`` ...).
        label_kind: The dataset ``label_kind`` this task is inferred from.
        default_loss: Loss used when the options name none.
        losses: Loss names the task accepts (the option ``loss``).
        make_loss: ``(task_name, loss_name, num_outputs, class_weights, custom) -> loss(y, pred, valid=None)``.
        train_metric: ``(task_name, y, pred, standard_output) -> scalar`` (cheap, per batch).
        train_metric_name: Key of the training metric in ``metrics.jsonl`` and callback logs.
        val_stats: ``(task_name, num_outputs, y, pred, valid, loss, standard_output) -> dict of sums``.
        summarize_val: ``(task_name, sums) -> {"val_loss": ..., ...}``.
        output_shape: ``(input_shape, num_outputs) -> expected model output shape`` (no batch axis).
        num_outputs: ``(reader, train_source) -> int``.
        best: ``(metric key, "max" | "min")`` that picks the best epoch when the network has standard outputs.
        uses_class_weights: Whether ``class_weights`` applies.
        fix_labels: ``(labels read from the dataset, numpy) -> labels fed to the model`` (dtype, shape).
        bind: Optional ``(task, input_shape) -> Task``: the run's own copy of a task whose pieces
            depend on the network's input size (detection: boxes in pixels, a strided output map).
        evaluate: Optional ``(model, val_batches, num_outputs, class_names) -> {"val_...": float}``:
            extra validation metrics computed over all ``(x, y, valid)`` batches (detection mAP).
    """

    name: str
    label_kind: str
    default_loss: str
    losses: tuple[str, ...]
    make_loss: Callable = _losses.make_loss
    train_metric: Callable = _losses.train_metric
    train_metric_name: str = "accuracy"
    val_stats: Callable = _losses.val_stats
    summarize_val: Callable = _losses.summarize_val
    output_shape: Callable[[tuple, int], tuple] = _vector_output
    num_outputs: Callable[[Any, Any], int] = _classes_in
    best: tuple[str, str] = ("val_accuracy", "max")
    uses_class_weights: bool = True
    fix_labels: Callable[[np.ndarray], np.ndarray] = _integer_labels
    bind: Callable | None = None
    evaluate: Callable | None = None

    def loss(self, loss_name: str | None, num_outputs: int, class_weights=None, custom=None) -> Callable:
        """The loss function ``loss(y, pred, valid=None)`` for this task."""
        return self.make_loss(self.name, loss_name or self.default_loss, num_outputs, class_weights, custom)

    def best_key(self, standard_output: bool) -> tuple[str, Callable[[float, float], bool]]:
        """``(metric key, better(a, b))`` deciding the best epoch (``val_loss`` for custom outputs)."""
        key, direction = self.best if standard_output else ("val_loss", "min")
        if direction == "max":
            return key, lambda a, b: a > b
        return key, lambda a, b: a < b


TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Make a task available to :func:`digits_core.engine.train` (by name and by label kind)."""
    TASKS[task.name] = task
    return task


def task_named(name: str) -> Task:
    """The registered task called ``name``.

    Raises:
        KeyError: No such task.
    """
    return TASKS[name]


def task_for_label_kind(label_kind: str) -> Task | None:
    """The task inferred from a dataset's ``label_kind`` (``None`` when none fits)."""
    for task in TASKS.values():
        if task.label_kind == label_kind:
            return task
    return None


register_task(Task(name="classification", label_kind="class", default_loss="ce", losses=("ce",)))
register_task(
    Task(
        name="segmentation",
        label_kind="mask",
        default_loss="dice_ce",
        losses=("ce", "dice_ce", "dice"),
        output_shape=_same_shape_output,
        best=("val_dice", "max"),
    )
)
register_task(
    Task(
        name="regression",
        label_kind="regression",
        default_loss="mse",
        losses=("mse", "mae"),
        train_metric_name="mae",
        num_outputs=_regression_outputs,
        best=("val_loss", "min"),
        uses_class_weights=False,
        fix_labels=_flat_float_labels,
    )
)
# Image-to-image (DIGITS's imageProcessing): H×W×C float targets, a same-size linear output, MSE or MAE.
register_task(
    Task(
        name="image-to-image",
        label_kind="image",
        default_loss="mse",
        losses=("mse", "mae"),
        train_metric_name="mae",
        num_outputs=_image_channels,
        output_shape=_same_shape_output,
        best=("val_loss", "min"),
        uses_class_weights=False,
        fix_labels=_float_labels,
    )
)
# Raw arrays (labels of no declared kind, e.g. a DIGITS 6 bAbI story): fed as float32 in their stored shape, so a
# custom network's own loss sees them as the plugin wrote them; a network with one output per label value
# (a flat vector) trains with MSE/MAE without a loss of its own.
register_task(
    Task(
        name="raw",
        label_kind="raw",
        default_loss="mse",
        losses=("mse", "mae"),
        train_metric_name="mae",
        num_outputs=_regression_outputs,
        best=("val_loss", "min"),
        uses_class_weights=False,
        fix_labels=_float_labels,
    )
)

from .detection.task import make_task as _detection_task  # noqa: E402 - registered after the built-in tasks

register_task(_detection_task(Task))

from .multilabel_task import make_task as _multilabel_task  # noqa: E402 - registered after the built-in tasks

register_task(_multilabel_task(Task))
