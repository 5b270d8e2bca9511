"""Tests of the image-classification view on synthetic outputs (no TensorFlow)."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pytest

from digits_core import registry, validate_values
from digits_core.errors import FormValidationError
from digits_core.inference import render_html, report_json, run_view
from digits_view_classification.view import ClassificationView, to_probabilities

LABELS = ["cat", "dog", "bird"]


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _view(**config):
    return ClassificationView({"class_labels": LABELS}, **config)


def test_registered_through_entry_point():
    assert registry.get_view("image-classification") is ClassificationView


def test_config_form_defaults_and_validation():
    values = validate_values(ClassificationView.get_config_form(), {})
    assert values == {"top_n": 5, "show_input": True, "thumbnail_size": 128}
    assert validate_values(ClassificationView.get_config_form(), {"top_n": "2", "show_input": "no"})["top_n"] == 2
    with pytest.raises(FormValidationError, match="top_n"):
        validate_values(ClassificationView.get_config_form(), {"top_n": "0"})


def test_top_n_ordering_labels_and_probabilities():
    view = _view(top_n=2)
    data = view.process_data("a.png", np.zeros((4, 4, 3), np.uint8), np.array([0.2, 0.5, 0.3]))
    assert [p["label"] for p in data["predictions"]] == ["dog", "bird"]
    assert [p["probability"] for p in data["predictions"]] == pytest.approx([0.5, 0.3])
    assert data["image"].startswith("data:image/png;base64,")
    assert data["ground_truth"] is None and data["correct"] is None


def test_logits_are_softmaxed():
    probabilities = to_probabilities(np.array([1.0, -1.0, 3.0]))
    expected = np.exp([1.0, -1.0, 3.0]) / np.exp([1.0, -1.0, 3.0]).sum()
    assert probabilities == pytest.approx(expected)
    assert probabilities.sum() == pytest.approx(1.0)


def test_accuracy_confusion_matrix_and_per_class():
    view = _view(show_input=False)
    outputs = [  # (probabilities, truth)
        ([0.8, 0.1, 0.1], 0),  # right
        ([0.1, 0.8, 0.1], 0),  # cat -> dog, cat in top 5
        ([0.1, 0.7, 0.2], 1),  # right
        ([0.3, 0.2, 0.5], 1),  # dog -> bird
    ]
    for i, (probabilities, truth) in enumerate(outputs):
        view.process_data(f"s{i}", None, np.array(probabilities), truth)
    summary = view.summary()
    assert summary["labelled"] == 4
    assert summary["top1_accuracy"] == pytest.approx(0.5)
    assert summary["top_k"] == 3 and summary["top_k_accuracy"] == pytest.approx(1.0)
    assert summary["classes"] == [0, 1, 2]
    assert summary["confusion_matrix"] == [[1, 1, 0], [0, 1, 1], [0, 0, 0]]
    assert [(c["label"], c["total"], c["correct"]) for c in summary["per_class"]] == [("cat", 2, 1), ("dog", 2, 1)]


def test_ground_truth_given_as_class_name():
    view = _view()
    data = view.process_data("x", None, np.array([0.1, 0.2, 0.7]), "bird")
    assert data["ground_truth"] == 2 and data["correct"] is True


def test_html_page_parses_and_contains_each_sample_and_summary():
    view = _view(top_n=3)
    rng = np.random.default_rng(0)
    samples = [
        (f"img<{i}>.png", rng.integers(0, 255, (8, 8, 3), dtype=np.uint8), rng.dirichlet(np.ones(3)), i % 3)
        for i in range(5)
    ]
    processed = run_view(view, samples)
    page = render_html(view, processed, info={"model": "m1"})
    parser = _Collector()
    parser.feed(page)
    sample_divs = [a for t, a in parser.tags if t == "div" and "data-input-id" in a]
    assert [a["data-input-id"] for a in sample_divs] == [s[0] for s in samples]  # escaped then parsed back
    assert "<0>" not in page and "img&lt;0&gt;.png" in page
    assert "Confusion matrix" in page and "dcv-confusion" in page
    assert ".dcv-sample" in page  # the plugin's CSS is inlined
    assert not [a for t, a in parser.tags if t in ("link", "script") and ("href" in a or "src" in a)]
    imgs = [a["src"] for t, a in parser.tags if t == "img"]
    assert len(imgs) == 5 and all(src.startswith("data:image/png;base64,") for src in imgs)
    data = report_json(view, processed)
    assert data["summary"]["summary"]["labelled"] == 5
    assert data["samples"][0]["data"]["image"] is None  # images dropped from JSON by default


def test_uint16_input_thumbnail_is_windowed():
    view = _view()
    image = np.arange(64, dtype=np.uint16).reshape(8, 8) * 1000
    data = view.process_data("ct", image[:, :, None], np.array([1.0, 0.0, 0.0]))
    assert data["image"].startswith("data:image/png;base64,")


def test_config_template_renders_the_form():
    import jinja2

    from digits_core import bind_form

    form = bind_form(ClassificationView.get_config_form(), {"top_n": "3"}, meta={"csrf": False})
    source, context = ClassificationView.get_config_template(form)
    html = jinja2.Environment(autoescape=True).from_string(source).render(**context)
    assert 'name="top_n"' in html and 'value="3"' in html and 'name="show_input"' in html
