"""The ``detection`` task: what the engine asks of a run on ``boxes`` labels.

Registered with :func:`digits_core.engine.tasks.register_task` when
:mod:`digits_core.engine.tasks` is imported. The generic :class:`Task`
callables cannot know the network's input size, which the loss needs (boxes
are in input pixels, the output map has a stride), so the task carries a
``bind(task, input_shape)`` that returns the run's own copy with the loss,
training metric and validation mAP bound to it.

Validation adds to the loss the standard mAP figures (:mod:`.evaluate`):
``val_map50`` (VOC/KITTI AP@0.5), ``val_map`` (COCO AP@[.5:.95]), per
class ``val_ap50_<class>``, and ``val_recall50`` / ``val_precision50`` of the
detections scoring at least :data:`REPORT_SCORE` (IoU 0.5); the best epoch is the one with the highest
``val_map50``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

#: Box rows fed to the model per image: labels are padded (class -1) or cut to this many, objects first.
MAX_BOXES = 64
#: Detections below this score are left out of validation mAP (they cannot change it measurably).
MIN_SCORE = 0.001
#: Score from which a detection counts in the validation recall / precision (``val_recall50``).
REPORT_SCORE = 0.3
#: Heat-map probability above which an object's centre cell counts as found (training metric).
FOUND = 0.3


def fix_labels(labels: np.ndarray) -> np.ndarray:
    """Reader boxes ``[n, M, 5]`` → float32 ``[n, MAX_BOXES, 5]``: objects first, then dontcare, then padding."""
    labels = np.asarray(labels, np.float32)
    if labels.ndim != 3 or labels.shape[-1] != 5:
        raise ValueError(f"detection labels must be [n, M, 5] boxes, got shape {labels.shape}")
    out = np.full((len(labels), MAX_BOXES, 5), -1.0, np.float32)
    if labels.shape[1] == 0:
        return out
    rank = np.where(labels[..., 0] >= 1, 0, np.where(labels[..., 0] == 0, 1, 2))
    order = np.argsort(rank, axis=1, kind="stable")[:, :MAX_BOXES]
    picked = np.take_along_axis(labels, order[..., None], axis=1)
    out[:, : picked.shape[1]] = picked
    return out


def num_classes(reader: Any, source: Any) -> int:
    """Classes including dontcare: the dataset's class names, else the largest class id + 1 (at least 2)."""
    if reader.class_labels:
        return max(len(reader.class_labels), 2)
    labels = source.labels if source.preload else source.read_labels(np.arange(min(source.n, 256)))
    return max(int(np.max(labels[..., 0], initial=0)) + 1, 2)


