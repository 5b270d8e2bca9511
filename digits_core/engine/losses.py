"""Losses and validation statistics per task, in TensorFlow.

Losses return the mean over one replica's batch; the trainer divides by the
number of replicas before taking gradients, so summed gradients equal the
gradient of the global-batch mean.

* classification: ``ce`` (sparse categorical cross-entropy on the softmax
  output), optionally weighted per class;
* segmentation: ``dice_ce`` (default): per-pixel cross-entropy plus
  ``1 - soft Dice`` averaged over the foreground classes (1..K-1), because
  cross-entropy alone collapses to all-background on small structures;
  ``ce`` and ``dice`` alone are available too;
* regression: ``mse`` (default) or ``mae``.

Validation statistics are *sums* over a batch (with a 0/1 ``valid`` weight
for padding rows) so they can be added over batches and replicas; the
trainer turns them into ``val_loss``, ``val_accuracy``, ``val_top5``,
``val_dice``, ``val_iou``, ``val_mae`` and ``val_mse``.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-7
DEFAULT_LOSS = {"classification": "ce", "segmentation": "dice_ce", "regression": "mse"}


def make_loss(task: str, name: str, num_outputs: int, class_weights=None, custom=None):
    """Return ``loss(y_true, y_pred, valid=None) -> scalar`` (mean over valid samples).

    Args:
        task: ``classification``, ``segmentation`` or ``regression``.
        name: Loss name (see module docstring); ignored when ``custom`` is given.
        num_outputs: Number of classes (or regression outputs).
        class_weights: ``None`` or a sequence of one weight per class (CE terms only).
        custom: A Keras loss (name or callable) returned by a custom network.
    """
    import keras
    import tensorflow as tf

    weights = None if class_weights is None else tf.constant(np.asarray(class_weights, np.float32))

    if custom is not None:
        fn = keras.losses.get(custom) if isinstance(custom, str) else custom

        def custom_loss(y_true, y_pred, valid=None):
            values = fn(y_true, y_pred)
            values = tf.reshape(tf.cast(values, tf.float32), [tf.shape(y_pred)[0], -1])
            values = tf.reduce_mean(values, axis=1)
            return _weighted_mean(values, valid)

        return custom_loss

    def ce_terms(y_true, y_pred):
        y_true = tf.cast(y_true, tf.int32)
        probs = tf.clip_by_value(y_pred, EPS, 1.0)
        nll = -tf.math.log(tf.gather(probs, y_true, axis=-1, batch_dims=len(y_true.shape)))
        if weights is not None:
            nll = nll * tf.gather(weights, y_true)
        return nll  # [N] or [N, H, W]

    def soft_dice(y_true, y_pred, valid):
        onehot = tf.one_hot(tf.cast(y_true, tf.int32), num_outputs, dtype=tf.float32)
        probs = y_pred
        if valid is not None:
            mask = tf.reshape(valid, [-1, 1, 1, 1])
            onehot, probs = onehot * mask, probs * mask
        inter = tf.reduce_sum(onehot * probs, axis=[0, 1, 2])
        denom = tf.reduce_sum(onehot, axis=[0, 1, 2]) + tf.reduce_sum(probs, axis=[0, 1, 2])
        dice = (2.0 * inter + 1.0) / (denom + 1.0)
        fg = dice[1:] if num_outputs > 1 else dice
        return 1.0 - tf.reduce_mean(fg)

    if task == "classification":
        return lambda y_true, y_pred, valid=None: _weighted_mean(ce_terms(y_true, y_pred), valid)
    if task == "segmentation":

        def seg_loss(y_true, y_pred, valid=None):
            total = 0.0
            if name in ("ce", "dice_ce"):
                per_sample = tf.reduce_mean(ce_terms(y_true, y_pred), axis=[1, 2])
                total += _weighted_mean(per_sample, valid)
            if name in ("dice", "dice_ce"):
                total += soft_dice(y_true, y_pred, valid)
            return total

        return seg_loss

    # regression
    def reg_loss(y_true, y_pred, valid=None):
        diff = tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred)) - y_pred
        values = tf.abs(diff) if name == "mae" else tf.square(diff)
        return _weighted_mean(tf.reduce_mean(tf.reshape(values, [tf.shape(values)[0], -1]), axis=1), valid)

    return reg_loss


def _weighted_mean(values, valid):
    import tensorflow as tf

    if valid is None:
        return tf.reduce_mean(values)
    return tf.reduce_sum(values * valid) / tf.maximum(tf.reduce_sum(valid), 1.0)


def train_metric(task: str, y_true, y_pred, standard_output: bool):
    """A cheap training metric per batch: accuracy (classification / pixel accuracy) or MAE."""
    import tensorflow as tf

    if not standard_output:
        return tf.constant(float("nan"))
    if task in ("classification", "segmentation"):
        pred = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        return tf.reduce_mean(tf.cast(tf.equal(pred, tf.cast(y_true, tf.int32)), tf.float32))
    return tf.reduce_mean(tf.abs(tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred)) - y_pred))


def val_stats(task: str, num_outputs: int, y_true, y_pred, valid, loss_value, standard_output: bool) -> dict:
    """Sums for one validation batch (see module docstring)."""
    import tensorflow as tf

    count = tf.reduce_sum(valid)
    stats = {"count": count, "loss_sum": loss_value * count}
    if not standard_output:
        return stats
    if task == "classification":
        y = tf.cast(y_true, tf.int32)
        top1 = tf.cast(tf.equal(tf.argmax(y_pred, axis=-1, output_type=tf.int32), y), tf.float32)
        stats["correct"] = tf.reduce_sum(top1 * valid)
        if num_outputs > 5:
            top5 = tf.cast(tf.math.in_top_k(y, y_pred, 5), tf.float32)
            stats["correct5"] = tf.reduce_sum(top5 * valid)
    elif task == "segmentation":
        y = tf.cast(y_true, tf.int32)
        pred = tf.argmax(y_pred, axis=-1, output_type=tf.int32)
        mask = tf.reshape(valid, [-1, 1, 1, 1])
        t = tf.one_hot(y, num_outputs) * mask
        p = tf.one_hot(pred, num_outputs) * mask
        tp = tf.reduce_sum(t * p, axis=[0, 1, 2])
        stats["tp"] = tp
        stats["fp"] = tf.reduce_sum(p, axis=[0, 1, 2]) - tp
        stats["fn"] = tf.reduce_sum(t, axis=[0, 1, 2]) - tp
        stats["pixels"] = tf.reduce_sum(t)
    else:
        diff = tf.reshape(tf.cast(y_true, tf.float32), tf.shape(y_pred)) - y_pred
        per = tf.reshape(diff, [tf.shape(diff)[0], -1])
        stats["abs_sum"] = tf.reduce_sum(tf.reduce_mean(tf.abs(per), axis=1) * valid)
        stats["sq_sum"] = tf.reduce_sum(tf.reduce_mean(tf.square(per), axis=1) * valid)
    return stats


def summarize_val(task: str, sums: dict) -> dict:
    """Turn summed validation statistics into metric values."""
    count = max(float(sums["count"]), 1.0)
    out = {"val_loss": float(sums["loss_sum"]) / count}
    if "correct" in sums:
        out["val_accuracy"] = float(sums["correct"]) / count
    if "correct5" in sums:
        out["val_top5"] = float(sums["correct5"]) / count
    if "tp" in sums:
        tp, fp, fn = (np.asarray(sums[k], np.float64) for k in ("tp", "fp", "fn"))
        fg = slice(1, None) if len(tp) > 1 else slice(None)
        dice = (2 * tp) / np.maximum(2 * tp + fp + fn, 1e-9)
        iou = tp / np.maximum(tp + fp + fn, 1e-9)
        present = (tp + fn)[fg] > 0
        out["val_dice"] = float(dice[fg][present].mean()) if present.any() else 0.0
        out["val_iou"] = float(iou[fg][present].mean()) if present.any() else 0.0
        out["val_accuracy"] = float(tp.sum() / max(float(sums["pixels"]), 1.0))
    if "abs_sum" in sums:
        out["val_mae"] = float(sums["abs_sum"]) / count
        out["val_mse"] = float(sums["sq_sum"]) / count
    return out


def auto_class_weights(labels: np.ndarray, num_classes: int) -> list[float]:
    """Inverse-frequency class weights normalized to mean 1 (absent classes get weight 1).

    Multi-hot ``N×num_classes`` labels (task ``multilabel``) get :func:`positive_weights` instead.
    """
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == num_classes and labels.dtype.kind == "f":
        return positive_weights(labels)
    counts = np.bincount(np.asarray(labels).reshape(-1).astype(np.int64), minlength=num_classes)[:num_classes]
    counts = counts.astype(np.float64)
    present = counts > 0
    weights = np.ones(num_classes)
    weights[present] = counts[present].sum() / (present.sum() * counts[present])
    return [float(w) for w in weights]


def positive_weights(labels: np.ndarray) -> list[float]:
    """``auto`` class weights of ``N×K`` 0/1 labels (task ``multilabel``): each label's negatives / positives,
    the weight of its positive term in binary cross-entropy (1 for a label never present)."""
    y = np.asarray(labels, np.float64).reshape(len(labels), -1)
    positives = y.sum(axis=0)
    negatives = len(y) - positives
    return [float(n / p) if p > 0 else 1.0 for p, n in zip(positives, negatives)]
