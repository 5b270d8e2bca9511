"""Classification figures of a labelled test set, computed as scikit-learn computes them.

Everything here takes the network's probabilities ``[N, K]`` and the true class ids ``N``:

* accuracy (the predicted class is the argmax: the lower class id on a tie) and top-k accuracy (the k
  highest scores, a tie at the k-th place broken towards the higher class id, as scikit-learn's
  ``top_k_accuracy_score`` does);
* per class precision, recall, F1 and support, with the macro, micro and support-weighted averages
  (a ratio with a zero denominator is 0, scikit-learn's ``zero_division=0``);
* the confusion matrix (rows true, columns predicted);
* one-vs-rest ROC-AUC and average precision per class (``roc_auc_score`` / ``average_precision_score``
  on the class's column); a class with no positive or no negative sample has none, and the macro
  figure averages the classes that have one;
* the expected calibration error of the top-1 confidence over equal-width bins, with each bin's
  count, mean confidence and accuracy (the reliability diagram);
* seeded bootstrap 95 % confidence intervals (percentile method) of accuracy and macro F1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Bins of the reliability diagram and the expected calibration error.
CALIBRATION_BINS = 15
#: Resamples of the bootstrap and its seed (fixed, so a report is reproducible).
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros_like(num), where=den != 0)


def confusion_matrix(truth: np.ndarray, predicted: np.ndarray, num_classes: int) -> np.ndarray:
    """``[K, K]`` counts, rows the true class and columns the predicted one."""
    matrix = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(matrix, (np.asarray(truth, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return matrix


def precision_recall_f1(matrix: np.ndarray) -> dict[str, Any]:
    """Per-class precision, recall, F1 and support of a confusion matrix, and their three averages."""
    tp = np.diag(matrix).astype(np.float64)
    predicted, support = matrix.sum(axis=0), matrix.sum(axis=1)
    precision, recall = _ratio(tp, predicted), _ratio(tp, support)
    f1 = _ratio(2 * precision * recall, precision + recall)
    total_tp, total = tp.sum(), float(matrix.sum())
    micro = float(total_tp / total) if total else 0.0
    weights = support / support.sum() if support.sum() else np.zeros_like(tp)
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "support": support,
        "macro": {"precision": float(precision.mean()), "recall": float(recall.mean()), "f1": float(f1.mean())},
        # micro precision, recall and F1 of single-label predictions are all the accuracy
        "micro": {"precision": micro, "recall": micro, "f1": micro},
        "weighted": {
            "precision": float(weights @ precision),
            "recall": float(weights @ recall),
            "f1": float(weights @ f1),
        },
    }


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, ties given their average rank."""
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_values)) + 1]
    ends = np.r_[starts[1:], len(values)]
    for start, end in zip(starts, ends):
        ranks[order[start:end]] = (start + end + 1) / 2.0
    return ranks


def roc_auc(positive: np.ndarray, scores: np.ndarray) -> float | None:
    """Area under the ROC curve of one binary problem (Mann-Whitney U; ``None`` without both classes)."""
    positive = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return None
    ranks = _ranks(np.asarray(scores, dtype=np.float64))
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _curve(positive: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True and false positives at each distinct score (highest first), and those scores."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="mergesort")
    s, y = np.asarray(scores, dtype=np.float64)[order], np.asarray(positive, dtype=bool)[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]
    tps = np.cumsum(y)[last].astype(np.float64)
    fps = (last + 1) - tps
    return tps, fps, s[last]


def average_precision(positive: np.ndarray, scores: np.ndarray) -> float | None:
    """Average precision ``Σ (R_n − R_{n−1}) P_n`` over distinct thresholds (``None`` without a positive)."""
    if not np.asarray(positive, dtype=bool).any():
        return None
    tps, fps, _ = _curve(positive, scores)
    precision, recall = tps / (tps + fps), tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def roc_points(positive: np.ndarray, scores: np.ndarray, max_points: int = 501) -> dict[str, list[float]]:
    """The ROC curve (false and true positive rates from (0, 0)) and the PR curve of one class, for the report.

    A curve longer than ``max_points`` is thinned to that many points, evenly spaced, both ends kept.
    """
    tps, fps, thresholds = _curve(positive, scores)
    fpr = np.r_[0.0, fps / fps[-1]] if fps[-1] else np.r_[0.0, np.zeros_like(fps)]
    tpr = np.r_[0.0, tps / tps[-1]] if tps[-1] else np.r_[0.0, np.zeros_like(tps)]
    precision = np.r_[1.0, tps / (tps + fps)]
    if len(fpr) > max_points:  # the report draws these: thin long curves, keeping both ends
        keep = np.unique(np.linspace(0, len(fpr) - 1, max_points).round().astype(np.int64))
        fpr, tpr, precision = fpr[keep], tpr[keep], precision[keep]
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "precision": precision.tolist(), "recall": tpr.tolist()}


