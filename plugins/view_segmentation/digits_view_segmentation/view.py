"""The ``image-segmentation`` view: coloured class maps, overlays and Dice/IoU.

Per sample: the input (windowed to 8 bits for display: ``uint8`` as is,
other dtypes from their 1st to 99th percentile, see
:func:`digits_core.to_display_uint8`), the predicted class map painted with
the colour map, the map blended over the input (background class 0 left
unblended) with the ground-truth outline drawn in white, and per-sample
Dice/IoU per class when ground truth is known. The header shows a legend of
the classes found (``class_labels`` names); the summary the mean Dice/IoU
per class over the samples where the class appears.

The sample's mean Dice/IoU averages over the classes present in its
prediction or ground truth, leaving out class 0 when ``ignore_background``
is on (the default) and another class is present.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from wtforms import BooleanField, FloatField, Form, SelectField
from wtforms.validators import InputRequired, NumberRange

from digits_core import View, png_data_uri, resize_nearest, select_choices, to_display_rgb

from . import maps

PACKAGE = __name__.rsplit(".", 1)[0]
DATASET, BUILTIN = "dataset", "builtin"


class SegmentationConfigForm(Form):
    """Options of the segmentation view."""

    color_map = SelectField(
        "Colour map",
        default=DATASET,
        choices=select_choices(
            [
                (DATASET, "Dataset palette (built-in map when the dataset has none)"),
                (BUILTIN, "Built-in categorical map"),
            ]
        ),
        description="Colours of the classes",
    )
    opacity = FloatField(
        "Overlay opacity",
        default=0.5,
        validators=[InputRequired(), NumberRange(min=0.0, max=1.0)],
        description="Weight of the class colour over the input, 0 to 1",
    )
    show_ground_truth = BooleanField(
        "Show ground truth",
        default=True,
        description="Outline the ground truth and compute Dice/IoU when it is known",
    )
    ignore_background = BooleanField(
        "Ignore background in means",
        default=True,
        description="Leave class 0 out of the mean Dice/IoU",
    )


def _dataset_attr(dataset: Any, name: str) -> Any:
    if dataset is None:
        return None
    if isinstance(dataset, dict):
        return dataset.get(name) or (dataset.get("userdata") or {}).get(name)
    value = getattr(dataset, name, None)
    if value is None:
        value = (getattr(dataset, "userdata", None) or {}).get(name)
    return value


class SegmentationView(View):
    """Coloured class maps, overlays, ground-truth outlines and Dice/IoU.

    Config (see :class:`SegmentationConfigForm`): ``color_map`` (``"dataset"``
    or ``"builtin"``), ``opacity`` (0–1, default 0.5), ``show_ground_truth``
    (default on), ``ignore_background`` (default on).
    """

    plugin_id = "image-segmentation"
    title = "Image segmentation: class maps and Dice/IoU"
    stylesheets = ("segmentation.css",)

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        self.color_map = self.config.get("color_map") or DATASET
        opacity = self.config.get("opacity")
        self.opacity = 0.5 if opacity is None else float(opacity)
        self.show_ground_truth = bool(self.config.get("show_ground_truth", True))
        self.ignore_background = bool(self.config.get("ignore_background", True))
        self.class_labels = list(_dataset_attr(dataset, "class_labels") or [])
        dataset_palette = _dataset_attr(dataset, "color_palette")
        self.dataset_palette = dataset_palette if (self.color_map == DATASET and dataset_palette) else None
        self.palette = maps.make_palette(max(len(self.class_labels), 2), self.dataset_palette)
        self._found: set[int] = set()
        self._scores: dict[int, list[tuple[float, float]]] = {}
        self._sample_means: list[tuple[float, float]] = []
        self._count = 0

    config_form = SegmentationConfigForm
    config_template = "templates/config.html"

    def label_of(self, index: int) -> str:
        """Return the name of class ``index`` (its number when the dataset has none)."""
        if 0 <= index < len(self.class_labels):
            return str(self.class_labels[index])
        return f"class {index}"

    def color_of(self, index: int) -> tuple[int, int, int]:
        """Return the ``(r, g, b)`` colour of class ``index``."""
        if index >= len(self.palette):
            self.palette = maps.make_palette(index + 1, self.palette.tolist())
        return tuple(int(v) for v in self.palette[index])

    def _mean(self, scores: dict[int, dict[str, float]]) -> tuple[float | None, float | None]:
        classes = list(scores)
        if self.ignore_background and any(c != 0 for c in classes):
            classes = [c for c in classes if c != 0]
        elif self.ignore_background:
            classes = []
        if not classes:
            return None, None
        return (
            float(np.mean([scores[c]["dice"] for c in classes])),
            float(np.mean([scores[c]["iou"] for c in classes])),
        )

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """Colour the predicted classes of one sample and score it against the ground truth.

        Returns:
            A dict with ``input_id``, ``image``, ``prediction``, ``overlay``
            (PNG data URIs), ``classes`` (class indices predicted),
            ``scores`` (per class ``{class, label, dice, iou}``, empty without
            ground truth), ``mean_dice`` and ``mean_iou`` (``None`` without
            ground truth).
        """
        predicted, num_classes = maps.class_map(output_data)
        self.color_of(num_classes - 1)
        height, width = predicted.shape
        coloured = maps.colorize(predicted, self.palette)
        shown = resize_nearest(to_display_rgb(np.asarray(input_data)), height, width)
        blended = maps.overlay(shown, coloured, predicted, self.opacity)
        present = sorted(int(c) for c in np.unique(predicted))
        self._found.update(present)
        scores, mean_dice, mean_iou = [], None, None
        if ground_truth is not None and self.show_ground_truth:
            truth = np.asarray(ground_truth)
            if truth.ndim == 3:
                truth = truth[:, :, 0]
            truth = resize_nearest(truth.astype(np.int64), height, width)
            blended[maps.outline(truth)] = maps.OUTLINE_COLOR
            per_class = maps.dice_iou(predicted, truth)
            self._found.update(per_class)
            for c, s in sorted(per_class.items()):
                self.color_of(c)
                self._scores.setdefault(c, []).append((s["dice"], s["iou"]))
                scores.append(
                    {
                        "class": c,
                        "label": self.label_of(c),
                        "dice": s["dice"],
                        "iou": s["iou"],
                        "predicted_pixels": s["predicted"],
                        "truth_pixels": s["truth"],
                    }
                )
            mean_dice, mean_iou = self._mean(per_class)
            if mean_dice is not None:
                self._sample_means.append((mean_dice, mean_iou))
        self._count += 1
        return {
            "input_id": str(input_id),
            "image": png_data_uri(shown),
            "prediction": png_data_uri(coloured),
            "overlay": png_data_uri(blended),
            "classes": present,
            "scores": scores,
            "mean_dice": mean_dice,
            "mean_iou": mean_iou,
        }

    def get_view_template(self, data):
        """Return the template of one sample."""
        return View.template_from_package(PACKAGE, "templates/view.html", opacity=self.opacity, **data)

    def legend(self) -> list[dict]:
        """Return ``[{class, label, color}]`` for every class found so far (``color`` as ``#rrggbb``)."""
        return [
            {"class": c, "label": self.label_of(c), "color": "#%02x%02x%02x" % self.color_of(c)}
            for c in sorted(self._found)
        ]

    def get_header_template(self):
        """Return the header: a legend of the classes found."""
        return View.template_from_package(PACKAGE, "templates/header.html", legend=self.legend(), count=self._count)

    def summary(self) -> dict:
        """Return mean Dice/IoU per class and overall, over the samples with ground truth.

        Returns:
            ``{"count", "scored", "per_class": [{class, label, samples, mean_dice, mean_iou}],
            "mean_dice", "mean_iou"}``; the overall means average the samples' means.
        """
        per_class = [
            {
                "class": c,
                "label": self.label_of(c),
                "samples": len(v),
                "mean_dice": float(np.mean([d for d, _ in v])),
                "mean_iou": float(np.mean([i for _, i in v])),
            }
            for c, v in sorted(self._scores.items())
        ]
        scored = len(self._sample_means)
        return {
            "count": self._count,
            "scored": scored,
            "per_class": per_class,
            "mean_dice": float(np.mean([d for d, _ in self._sample_means])) if scored else None,
            "mean_iou": float(np.mean([i for _, i in self._sample_means])) if scored else None,
        }

    def get_summary_template(self):
        """Return the summary: mean Dice/IoU per class (only when ground truth was given)."""
        summary = self.summary()
        if not summary["per_class"]:
            return None, None
        return View.template_from_package(
            PACKAGE,
            "templates/summary.html",
            summary=summary,
            ignore_background=self.ignore_background,
        )