def output_shape(input_shape: tuple, num_outputs: int) -> tuple:
    """The standard output: a stride-4 map of ``num_outputs`` heat-map logits + 4 box channels."""
    from .network import STRIDE

    return (input_shape[0] // STRIDE, input_shape[1] // STRIDE, num_outputs + 4)


def _unbound(*args, **kwargs):
    from ...errors import TrainingError

    raise TrainingError("the detection task must be bound to the input size first (Task.bind)")


def _val_stats(task_name, num_outputs, y, pred, valid, loss, standard_output) -> dict:
    import tensorflow as tf

    count = tf.reduce_sum(valid)
    return {"count": count, "loss_sum": loss * count}


def _summarize(task_name, sums) -> dict:
    return {"val_loss": float(sums["loss_sum"]) / max(float(sums["count"]), 1.0)}


def metric_key(name: str) -> str:
    """A class name as a metric-name suffix (``val_ap50_<key>``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)) or "_"


def bind(task, input_shape: tuple):
    """The run's detection task, with loss, training metric and mAP bound to ``input_shape``."""
    from .loss import make_detection_loss

    input_hw = (int(input_shape[0]), int(input_shape[1]))

    def make_loss(task_name, loss_name, n, class_weights=None, custom=None):
        return custom if custom is not None else make_detection_loss(input_hw, n)

    def train_metric(task_name, y, pred, standard_output):
        return centre_recall(y, pred, input_hw)

    detectors: dict = {}  # one traced function per model for the whole run (not one per validation)

    def evaluate_batches(model, batches, n, class_names=None) -> dict:
        if id(model) not in detectors:
            detectors.clear()
            detectors[id(model)] = detector(model, input_hw, n)
        return validation_map(model, batches, input_hw, n, class_names, detect=detectors[id(model)])

    return dataclasses.replace(
        task, make_loss=make_loss, train_metric=train_metric, evaluate=evaluate_batches, bind=None
    )


def centre_recall(boxes, pred, input_hw):
    """Share of the batch's objects whose centre cell's heat-map probability exceeds :data:`FOUND`."""
    import tensorflow as tf

    from .loss import encode_targets, stride_of

    pred = tf.cast(pred, tf.float32)
    n = int(pred.shape[-1]) - 4
    map_hw = (pred.shape[1], pred.shape[2])
    _, _, index, _, _, positive = encode_targets(boxes, map_hw, stride_of(input_hw, map_hw), n)
    cls = tf.cast(tf.maximum(tf.cast(boxes, tf.float32)[..., 0], 0.0), tf.int32)
    at = tf.gather_nd(pred[..., :n], index)  # [B, M, n]
    prob = tf.sigmoid(tf.gather(at, cls, batch_dims=2))
    found = tf.cast(prob > FOUND, tf.float32) * positive
    return tf.reduce_sum(found) / tf.maximum(tf.reduce_sum(positive), 1.0)


def detector(model, input_hw, n: int):
    """A ``tf.function`` ``x -> (boxes, scores, classes)``: the network and its decoding."""
    import tensorflow as tf

    from .decode import decode_detections

    @tf.function(reduce_retracing=True)
    def detect(x):
        return decode_detections(model(x, training=False), input_hw, n)

    return detect


def validation_map(model, batches, input_hw, n: int, class_names=None, detect=None) -> dict:
    """Run ``model`` over validation ``(x, boxes, valid)`` batches and return the mAP figures.

    Args:
        detect: The :func:`detector` of ``model`` (made here when not given).

    Returns:
        ``{"val_map50", "val_map", "val_ap50_<class>": ...}`` (classes with ground truth only).
    """
    from ...boxes.evaluate import evaluate
    from .decode import as_rows

    detect = detect or detector(model, input_hw, n)
    preds, gts = [], []
    for batch in batches:
        # a distributed dataset yields per-replica values: evaluate each replica's part
        for x, y, valid in zip(*(getattr(part, "values", (part,)) for part in batch)):
            b, s, c = detect(x)
            keep = np.asarray(valid) > 0
            rows = as_rows(b, s, c, min_score=MIN_SCORE)
            for i, boxes in enumerate(np.asarray(y)):
                if keep[i]:
                    preds.append(rows[i])
                    gts.append(boxes[boxes[:, 0] >= 0])
    result = evaluate(preds, gts, n, class_names)
    out = {"val_map50": result["map50"], "val_map": result["map"], **recall_precision(preds, gts)}
    for name, ap in result["ap50"].items():
        out[f"val_ap50_{metric_key(name)}"] = ap
    return out


def recall_precision(preds: list, gts: list, min_score: float = REPORT_SCORE) -> dict:
    """``val_recall50`` and ``val_precision50``: detections scoring at least ``min_score`` matched at IoU 0.5.

    Unlike mAP, which stays near 0 until the ranking is good, these move from
    the first epochs, so a live chart shows a detector starting to find objects.
    """
    from ...boxes.evaluate import match_image

    tp = fp = fn = 0
    for pred, gt in zip(preds, gts):
        counts = match_image(pred[pred[:, 1] >= min_score], gt)
        tp, fp, fn = tp + counts["tp"], fp + counts["fp"], fn + counts["fn"]
    return {"val_recall50": tp / max(tp + fn, 1), "val_precision50": tp / max(tp + fp, 1)}


def make_task(task_class: type):
    """The ``detection`` task as a ``task_class`` (:class:`~digits_core.engine.tasks.Task`, which passes itself
    in: the task registry imports this module, not the other way round), unbound."""
    return task_class(
        name="detection",
        label_kind="boxes",
        default_loss="centernet",
        losses=("centernet",),
        make_loss=_unbound,
        train_metric=_unbound,
        train_metric_name="centre_recall",
        val_stats=_val_stats,
        summarize_val=_summarize,
        output_shape=output_shape,
        num_outputs=num_classes,
        best=("val_map50", "max"),
        uses_class_weights=False,
        fix_labels=fix_labels,
        bind=bind,
    )
