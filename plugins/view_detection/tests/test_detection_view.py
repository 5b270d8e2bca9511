"""bounding-boxes view: drawing, TP/FP/FN, per-class AP and PR curves in a real HTML report (no TensorFlow)."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from digits_core import registry, validate_values
from digits_core.inference import render_html, report_json, run_view
from digits_view_detection.view import DISPLAY_SIZE, BoundingBoxesView

LABELS = ["dontcare", "cat", "dog"]
PALETTE = [[128, 128, 128], [255, 0, 0], [0, 0, 255]]


def _decode(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB"))


def test_registered_with_config_defaults():
    assert registry.get_view("bounding-boxes") is BoundingBoxesView
    form = BoundingBoxesView.get_config_form()
    assert validate_values(form, {}) == {"score_threshold": 0.3, "iou_threshold": 0.5, "show_ground_truth": True}
    with pytest.raises(Exception, match="score_threshold"):
        validate_values(form, {"score_threshold": "2"})


def test_boxes_drawn_in_palette_threshold_and_counts():
    view = BoundingBoxesView({"class_labels": LABELS, "color_palette": PALETTE}, score_threshold=0.5)
    image = np.zeros((32, 32, 3), np.uint8)
    pred = np.array([[1, 0.9, 4, 4, 12, 12], [2, 0.8, 20, 20, 30, 30], [1, 0.2, 0, 20, 8, 30]])
    truth = np.array([[1, 4, 4, 12, 12], [2, 2, 18, 10, 28]], np.float32)
    data = view.process_data("a.png", image, pred, truth)
    assert [d["label"] for d in data["detections"]] == ["cat", "dog"]  # 0.2 is under the threshold
    assert [d["status"] for d in data["detections"]] == ["tp", "fp"]
    assert data["counts"] == {"tp": 1, "fp": 1, "fn": 1}
    drawn = _decode(data["image"])
    scale = DISPLAY_SIZE // 32
    assert drawn.shape == (32 * scale, 32 * scale, 3)
    assert tuple(drawn[4 * scale, 8 * scale]) == (255, 0, 0)  # top edge of the cat box, in the palette colour
    assert tuple(drawn[20 * scale, 25 * scale]) == (0, 0, 255)  # the dog box
    # the missed dog is dashed: its top edge is partly drawn, partly not
    edge = drawn[18 * scale, 2 * scale : 10 * scale]
    blue = (edge == (0, 0, 255)).all(axis=1)
    assert blue.any() and not blue.all()


def test_report_has_ap_table_and_pr_curves():
    view = BoundingBoxesView({"class_labels": LABELS, "color_palette": PALETTE})
    samples = [
        ("perfect", np.zeros((16, 16, 3), np.uint8), np.array([[1, 0.9, 1, 1, 8, 8]]), np.array([[1, 1, 1, 8, 8]])),
        ("missed", np.zeros((16, 16, 3), np.uint8), np.zeros((0, 6)), np.array([[2, 2, 2, 9, 9]])),
        ("no truth", np.zeros((16, 16, 3), np.uint8), np.array([[2, 0.7, 1, 1, 5, 5]]), None),
    ]
    processed = run_view(view, samples)
    summary = view.summary()
    assert summary["images"] == 2
    assert {c["label"]: c["ap50"] for c in summary["per_class"]} == {"cat": 1.0, "dog": 0.0}
    assert summary["map50"] == pytest.approx(0.5)
    html = render_html(view, processed, title="detections")
    assert 'class="dbb-map50">0.5000' in html and "<svg" in html and 'data-class="cat"' in html
    assert "<script" not in html  # the chart is SVG: the report needs no script
    data = report_json(view, processed)
    assert data["samples"][2]["data"]["counts"] is None
