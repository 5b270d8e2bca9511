"""The ``multilabel`` view: every label's probability against its threshold, per input.

Per sample: the input thumbnail and each label with its probability bar,
its threshold, whether it is predicted (probability ≥ threshold) and, when
the ground truth (a 0/1 vector) is known, whether it is a true label. With
ground truth for some samples, the summary gives the exact-match ratio, the
Hamming loss and per-label precision, recall and F1 at the thresholds.

Thresholds: the ``thresholds`` option (comma-separated, one per label);
left empty, :func:`digits_core.inference.infer` fills in the model's own,
tuned per label on validation (``val_threshold_<label>``); a label without
one uses 0.5.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from wtforms import BooleanField, Form, IntegerField, StringField
from wtforms.validators import InputRequired, NumberRange, ValidationError

from digits_core import View, png_data_uri

from .view import PACKAGE, _dataset_attr

DEFAULT_THRESHOLD = 0.5


def parse_thresholds(text: Any) -> list[float]:
    """``"0.5, 0.3"`` → ``[0.5, 0.3]`` (empty → ``[]``).

    Raises:
        ValueError: Not comma-separated numbers in [0, 1].
    """
    if not text or not str(text).strip():
        return []
    try:
        values = [float(v) for v in str(text).split(",")]
    except ValueError:
        raise ValueError("thresholds must be comma-separated numbers, one per label") from None
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError("every threshold must lie between 0 and 1")
    return values


class MultilabelConfigForm(Form):
    """Options of the multi-label view."""

    thresholds = StringField(
        "Thresholds",
        description="One per label, comma-separated; empty: the model's thresholds tuned on validation",
    )
    show_input = BooleanField("Show input image", default=True, description="Show a thumbnail of each input")
    thumbnail_size = IntegerField(
        "Thumbnail size",
        default=128,
        validators=[InputRequired(), NumberRange(min=16, max=1024)],
        description="Longest side of the input thumbnail, in pixels",
    )

    def validate_thresholds(form, field):
        try:
            parse_thresholds(field.data)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class MultilabelView(View):
    """Per-label probabilities and thresholds; exact match, Hamming loss and per-label F1 in the summary."""

    plugin_id = "multilabel"
    title = "Multi-label classification: labels and thresholds"
    stylesheets = ("classification.css",)

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        self.thresholds = parse_thresholds(self.config.get("thresholds"))
        self.show_input = bool(self.config.get("show_input", True))
        self.thumbnail_size = int(self.config.get("thumbnail_size") or 128)
        self.class_labels = list(_dataset_attr(dataset, "class_labels") or [])
        self._count = 0
        self._labelled = 0
        self._exact = 0
        self._wrong = 0
        self._decisions = 0
        self._tp: dict[int, int] = {}
        self._fp: dict[int, int] = {}
        self._fn: dict[int, int] = {}

    config_form = MultilabelConfigForm

    @staticmethod
    def get_config_template(form):
        """Return the config form layout."""
        return View.template_from_package(PACKAGE, "templates/config.html", form=form)

    def label_of(self, index: int) -> str:
        """The class name of ``index`` (its number when the dataset has none)."""
        return str(self.class_labels[index]) if 0 <= index < len(self.class_labels) else str(index)

    def threshold_of(self, index: int) -> float:
        """The threshold of label ``index``."""
        return self.thresholds[index] if index < len(self.thresholds) else DEFAULT_THRESHOLD

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """Decide every label of one sample and update the statistics.

        Returns:
            ``input_id``, ``image`` (PNG data URI or ``None``), ``labels`` (``{index, label,
            probability, threshold, predicted, truth}`` for every label, most probable first; ``truth``
            is ``None`` without ground truth), ``predicted`` (the names at or above their threshold)
            and ``exact`` (all labels right; ``None`` without ground truth).
        """
        scores = np.asarray(output_data, np.float64).reshape(-1)
        thresholds = np.array([self.threshold_of(k) for k in range(scores.size)])
        predicted = scores >= thresholds
        truth = None
        if ground_truth is not None and np.asarray(ground_truth).size == scores.size:
            truth = np.asarray(ground_truth).reshape(-1) > 0.5
            self._labelled += 1
            self._exact += bool(np.array_equal(truth, predicted))
            self._wrong += int((truth != predicted).sum())
            self._decisions += scores.size
            for k in range(scores.size):
                counts = self._tp if truth[k] and predicted[k] else self._fp if predicted[k] else self._fn
                if truth[k] or predicted[k]:
                    counts[k] = counts.get(k, 0) + 1
        self._count += 1
        order = np.argsort(-scores, kind="stable")
        labels = [
            {
                "index": int(k),
                "label": self.label_of(int(k)),
                "probability": float(scores[k]),
                "threshold": float(thresholds[k]),
                "predicted": bool(predicted[k]),
                "truth": None if truth is None else bool(truth[k]),
            }
            for k in order
        ]
        image = None
        if self.show_input and input_data is not None:
            image = png_data_uri(np.asarray(input_data), max_size=self.thumbnail_size)
        return {
            "input_id": str(input_id),
            "image": image,
            "labels": labels,
            "predicted": [item["label"] for item in labels if item["predicted"]],
            "exact": None if truth is None else bool(np.array_equal(truth, predicted)),
        }

    def get_view_template(self, data):
        """Return the template of one sample."""
        return View.template_from_package(PACKAGE, "templates/multilabel.html", **data)

    def get_header_template(self):
        """Return the page header: inputs, labels and where the thresholds come from."""
        return View.template_from_package(
            PACKAGE,
            "templates/multilabel_header.html",
            count=self._count,
            num_labels=len(self.class_labels),
            labelled=self._labelled,
            tuned=bool(self.thresholds),
        )

    def summary(self) -> dict:
        """``{"count", "labelled", "exact_match", "hamming_loss", "per_label"}`` of the labelled samples.

        ``per_label`` lists ``{index, label, threshold, tp, fp, fn, precision, recall, f1}`` for the
        labels that are true or predicted at least once (``zero_division`` 0, as scikit-learn).
        """
        result: dict[str, Any] = {"count": self._count, "labelled": self._labelled}
        if not self._labelled:
            return {**result, "exact_match": None, "hamming_loss": None, "per_label": []}
        per_label = []
        for k in sorted(set(self._tp) | set(self._fp) | set(self._fn)):
            tp, fp, fn = self._tp.get(k, 0), self._fp.get(k, 0), self._fn.get(k, 0)
            per_label.append(
                {
                    "index": k,
                    "label": self.label_of(k),
                    "threshold": self.threshold_of(k),
                    "tp": tp,
                    "fp": fp,
                    "fn": fn,
                    "precision": tp / (tp + fp) if tp + fp else 0.0,
                    "recall": tp / (tp + fn) if tp + fn else 0.0,
                    "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0,
                }
            )
        return {
            **result,
            "exact_match": self._exact / self._labelled,
            "hamming_loss": self._wrong / max(self._decisions, 1),
            "per_label": per_label,
        }

    def get_summary_template(self):
        """Return the summary (labelled inputs only)."""
        summary = self.summary()
        if not summary["labelled"]:
            return None, None
        return View.template_from_package(PACKAGE, "templates/multilabel_summary.html", summary=summary)
