"""The ``saliency`` view runs the model it gets as ``model_context`` (no TensorFlow: the model is numpy)."""

from __future__ import annotations

import numpy as np

from digits_core import registry
from digits_core.inference import render_html, run_view
from digits_core.interfaces import ViewContext
from digits_view_classification.saliency import SaliencyView, occlusion_saliency


def _model(batch):
    """Class 1 grows with the brightness of the top-left 4x4 corner; nothing else matters."""
    batch = np.asarray(batch, np.float64)
    corner = batch[:, :4, :4, 0].mean(axis=(1, 2)) / 255.0
    return np.stack([1.0 - corner, corner], axis=1)


def _context(run=_model):
    return ViewContext("m1", 3.0, "classification", ["dark", "bright"], (16, 16, 1), run)


def test_saliency_lights_the_region_the_decision_rests_on():
    image = np.full((16, 16, 1), 200, np.uint8)
    image[:4, :4] = 255
    saliency, target = occlusion_saliency(image, _model, grid=4)
    assert target == 1
    assert saliency[:4, :4].min() == 1.0  # covering the corner costs the most
    assert saliency[4:, :].max() == 0.0 and saliency[:, 4:].max() == 0.0


def test_view_renders_the_map_from_its_model_context_without_a_model_id():
    assert registry.get_view("saliency") is SaliencyView
    calls = []
    view = SaliencyView({"class_labels": ["dark", "bright"]}, grid=4)
    view.model_context = _context(lambda batch: calls.append(len(batch)) or _model(batch))
    image = np.full((16, 16, 1), 230, np.uint8)
    processed = run_view(view, [("corner.png", image, _model(image[None])[0], 1)])
    data = processed[0].data
    assert calls == [17]  # the input and its 16 covered copies, in one run
    assert data["saliency"].startswith("data:image/png;base64,") and data["saliency_class"] == "bright"
    assert data["predictions"][0]["label"] == "bright"
    html = render_html(view, processed, title="t", info={})
    assert "Occlusion saliency of corner.png" in html and "Confusion" in html  # the classification summary stays


def test_without_a_model_it_says_why_the_map_is_missing():
    view = SaliencyView({"class_labels": ["dark", "bright"]})
    data = run_view(view, [("a.png", np.zeros((16, 16, 1), np.uint8), np.array([0.9, 0.1]), None)])[0].data
    assert data["saliency"] is None and "without the model" in data["saliency_note"]
