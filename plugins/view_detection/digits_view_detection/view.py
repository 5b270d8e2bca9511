"""The ``bounding-boxes`` view (DIGITS's boundingBox view, multi-class).

Per sample: the network's input image with the detections at or above
``score_threshold`` drawn as solid boxes in their class colour (the
dataset's ``color_palette``), captioned with class name and score, the
ground-truth boxes dashed (dontcare regions grey), a table of the
detections and, with ground truth, the image's true positives, false
positives and misses at IoU ``iou_threshold``.

The summary (images with ground truth only) gives per-class AP@0.5
(VOC/KITTI) and COCO AP@[.5:.95] over *all* detections, as
``digits_core.evaluate_detections`` computes them, and a precision–recall
chart drawn as inline SVG (so it works in the web page and in a
self-contained HTML report alike, no script needed).

``output_data`` is a ``[K, 6]`` array ``(class, score, x1, y1, x2, y2)``
in the pixels of ``input_data``; ``ground_truth`` an ``N×5`` array
``(class, x1, y1, x2, y2)`` in the same pixels (class 0 = dontcare).
"""

from __future__ import annotations

from typing import Any

import markupsafe
import numpy as np
from wtforms import BooleanField, FloatField, Form
from wtforms.validators import InputRequired, NumberRange

from digits_core import View, evaluate_detections, match_detections, png_data_uri, to_display_rgb

PACKAGE = __name__.rsplit(".", 1)[0]
DONTCARE_COLOR = (150, 150, 150)
#: Images are drawn at least this many pixels on their longer side.
DISPLAY_SIZE = 320


class BoundingBoxesConfigForm(Form):
    """Options of the bounding-boxes view."""

    score_threshold = FloatField(
        "Score threshold",
        default=0.3,
        validators=[InputRequired(), NumberRange(0.0, 1.0)],
        description="Draw and count detections with at least this score",
    )
    iou_threshold = FloatField(
        "IoU threshold",
        default=0.5,
        validators=[InputRequired(), NumberRange(0.05, 1.0)],
        description="Overlap a detection needs with a ground-truth box to be a true positive",
    )
    show_ground_truth = BooleanField(
        "Show ground truth", default=True, description="Draw ground-truth boxes (dashed) and count TP/FP/FN when known"
    )


def _dataset_attr(dataset: Any, name: str) -> Any:
    if dataset is None:
        return None
    if isinstance(dataset, dict):
        return dataset.get(name) or (dataset.get("userdata") or {}).get(name)
    value = getattr(dataset, name, None)
    return value if value is not None else (getattr(dataset, "userdata", None) or {}).get(name)


def _fallback_color(index: int) -> tuple[int, int, int]:
    return ((index * 67 + 40) % 256, (index * 131 + 90) % 256, (index * 197 + 160) % 256)


def _dashed_rectangle(draw, box, color, width: int, dash: int = 6) -> None:
    x1, y1, x2, y2 = box
    for a, b, horizontal, fixed in ((x1, x2, True, y1), (x1, x2, True, y2), (y1, y2, False, x1), (y1, y2, False, x2)):
        start = a
        while start < b:
            end = min(start + dash, b)
            line = [(start, fixed), (end, fixed)] if horizontal else [(fixed, start), (fixed, end)]
            draw.line(line, fill=color, width=width)
            start += 2 * dash


