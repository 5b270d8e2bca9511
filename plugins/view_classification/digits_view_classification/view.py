"""The ``image-classification`` view: top-N classes with probability bars.

Per sample it shows the input thumbnail and the N most probable classes
with bars. When ground truth is known for some samples, the summary shows
top-1 and top-k accuracy (k = 5, or the number of classes when fewer), a
confusion matrix rendered as a coloured table (rows: true class, columns:
predicted class, cells shaded by the row's fraction) and per-class
accuracy (recall).

Network outputs are taken as probabilities when they are non-negative and
sum to 1 (within 1e-3); otherwise they are treated as logits and a softmax
is applied first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from wtforms import BooleanField, Form, IntegerField
from wtforms.validators import InputRequired, NumberRange

from digits_core import View, png_data_uri

PACKAGE = __name__.rsplit(".", 1)[0]
#: k of the "top-k accuracy" figure (capped by the number of classes).
TOP_K_ACCURACY = 5


class ClassificationConfigForm(Form):
    """Options of the classification view."""

    top_n = IntegerField(
        "Number of top classes",
        default=5,
        validators=[InputRequired(), NumberRange(min=1, max=1000)],
        description="How many of the most probable classes to list per input",
    )
    show_input = BooleanField("Show input image", default=True, description="Show a thumbnail of each input")
    thumbnail_size = IntegerField(
        "Thumbnail size",
        default=128,
        validators=[InputRequired(), NumberRange(min=16, max=1024)],
        description="Longest side of the input thumbnail, in pixels",
    )


def to_probabilities(output: Any) -> np.ndarray:
    """Return the output vector as probabilities (softmax applied to logits).

    Args:
        output: The network's output for one sample, any shape with N values.
    """
    values = np.asarray(output, dtype=np.float64).reshape(-1)
    if values.size and values.min() >= 0.0 and abs(values.sum() - 1.0) <= 1e-3:
        return values
    shifted = np.exp(values - values.max())
    return shifted / shifted.sum()


class ClassificationView(View):
    """Top-N classes per input; accuracy, confusion matrix and per-class accuracy in the summary.

    Config (see :class:`ClassificationConfigForm`): ``top_n`` (default 5),
    ``show_input`` (default on), ``thumbnail_size`` (default 128).
    """

    plugin_id = "image-classification"
    title = "Image classification: top-N classes"
    stylesheets = ("classification.css",)

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        self.top_n = int(self.config.get("top_n") or 5)
        self.show_input = bool(self.config.get("show_input", True))
        self.thumbnail_size = int(self.config.get("thumbnail_size") or 128)
        self.class_labels = list(_dataset_attr(dataset, "class_labels") or [])
        self._num_classes = len(self.class_labels)
        self._count = 0
        self._labelled = 0
        self._top1 = 0
        self._topk = 0
        self._pairs: list[tuple[int, int]] = []  # (truth, predicted) of labelled samples

    # -- forms -------------------------------------------------------------

    config_form = ClassificationConfigForm
    config_template = "templates/config.html"

    # -- per sample --------------------------------------------------------

    def label_of(self, index: int) -> str:
        """Return the class name of ``index`` (its number when the dataset has no name for it)."""
        if 0 <= index < len(self.class_labels):
            return str(self.class_labels[index])
        return str(index)

    def _truth_index(self, ground_truth: Any) -> int | None:
        if ground_truth is None:
            return None
        if isinstance(ground_truth, str):
            if ground_truth in self.class_labels:
                return self.class_labels.index(ground_truth)
            try:
                return int(ground_truth)
            except ValueError:
                return None
        array = np.asarray(ground_truth)
        if array.size != 1:
            return None
        return int(array.reshape(-1)[0])

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """Rank the classes of one sample and update the accuracy statistics.

        Returns:
            A dict with ``input_id``, ``image`` (PNG data URI or ``None``),
            ``predictions`` (list of ``{index, label, probability}``, most
            probable first), ``ground_truth`` (class index or ``None``),
            ``ground_truth_label``, ``correct`` (top-1) and ``in_top_k``.
        """
        probabilities = to_probabilities(output_data)
        self._num_classes = max(self._num_classes, probabilities.size)
        order = np.argsort(-probabilities, kind="stable")
        predictions = [
            {"index": int(i), "label": self.label_of(int(i)), "probability": float(probabilities[i])}
            for i in order[: self.top_n]
        ]
        truth = self._truth_index(ground_truth)
        correct = in_top_k = None
        if truth is not None:
            k = min(TOP_K_ACCURACY, probabilities.size)
            correct = bool(order[0] == truth)
            in_top_k = bool(truth in order[:k])
            self._labelled += 1
            self._top1 += correct
            self._topk += in_top_k
            self._pairs.append((truth, int(order[0])))
            for p in predictions:
                p["is_truth"] = p["index"] == truth
        self._count += 1
        image = None
        if self.show_input and input_data is not None:
            image = png_data_uri(np.asarray(input_data), max_size=self.thumbnail_size)
        return {
            "input_id": str(input_id),
            "image": image,
            "predictions": predictions,
            "ground_truth": truth,
            "ground_truth_label": None if truth is None else self.label_of(truth),
            "correct": correct,
            "in_top_k": in_top_k,
        }

    view_template = "templates/view.html"

    # -- page --------------------------------------------------------------

    def get_header_template(self):
        """Return the page header: how many inputs and classes."""
        return View.template_from_package(
            PACKAGE,
            "templates/header.html",
            count=self._count,
            num_classes=self._num_classes,
            labelled=self._labelled,
            top_n=self.top_n,
        )

    def summary(self) -> dict:
        """Return the accuracy statistics of the labelled samples seen so far.

        Returns:
            ``{"count", "labelled", "top1_accuracy", "top_k", "top_k_accuracy",
            "classes", "confusion_matrix", "per_class"}``; ``classes`` lists the
            class indices present (as truth or prediction), which index the
            rows (true class) and columns (predicted class) of
            ``confusion_matrix``; ``per_class`` gives ``{index, label, total,
            correct, accuracy}`` per true class.
        """
        k = min(TOP_K_ACCURACY, self._num_classes) if self._num_classes else TOP_K_ACCURACY
        result: dict[str, Any] = {"count": self._count, "labelled": self._labelled, "top_k": k}
        if not self._labelled:
            result.update(top1_accuracy=None, top_k_accuracy=None, classes=[], confusion_matrix=[], per_class=[])
            return result
        classes = sorted({c for pair in self._pairs for c in pair})
        position = {c: i for i, c in enumerate(classes)}
        matrix = np.zeros((len(classes), len(classes)), dtype=np.int64)
        for truth, predicted in self._pairs:
            matrix[position[truth], position[predicted]] += 1
        per_class = []
        for c in classes:
            total = int(matrix[position[c]].sum())
            if total:
                hits = int(matrix[position[c], position[c]])
                per_class.append(
                    {"index": c, "label": self.label_of(c), "total": total, "correct": hits, "accuracy": hits / total}
                )
        result.update(
            top1_accuracy=self._top1 / self._labelled,
            top_k_accuracy=self._topk / self._labelled,
            classes=classes,
            confusion_matrix=matrix.tolist(),
            per_class=per_class,
        )
        return result

    def get_summary_template(self):
        """Return the summary: accuracy, confusion matrix and per-class accuracy (labelled inputs only)."""
        summary = self.summary()
        if not summary["labelled"]:
            return None, None
        rows = []
        for i, c in enumerate(summary["classes"]):
            counts = summary["confusion_matrix"][i]
            total = sum(counts)
            cells = []
            for j, count in enumerate(counts):
                fraction = count / total if total else 0.0
                hue = "40, 150, 70" if i == j else "200, 50, 40"
                cells.append(
                    {
                        "count": count,
                        "fraction": fraction,
                        "style": f"background-color: rgba({hue}, {fraction:.3f})" if count else "",
                    }
                )
            rows.append({"label": self.label_of(c), "cells": cells, "total": total})
        return View.template_from_package(
            PACKAGE,
            "templates/summary.html",
            summary=summary,
            column_labels=[self.label_of(c) for c in summary["classes"]],
            rows=rows,
        )


def _dataset_attr(dataset: Any, name: str) -> Any:
    """Read ``name`` from a dataset object, its ``userdata`` or a dict."""
    if dataset is None:
        return None
    if isinstance(dataset, dict):
        return dataset.get(name) or (dataset.get("userdata") or {}).get(name)
    value = getattr(dataset, name, None)
    if value is None:
        value = (getattr(dataset, "userdata", None) or {}).get(name)
    return value
