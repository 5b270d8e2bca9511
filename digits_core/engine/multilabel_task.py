"""The ``multilabel`` task: datasets of label kind ``multilabel`` (a 0/1 vector per image).

The network's output is ``[N, num_outputs]`` sigmoid probabilities (the
built-in ``lenet_multilabel``, or a custom network ending in a sigmoid); the
default loss is binary cross-entropy averaged over the labels. Class weights
weigh each label's positive term (``-w_k · y log p - (1 - y) log(1 - p)``, the
``pos_weight`` of TensorFlow's and PyTorch's weighted BCE): ``auto`` gives a
rare label ``w_k = negatives / positives`` in the training set
(:func:`digits_core.engine.losses.positive_weights`). Each
validation reports ``val_loss`` and ``val_label_accuracy`` (labels right at
0.5), then over the whole validation set (:mod:`.multilabel_metrics`, equal
to scikit-learn): ``val_map`` (the best epoch's key), ``val_auroc``,
``val_f1_micro``, ``val_f1_macro``, ``val_exact_match`` and
``val_hamming_loss`` at 0.5, ``val_f1_macro_tuned`` at per-label
thresholds tuned for best F1 on that validation set, and per label
``val_ap_<label>`` (labels with positive and negative validation images). Those thresholds are
logged too, one ``val_threshold_<label>`` per label (the label as a metric
name, as detection's ``val_ap50_<class>``): the model job keeps them with the
epoch they belong to, and :func:`digits_core.inference.infer` applies the
thresholds of the snapshot's epoch (:mod:`digits_core.inference.multilabel`).
"""

from __future__ import annotations

import numpy as np

from . import losses as _losses
from .detection.task import metric_key  # the same label-to-metric-name rule as detection's per-class figures
from .multilabel_metrics import best_thresholds, multilabel_metrics

EPS = 1e-7


def _make_loss(task: str, name: str, num_outputs: int, class_weights=None, custom=None):
    if custom is not None:
        return _losses.make_loss(task, name, num_outputs, None, custom)
    import tensorflow as tf

    weights = tf.constant(np.ones(num_outputs, np.float32) if class_weights is None else np.float32(class_weights))

    def bce(y_true, y_pred, valid=None):
        y = tf.cast(tf.reshape(y_true, tf.shape(y_pred)), tf.float32)
        p = tf.clip_by_value(tf.cast(y_pred, tf.float32), EPS, 1.0 - EPS)
        per_label = -(weights * y * tf.math.log(p) + (1.0 - y) * tf.math.log(1.0 - p))
        return _losses._weighted_mean(tf.reduce_mean(per_label, axis=1), valid)

    return bce


def _label_accuracy(y_true, y_pred):
    import tensorflow as tf

    y = tf.cast(tf.reshape(y_true, tf.shape(y_pred)), tf.float32) > 0.5
    return tf.reduce_mean(tf.cast(tf.equal(y_pred >= 0.5, y), tf.float32), axis=1)


def _train_metric(task: str, y_true, y_pred, standard_output: bool):
    import tensorflow as tf

    if not standard_output:
        return tf.constant(float("nan"))
    return tf.reduce_mean(_label_accuracy(y_true, y_pred))


def _val_stats(task: str, num_outputs: int, y_true, y_pred, valid, loss_value, standard_output: bool) -> dict:
    import tensorflow as tf

    count = tf.reduce_sum(valid)
    stats = {"count": count, "loss_sum": loss_value * count}
    if standard_output:
        stats["label_correct"] = tf.reduce_sum(_label_accuracy(y_true, y_pred) * valid)
    return stats


def _summarize(task: str, sums: dict) -> dict:
    count = max(float(sums["count"]), 1.0)
    out = {"val_loss": float(sums["loss_sum"]) / count}
    if "label_correct" in sums:
        out["val_label_accuracy"] = float(sums["label_correct"]) / count
    return out


def threshold_key(name: str) -> str:
    """The metric name of a label's tuned threshold."""
    return f"val_threshold_{metric_key(name)}"


def validation_metrics(y: np.ndarray, scores: np.ndarray, class_names=None) -> dict:
    """The whole-validation-set figures of the module docstring from ``N×K`` labels and scores."""
    at_half = multilabel_metrics(y, scores, 0.5)
    thresholds = best_thresholds(y, scores)
    tuned = multilabel_metrics(y, scores, thresholds)
    names = list(class_names or [])
    names += [str(k) for k in range(len(names), y.shape[1])]
    return {
        **{threshold_key(name): t for name, t in zip(names, thresholds)},
        **{f"val_ap_{metric_key(name)}": ap for name, ap in zip(names, at_half["ap"]) if ap is not None},
        "val_map": at_half["map"] or 0.0,
        "val_auroc": at_half["auroc_macro"] if at_half["auroc_macro"] is not None else 0.5,
        "val_f1_micro": at_half["f1_micro"],
        "val_f1_macro": at_half["f1_macro"],
        "val_exact_match": at_half["exact_match"],
        "val_hamming_loss": at_half["hamming_loss"],
        "val_f1_macro_tuned": tuned["f1_macro"],
    }


def _evaluate(model, batches, num_outputs: int, class_names=None) -> dict:
    labels, scores = [], []
    for batch in batches:
        # a distributed dataset yields per-replica values: evaluate each replica's part
        for x, y, valid in zip(*(getattr(part, "values", (part,)) for part in batch)):
            keep = np.asarray(valid) > 0
            scores.append(np.asarray(model(x, training=False), np.float64).reshape(len(keep), -1)[keep])
            labels.append(np.asarray(y).reshape(len(keep), -1)[keep])
    if not labels:
        return {}
    return validation_metrics(np.concatenate(labels), np.concatenate(scores), class_names)


def _float_vectors(labels: np.ndarray) -> np.ndarray:
    labels = labels.astype(np.float32, copy=False)
    return labels.reshape(len(labels), -1)


def make_task(task_class: type):
    """The ``multilabel`` task as a ``task_class`` (:class:`~digits_core.engine.tasks.Task`, passed in: the
    task registry imports this module, not the other way round)."""
    return task_class(
        name="multilabel",
        label_kind="multilabel",
        default_loss="bce",
        losses=("bce",),
        make_loss=_make_loss,
        train_metric=_train_metric,
        train_metric_name="label_accuracy",
        val_stats=_val_stats,
        summarize_val=_summarize,
        best=("val_map", "max"),
        fix_labels=_float_vectors,
        evaluate=_evaluate,
    )