class BoundingBoxesView(View):
    """Detections drawn on their images, with TP/FP/FN, per-class AP and precision–recall curves.

    Config (see :class:`BoundingBoxesConfigForm`): ``score_threshold``
    (default 0.3), ``iou_threshold`` (default 0.5), ``show_ground_truth``
    (default on).
    """

    plugin_id = "bounding-boxes"
    title = "Bounding boxes: detections, TP/FP/FN and mAP"
    stylesheets = ("detection.css",)

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        value = self.config.get("score_threshold")
        self.threshold = 0.3 if value is None else float(value)
        value = self.config.get("iou_threshold")
        self.iou = 0.5 if value is None else float(value)
        self.show_ground_truth = bool(self.config.get("show_ground_truth", True))
        self.class_labels = list(_dataset_attr(dataset, "class_labels") or [])
        self.palette = [tuple(int(v) for v in c[:3]) for c in (_dataset_attr(dataset, "color_palette") or [])]
        self._found: set[int] = set()
        self._preds: list[np.ndarray] = []
        self._gts: list[np.ndarray] = []
        self._counts = {"tp": 0, "fp": 0, "fn": 0}
        self._count = 0

    config_form = BoundingBoxesConfigForm
    config_template = "templates/config.html"

    def label_of(self, index: int) -> str:
        """Name of class ``index`` (its number when the dataset has none)."""
        return str(self.class_labels[index]) if 0 <= index < len(self.class_labels) else f"class {index}"

    def color_of(self, index: int) -> tuple[int, int, int]:
        """``(r, g, b)`` of class ``index``: the dataset palette, else a fixed fallback."""
        if index == 0:
            return DONTCARE_COLOR
        return self.palette[index] if index < len(self.palette) else _fallback_color(index)

    def _hex(self, index: int) -> str:
        return "#%02x%02x%02x" % self.color_of(index)

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """Draw one image's detections (and ground truth) and match them.

        Returns:
            ``input_id``, ``image`` (PNG data URI), ``detections`` (at or above the
            threshold: ``{class, label, score, box, color, status}``; ``status`` is
            ``tp``/``fp``/``ignored`` with ground truth, else ``None``) and
            ``counts`` (``{tp, fp, fn}`` or ``None`` without ground truth).
        """
        from PIL import Image, ImageDraw

        rows = np.asarray(output_data, np.float64).reshape(-1, 6)
        rows = rows[np.argsort(-rows[:, 1], kind="stable")]
        shown = rows[rows[:, 1] >= self.threshold]
        truth = None
        if ground_truth is not None and self.show_ground_truth:
            truth = np.asarray(ground_truth, np.float64).reshape(-1, 5)
            truth = truth[truth[:, 0] >= 0]
            self._preds.append(rows)
            self._gts.append(truth)
        statuses: list = [None] * len(shown)
        counts = None
        if truth is not None:
            match = match_detections(shown, truth, self.iou)
            statuses = match["pred_status"]
            counts = {k: match[k] for k in ("tp", "fp", "fn")}
            for k in counts:
                self._counts[k] += counts[k]
        image = to_display_rgb(np.asarray(input_data))
        h, w = image.shape[:2]
        scale = max(1, DISPLAY_SIZE // max(h, w))
        canvas = Image.fromarray(image).resize((w * scale, h * scale), Image.NEAREST)
        draw = ImageDraw.Draw(canvas)
        line = max(1, scale // 2 + 1)
        if truth is not None:
            for cls, *box in truth:
                self._found.add(int(cls))
                _dashed_rectangle(draw, [v * scale for v in box], self.color_of(int(cls)), line)
        detections = []
        for (cls, score, *box), status in zip(shown, statuses):
            c = int(cls)
            self._found.add(c)
            color = self.color_of(c)
            scaled = [v * scale for v in box]
            draw.rectangle(scaled, outline=color, width=line)
            draw.text((scaled[0] + 2, max(0, scaled[1] - 11)), f"{self.label_of(c)} {score:.2f}", fill=color)
            detections.append(
                {
                    "class": c,
                    "label": self.label_of(c),
                    "score": float(score),
                    "box": [float(v) for v in box],
                    "color": self._hex(c),
                    "status": status,
                }
            )
        self._count += 1
        return {
            "input_id": str(input_id),
            "image": png_data_uri(np.asarray(canvas)),
            "detections": detections,
            "counts": counts,
        }

    view_template = "templates/view.html"

    def legend(self) -> list[dict]:
        """``[{class, label, color}]`` of every class drawn so far."""
        return [{"class": c, "label": self.label_of(c), "color": self._hex(c)} for c in sorted(self._found)]

    def get_header_template(self):
        """Return the header: threshold and a legend of the classes drawn."""
        return View.template_from_package(
            PACKAGE, "templates/header.html", legend=self.legend(), count=self._count, threshold=self.threshold
        )

    def summary(self) -> dict | None:
        """mAP figures over the samples with ground truth (``None`` when there were none).

        Returns:
            ``{"images", "map50", "map", "tp", "fp", "fn", "per_class": [{label, color, objects, ap50, ap}],
            "pr_curves": {label: {"recall", "precision"}}}``.
        """
        if not self._gts:
            return None
        n = max(
            len(self.class_labels),
            int(max((g[:, 0].max() for g in self._gts if len(g)), default=0)) + 1,
            int(max((p[:, 0].max() for p in self._preds if len(p)), default=0)) + 1,
            2,
        )
        names = [self.label_of(i) for i in range(n)]
        result = evaluate_detections(self._preds, self._gts, n, names)
        per_class = [
            {
                "label": name,
                "color": self._hex(names.index(name)),
                "objects": result["num_gt"][name],
                "ap50": ap,
                "ap": result["ap"][name],
            }
            for name, ap in result["ap50"].items()
        ]
        return {
            "images": len(self._gts),
            "map50": result["map50"],
            "map": result["map"],
            **self._counts,
            "per_class": per_class,
            "pr_curves": result["pr_curves"],
        }

    def pr_svg(self, summary: dict) -> str:
        """The precision–recall curves as an inline SVG (one polyline per class, in its colour)."""
        width, height, left, bottom, top, right = 420, 300, 44, 36, 12, 12
        pw, ph = width - left - right, height - top - bottom
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
            'aria-label="precision-recall curves">'
        ]
        for k in range(6):
            t = k / 5
            x, y = left + t * pw, top + (1 - t) * ph
            parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
            parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
            parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{t:.1f}</text>')
            parts.append(f'<text x="{x:.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">{t:.1f}</text>')
        parts.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        parts.append(
            f'<text x="{left + pw / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">recall</text>'
        )
        parts.append(
            f'<text x="12" y="{top + ph / 2:.1f}" font-size="11" text-anchor="middle" '
            f'transform="rotate(-90 12 {top + ph / 2:.1f})">precision</text>'
        )
        for entry in summary["per_class"]:
            curve = summary["pr_curves"].get(entry["label"]) or {}
            points = [(0.0, curve["precision"][0])] if curve.get("recall") else []
            points += list(zip(curve.get("recall", []), curve.get("precision", [])))
            if not points:
                continue
            coords = " ".join(f"{left + r * pw:.1f},{top + (1 - p) * ph:.1f}" for r, p in points)
            label = markupsafe.escape(entry["label"])
            parts.append(
                f'<polyline class="dbb-curve" data-class="{label}" points="{coords}" fill="none" '
                f'stroke="{entry["color"]}" stroke-width="1.5"><title>{label}</title></polyline>'
            )
        parts.append("</svg>")
        return "".join(parts)

    def get_summary_template(self):
        """Return the summary: per-class AP and precision–recall curves (only with ground truth)."""
        summary = self.summary()
        if summary is None:
            return None, None
        return View.template_from_package(
            PACKAGE,
            "templates/summary.html",
            summary=summary,
            threshold=self.threshold,
            pr_svg=markupsafe.Markup(self.pr_svg(summary)),
        )
