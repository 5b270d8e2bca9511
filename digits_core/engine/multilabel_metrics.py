"""Multi-label classification metrics, in numpy, equal to scikit-learn's (tests/test_multilabel_metrics.py).

``y`` is an ``N×K`` 0/1 array (label kind ``multilabel``), ``scores`` the
``N×K`` per-label probabilities (a sigmoid output). Per label:

* AP: :func:`sklearn.metrics.average_precision_score` (the precision at each
  distinct score, weighted by the recall it adds; no interpolation);
* AUROC: :func:`sklearn.metrics.roc_auc_score` (trapezoidal, ties averaged).

``mAP`` and macro AUROC average the labels that have both a positive and a
negative image; scikit-learn's macro averages refuse (AUROC) or mis-score
(AP) a label without positives, so those labels are reported as ``None``
and left out. F1 (micro and macro, ``zero_division=0``), the exact-match
ratio (:func:`sklearn.metrics.accuracy_score` on multi-label input) and the
Hamming loss use predictions ``scores >= thresholds``.

:func:`best_thresholds` tunes one threshold per label on validation data:
the threshold that maximises that label's F1, set halfway between the
lowest score it keeps and the next lower score (half that score when it
keeps every image), so a score a hair away from a validation score is
decided as that one was; the highest such threshold on a tie; 0.5 for a
label without positives.
"""

from __future__ import annotations

import numpy as np


def _binary_curve(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True and false positives at each distinct score (descending), and those scores."""
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), y.size - 1]
    tps = np.cumsum(y)[last]
    fps = last + 1 - tps
    return tps.astype(np.float64), fps.astype(np.float64), s[last]


def average_precision(y, scores) -> float | None:
    """AP of one label (``None`` without positives)."""
    y, s = np.asarray(y, np.float64).ravel(), np.asarray(scores, np.float64).ravel()
    if y.sum() == 0:
        return None
    tps, fps, _ = _binary_curve(y, s)
    precision = tps / (tps + fps)
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def roc_auc(y, scores) -> float | None:
    """Area under the ROC curve of one label (``None`` unless it has positives and negatives)."""
    y, s = np.asarray(y, np.float64).ravel(), np.asarray(scores, np.float64).ravel()
    positives = y.sum()
    negatives = y.size - positives
    if positives == 0 or negatives == 0:
        return None
    tps, fps, _ = _binary_curve(y, s)
    tpr, fpr = np.r_[0.0, tps / positives], np.r_[0.0, fps / negatives]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))  # the trapezoidal rule


def _counts(y: np.ndarray, predicted: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tp = (predicted & y).sum(axis=0).astype(np.float64)
    fp = (predicted & ~y).sum(axis=0).astype(np.float64)
    fn = (~predicted & y).sum(axis=0).astype(np.float64)
    return tp, fp, fn


def _f1(tp, fp, fn):
    denominator = 2 * tp + fp + fn
    return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1e-300), 0.0)


def best_thresholds(y, scores) -> list[float]:
    """One threshold per label: the score maximising its F1 on ``(y, scores)`` (see the module docstring)."""
    y, s = np.asarray(y, np.float64), np.asarray(scores, np.float64)
    result = []
    for k in range(y.shape[1]):
        if y[:, k].sum() == 0:
            result.append(0.5)
            continue
        tps, fps, thresholds = _binary_curve(y[:, k], s[:, k])
        f1 = _f1(tps, fps, y[:, k].sum() - tps)
        best = int(np.argmax(f1))  # argmax: the first (highest) best score
        below = thresholds[best + 1] if best + 1 < len(thresholds) else thresholds[best] / 2
        result.append(float((thresholds[best] + below) / 2))
    return result


def multilabel_metrics(y, scores, thresholds=0.5) -> dict:
    """Per-label and averaged metrics of ``N×K`` labels and scores.

    Args:
        y: ``N×K`` 0/1 labels.
        scores: ``N×K`` scores (probabilities).
        thresholds: One threshold, or one per label; a label is predicted when its score is ``>=`` it.

    Returns:
        ``{"ap": [...], "auroc": [...], "map", "auroc_macro", "f1_micro", "f1_macro", "f1": [...],
        "exact_match", "hamming_loss"}`` (per-label lists hold ``None`` where undefined).
    """
    y = np.asarray(y).astype(bool)
    s = np.asarray(scores, np.float64)
    if y.ndim != 2 or y.shape != s.shape:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must both be N×K")
    predicted = s >= np.broadcast_to(np.asarray(thresholds, np.float64), (s.shape[1],))
    ap = [average_precision(y[:, k], s[:, k]) for k in range(y.shape[1])]
    auroc = [roc_auc(y[:, k], s[:, k]) for k in range(y.shape[1])]
    tp, fp, fn = _counts(y, predicted)
    f1 = _f1(tp, fp, fn)
    defined_ap = [v for v in ap if v is not None]
    defined_auc = [v for v in auroc if v is not None]
    return {
        "ap": ap,
        "auroc": auroc,
        "map": float(np.mean(defined_ap)) if defined_ap else None,
        "auroc_macro": float(np.mean(defined_auc)) if defined_auc else None,
        "f1": [float(v) for v in f1],
        "f1_micro": float(_f1(tp.sum(), fp.sum(), fn.sum())),
        "f1_macro": float(f1.mean()),
        "exact_match": float((predicted == y).all(axis=1).mean()),
        "hamming_loss": float((predicted != y).mean()),
    }
