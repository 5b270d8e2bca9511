"""digits_core.engine.multilabel_metrics equals scikit-learn to 1e-6 (ties in the scores included)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as sk

from digits_core.engine.multilabel_metrics import best_thresholds, multilabel_metrics


@pytest.mark.parametrize("seed", range(5))
def test_metrics_equal_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    n, k = 60, 5
    y = (rng.random((n, k)) < [0.1, 0.3, 0.5, 0.7, 0.05]).astype(np.uint8)
    y[0, 4], y[1, 4] = 1, 0  # every label has a positive and a negative
    scores = np.clip(y * 0.3 + rng.random((n, k)) * 0.7, 0, 1)
    scores[::7] = np.round(scores[::7], 1)  # tied scores
    thresholds = [0.5, 0.4, 0.6, 0.5, 0.3]
    got = multilabel_metrics(y, scores, thresholds)
    predicted = (scores >= thresholds).astype(np.uint8)
    for label in range(k):
        assert got["ap"][label] == pytest.approx(sk.average_precision_score(y[:, label], scores[:, label]), abs=1e-6)
        assert got["auroc"][label] == pytest.approx(sk.roc_auc_score(y[:, label], scores[:, label]), abs=1e-6)
    assert got["map"] == pytest.approx(sk.average_precision_score(y, scores, average="macro"), abs=1e-6)
    assert got["auroc_macro"] == pytest.approx(sk.roc_auc_score(y, scores, average="macro"), abs=1e-6)
    assert got["f1_micro"] == pytest.approx(sk.f1_score(y, predicted, average="micro", zero_division=0), abs=1e-6)
    assert got["f1_macro"] == pytest.approx(sk.f1_score(y, predicted, average="macro", zero_division=0), abs=1e-6)
    assert got["exact_match"] == pytest.approx(sk.accuracy_score(y, predicted), abs=1e-6)
    assert got["hamming_loss"] == pytest.approx(sk.hamming_loss(y, predicted), abs=1e-6)


def test_a_label_without_positives_is_left_out_of_the_means():
    y = np.array([[1, 0], [0, 0], [1, 0]])
    scores = np.array([[0.9, 0.2], [0.1, 0.8], [0.6, 0.1]])
    got = multilabel_metrics(y, scores)
    assert got["ap"] == [1.0, None] and got["auroc"] == [1.0, None] and got["map"] == 1.0
    assert got["f1"] == [1.0, 0.0] and got["hamming_loss"] == pytest.approx(1 / 6)


def test_thresholds_maximise_each_labels_f1():
    rng = np.random.default_rng(9)
    y = (rng.random((80, 3)) < 0.4).astype(np.uint8)
    scores = np.clip(y * 0.25 + rng.random((80, 3)) * 0.75, 0, 1)
    tuned = best_thresholds(y, scores)
    for label, threshold in enumerate(tuned):
        best = max(
            sk.f1_score(y[:, label], scores[:, label] >= t, zero_division=0) for t in np.unique(scores[:, label])
        )
        assert sk.f1_score(y[:, label], scores[:, label] >= threshold, zero_division=0) == pytest.approx(best)
    assert best_thresholds(np.zeros((4, 1)), np.ones((4, 1))) == [0.5]


def test_auto_class_weights_of_multi_hot_labels_weigh_rare_positives():
    from digits_core.engine.losses import auto_class_weights

    y = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0]], np.float32)
    assert auto_class_weights(y, 3) == [1 / 3, 3.0, 1.0]  # negatives / positives; 1 for a label never present
    assert auto_class_weights(np.array([0, 0, 1]), 2) == pytest.approx([0.75, 1.5])  # class ids: unchanged


@pytest.mark.slow  # imports TensorFlow
def test_weighted_binary_cross_entropy_by_hand():
    from digits_core.engine.multilabel_task import make_task
    from digits_core.engine.tasks import Task

    y = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    p = np.array([[0.8, 0.3], [0.4, 0.6], [0.9, 0.2]], np.float32)
    weights = [2.0, 0.5]
    loss = make_task(Task).loss(None, 2, weights)
    terms = -(np.array(weights) * y * np.log(p) + (1 - y) * np.log(1 - p))
    assert float(loss(y, p)) == pytest.approx(terms.mean(axis=1).mean(), rel=1e-5)
    valid = np.array([1, 0, 1], np.float32)  # padding rows do not count
    assert float(loss(y, p, valid)) == pytest.approx(terms.mean(axis=1)[[0, 2]].mean(), rel=1e-5)