def calibration(probabilities: np.ndarray, truth: np.ndarray, bins: int = CALIBRATION_BINS) -> dict[str, Any]:
    """Expected calibration error of the top-1 confidence and the reliability bins.

    A sample falls in bin ``i`` when its confidence is in ``(i/bins, (i+1)/bins]`` (a confidence of 0
    goes to the first bin). ECE is ``Σ_b |accuracy_b − confidence_b| · n_b / N``.
    """
    confidence = probabilities.max(axis=1)
    correct = probabilities.argmax(axis=1) == truth
    index = np.clip(np.ceil(confidence * bins).astype(np.int64) - 1, 0, bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        member = index == b
        n = int(member.sum())
        conf = float(confidence[member].mean()) if n else None
        acc = float(correct[member].mean()) if n else None
        if n:
            ece += abs(acc - conf) * n / len(truth)  # type: ignore[operator]
        rows.append({"lower": b / bins, "upper": (b + 1) / bins, "count": n, "confidence": conf, "accuracy": acc})
    return {"ece": float(ece), "bins": rows}


def _accuracy_and_macro_f1(truth: np.ndarray, predicted: np.ndarray, num_classes: int) -> tuple[float, float]:
    matrix = confusion_matrix(truth, predicted, num_classes)
    return float(np.trace(matrix) / matrix.sum()), float(precision_recall_f1(matrix)["f1"].mean())


def bootstrap_intervals(
    truth: np.ndarray,
    predicted: np.ndarray,
    num_classes: int,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, list[float]]:
    """95 % percentile intervals of accuracy and macro F1 over ``samples`` resamples drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    n = len(truth)
    draws = np.array(
        [_accuracy_and_macro_f1(truth[i], predicted[i], num_classes) for i in rng.integers(0, n, size=(samples, n))]
    )
    low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    return {"accuracy": [float(low[0]), float(high[0])], "macro_f1": [float(low[1]), float(high[1])]}


def classification_report(
    probabilities: np.ndarray,
    truth: Sequence[int] | np.ndarray,
    class_labels: Sequence[str] | None = None,
    *,
    top_k: int = 5,
    bins: int = CALIBRATION_BINS,
    bootstrap: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Every classification figure of a labelled test set, JSON-ready.

    Args:
        probabilities: ``[N, K]`` network outputs (one column per class the model knows).
        truth: ``N`` true class ids in ``0..K-1``.
        class_labels: Class names (index = class id).
        top_k: The ``k`` of top-k accuracy (capped at ``K``).
        bins: Bins of the reliability diagram.
        bootstrap: Bootstrap resamples (0: no intervals).
        seed: Seed of the bootstrap.

    Returns:
        ``{"count", "accuracy", "top_k", "top_k_accuracy", "class_labels", "confusion_matrix",
        "per_class": [{label, precision, recall, f1, support, roc_auc, average_precision}], "macro",
        "micro", "weighted" (precision/recall/F1; macro also roc_auc and average_precision),
        "calibration": {ece, bins}, "curves": [per class ROC/PR points], "intervals"}``.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(truth, dtype=np.int64)
    num = p.shape[1]
    k = min(int(top_k), num)
    order = np.argsort(p, axis=1, kind="mergesort")[:, ::-1]
    predicted = p.argmax(axis=1)
    matrix = confusion_matrix(y, predicted, num)
    prf = precision_recall_f1(matrix)
    labels = [str(class_labels[i]) if class_labels and i < len(class_labels) else str(i) for i in range(num)]
    per_class: list[dict[str, Any]] = []
    curves: list[dict[str, list[float]] | None] = []
    for c in range(num):
        positive = y == c
        auc, ap = roc_auc(positive, p[:, c]), average_precision(positive, p[:, c])
        per_class.append(
            {
                "index": c,
                "label": labels[c],
                "precision": float(prf["precision"][c]),
                "recall": float(prf["recall"][c]),
                "f1": float(prf["f1"][c]),
                "support": int(prf["support"][c]),
                "roc_auc": auc,
                "average_precision": ap,
            }
        )
        curves.append(roc_points(positive, p[:, c]) if positive.any() and (~positive).any() else None)
    aucs = [float(r["roc_auc"]) for r in per_class if r["roc_auc"] is not None]
    aps = [float(r["average_precision"]) for r in per_class if r["average_precision"] is not None]
    macro = dict(prf["macro"])
    macro["roc_auc"] = float(np.mean(aucs)) if aucs else None
    macro["average_precision"] = float(np.mean(aps)) if aps else None
    return {
        "count": int(y.size),
        "accuracy": float(np.trace(matrix) / max(1, matrix.sum())),
        "top_k": k,
        "top_k_accuracy": float(np.mean((order[:, :k] == y[:, None]).any(axis=1))) if y.size else 0.0,
        "class_labels": labels,
        "confusion_matrix": matrix.tolist(),
        "per_class": per_class,
        "macro": macro,
        "micro": prf["micro"],
        "weighted": prf["weighted"],
        "calibration": calibration(p, y, bins),
        "curves": curves,
        "intervals": bootstrap_intervals(y, predicted, num, bootstrap, seed) if bootstrap and y.size else {},
    }
