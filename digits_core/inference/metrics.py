"""Classification figures for labelled inputs: top-k accuracy, confusion matrix, per-class accuracy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

TOP_K = 5


def classification_metrics(probabilities: np.ndarray, truth: Sequence[int], class_labels=None, k: int = TOP_K) -> dict:
    """Return accuracy figures of labelled samples.

    Args:
        probabilities: ``[N, K]`` network outputs.
        truth: ``N`` true class indices.
        class_labels: Class names (index = class id).
        k: The ``k`` of top-k accuracy (capped at the number of classes).

    Returns:
        ``{"count", "top1_accuracy", "top_k", "top_k_accuracy", "class_labels",
        "confusion_matrix" (K×K, rows true, columns predicted), "per_class":
        [{index, label, total, correct, accuracy}] for classes with samples}``.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    truth_ids = np.asarray(truth, dtype=np.int64)
    num = probabilities.shape[1]
    k = min(k, num)
    order = np.argsort(-probabilities, axis=1, kind="stable")
    predicted = order[:, 0]
    top1 = float(np.mean(predicted == truth_ids))
    topk = float(np.mean([t in row[:k] for t, row in zip(truth_ids, order)]))
    size = max(num, int(truth_ids.max()) + 1 if truth_ids.size else 0)
    matrix = np.zeros((size, size), dtype=np.int64)
    np.add.at(matrix, (truth_ids, predicted), 1)
    labels = [str(class_labels[i]) if class_labels and i < len(class_labels) else str(i) for i in range(size)]
    per_class = []
    for c in range(size):
        total = int(matrix[c].sum())
        if total:
            per_class.append(
                {
                    "index": c,
                    "label": labels[c],
                    "total": total,
                    "correct": int(matrix[c, c]),
                    "accuracy": float(matrix[c, c] / total),
                }
            )
    return {
        "count": int(truth_ids.size),
        "top1_accuracy": top1,
        "top_k": k,
        "top_k_accuracy": topk,
        "class_labels": labels,
        "confusion_matrix": matrix.tolist(),
        "per_class": per_class,
    }


def top_n(probabilities: np.ndarray, n: int, class_labels=None) -> list[dict]:
    """Return the ``n`` most probable classes: ``[{index, label, probability}]``, best first."""
    probabilities = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    order = np.argsort(-probabilities, kind="stable")[:n]
    return [
        {
            "index": int(i),
            "label": str(class_labels[i]) if class_labels and i < len(class_labels) else str(int(i)),
            "probability": float(probabilities[i]),
        }
        for i in order
    ]


def top_n_batch(probabilities: np.ndarray, n: int, class_labels=None) -> list[list[dict]]:
    """:func:`top_n` for every row of ``[N, K]`` outputs, with one vectorised sort."""
    rows = BatchTopN(probabilities, n, class_labels)
    return [rows(i) for i in range(len(rows))]


class BatchTopN:
    """:func:`top_n` of any row of ``[N, K]`` outputs, all rows sorted at once the first time one is asked for.

    Args:
        probabilities: The outputs ``[N, K]`` (or ``[N, ...]``, flattened per row).
        n: How many classes each list holds.
        class_labels: Class names by index (missing ones read as the index).
    """

    def __init__(self, probabilities: np.ndarray, n: int, class_labels=None) -> None:
        self._probabilities = probabilities
        self._n = n
        self._names = [str(c) for c in class_labels] if class_labels else []
        self._sorted: tuple[list, list] | None = None

    def __len__(self) -> int:
        return len(self._probabilities)

    def __call__(self, row: int) -> list[dict]:
        """The top-``n`` list of row ``row``: ``[{index, label, probability}]``, best first."""
        if self._sorted is None:
            probabilities = np.asarray(self._probabilities, dtype=np.float64).reshape(len(self._probabilities), -1)
            order = np.argsort(-probabilities, axis=1, kind="stable")[:, : self._n]
            self._sorted = order.tolist(), np.take_along_axis(probabilities, order, axis=1).tolist()
        order, values = self._sorted[0][row], self._sorted[1][row]
        names, count = self._names, len(self._names)
        return [
            {"index": i, "label": names[i] if i < count else str(i), "probability": p} for i, p in zip(order, values)
        ]
