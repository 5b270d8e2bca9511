"""The training losses and validation statistics against values computed by hand (TensorFlow, no training).

A loss that looks at the wrong channel, skips the padding weight or averages
over the wrong axis still trains a little, so floors on a trained model miss
it: these numbers do not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from digits_core.engine.losses import make_loss, summarize_val, val_stats

pytestmark = pytest.mark.slow

# One 2x2 image, two classes: background 0 at the top left, the structure (class 1) elsewhere.
LABELS = np.array([[[0, 1], [1, 1]]], np.int32)
PROBS = np.array([[[[0.9, 0.1], [0.4, 0.6]], [[0.2, 0.8], [0.5, 0.5]]]], np.float32)
# Foreground soft Dice: inter = 0.6 + 0.8 + 0.5 = 1.9; |true| + |pred| = 3 + 2.0; (2 x 1.9 + 1) / (5 + 1) = 0.8.
# (The background channel's would be (2 x 0.9 + 1) / (1 + 2.0 + 1) = 0.7.)
DICE_LOSS = 1.0 - 0.8
CE = -(math.log(0.9) + math.log(0.6) + math.log(0.8) + math.log(0.5)) / 4


def _value(loss, y_true, y_pred, valid=None) -> float:
    import tensorflow as tf

    args = [tf.constant(y_true), tf.constant(y_pred)]
    if valid is not None:
        args.append(tf.constant(valid, tf.float32))
    return float(loss(*args))


def test_segmentation_dice_loss_is_one_minus_the_soft_dice_of_the_foreground():
    assert _value(make_loss("segmentation", "dice", 2), LABELS, PROBS) == pytest.approx(DICE_LOSS, abs=1e-6)
    assert _value(make_loss("segmentation", "ce", 2), LABELS, PROBS) == pytest.approx(CE, abs=1e-6)
    assert _value(make_loss("segmentation", "dice_ce", 2), LABELS, PROBS) == pytest.approx(CE + DICE_LOSS, abs=1e-6)


def test_dice_loss_averages_the_foreground_classes_and_ignores_padding_rows():
    # Three classes: class 2 is predicted at 0.5 where it is, class 1 nowhere it should be.
    labels = np.array([[[0, 1], [2, 2]]], np.int32)
    probs = np.array([[[[1.0, 0.0, 0.0], [0.5, 0.0, 0.5]], [[0.5, 0.0, 0.5], [0.5, 0.0, 0.5]]]], np.float32)
    dice1 = (2 * 0.0 + 1) / (1 + 0.0 + 1)  # 0.5
    dice2 = (2 * 1.0 + 1) / (2 + 1.5 + 1)  # 3 / 4.5
    expected = 1 - (dice1 + dice2) / 2
    loss = make_loss("segmentation", "dice", 3)
    assert _value(loss, labels, probs) == pytest.approx(expected, abs=1e-6)
    # A padding row (valid 0) with anything in it changes nothing.
    padded_labels = np.concatenate([labels, np.ones_like(labels)])
    padded_probs = np.concatenate([probs, np.full_like(probs, 1 / 3)])
    assert _value(loss, padded_labels, padded_probs, [1.0, 0.0]) == pytest.approx(expected, abs=1e-6)
    assert _value(loss, padded_labels, padded_probs, [1.0, 1.0]) != pytest.approx(expected, abs=1e-3)


def test_classification_and_regression_losses_by_hand():
    labels = np.array([0, 2], np.int32)
    probs = np.array([[0.7, 0.2, 0.1], [0.25, 0.25, 0.5]], np.float32)
    assert _value(make_loss("classification", "ce", 3), labels, probs) == pytest.approx(
        -(math.log(0.7) + math.log(0.5)) / 2, abs=1e-6
    )
    weighted = make_loss("classification", "ce", 3, class_weights=[1.0, 1.0, 3.0])
    assert _value(weighted, labels, probs) == pytest.approx(-(math.log(0.7) + 3 * math.log(0.5)) / 2, abs=1e-6)
    targets = np.array([[1.0, 2.0], [0.0, 4.0]], np.float32)
    outputs = np.array([[1.5, 1.0], [0.0, 1.0]], np.float32)
    # per sample: mse (0.25 + 1) / 2, (0 + 9) / 2; mae (0.5 + 1) / 2, (0 + 3) / 2
    assert _value(make_loss("regression", "mse", 2), targets, outputs) == pytest.approx((0.625 + 4.5) / 2, abs=1e-6)
    assert _value(make_loss("regression", "mae", 2), targets, outputs) == pytest.approx((0.75 + 1.5) / 2, abs=1e-6)
    assert _value(make_loss("regression", "mae", 2), targets, outputs, [0.0, 1.0]) == pytest.approx(1.5, abs=1e-6)


def test_validation_dice_counts_the_foreground_of_the_argmax_masks():
    import tensorflow as tf

    # argmax of PROBS: [[0, 1], [1, 0]] against LABELS [[0, 1], [1, 1]]: class 1 tp 2, fn 1, fp 0 -> Dice 4 / 5.
    stats = val_stats("segmentation", 2, tf.constant(LABELS), tf.constant(PROBS), tf.constant([1.0]), 0.5, True)
    out = summarize_val("segmentation", {k: np.asarray(v) for k, v in stats.items()})
    assert out["val_dice"] == pytest.approx(0.8) and out["val_iou"] == pytest.approx(2 / 3)
    assert out["val_accuracy"] == pytest.approx(0.75) and out["val_loss"] == pytest.approx(0.5)
