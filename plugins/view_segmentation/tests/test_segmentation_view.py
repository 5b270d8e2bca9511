"""Tests of the image-segmentation view on synthetic arrays (no TensorFlow)."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image
from sklearn.metrics import f1_score, jaccard_score

from digits_core import registry, to_display_uint8, validate_values
from digits_core.inference import render_html, report_json, run_view
from digits_view_segmentation import maps
from digits_view_segmentation.view import SegmentationView

PALETTE = [[0, 0, 0], [255, 0, 0], [0, 0, 255]]
LABELS = ["background", "ventricle", "myocardium"]


def _decode(uri: str) -> np.ndarray:
    assert uri.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))


def _one_hot(classes: np.ndarray, n: int) -> np.ndarray:
    return np.eye(n, dtype=np.float32)[classes]


def _sample(seed: int, size: int = 16):
    rng = np.random.default_rng(seed)
    truth = np.zeros((size, size), np.int64)
    truth[3:10, 4:12] = 1
    truth[10:14, 2:6] = 2
    predicted = truth.copy()
    flips = rng.random((size, size)) < 0.2
    predicted[flips] = rng.integers(0, 3, flips.sum())
    return truth, predicted


def test_registered_through_entry_point():
    assert registry.get_view("image-segmentation") is SegmentationView


def test_config_form():
    form = SegmentationView.get_config_form()
    assert validate_values(form, {}) == {
        "color_map": "dataset",
        "opacity": 0.5,
        "show_ground_truth": True,
        "ignore_background": True,
    }
    with pytest.raises(Exception, match="opacity"):
        validate_values(form, {"opacity": "1.5"})


def test_prediction_colours_follow_dataset_palette_and_builtin_map():
    truth, predicted = _sample(0)
    view = SegmentationView({"class_labels": LABELS, "color_palette": PALETTE})
    data = view.process_data("s", np.zeros((16, 16), np.uint8), _one_hot(predicted, 3))
    colours = _decode(data["prediction"])
    assert np.array_equal(colours, np.asarray(PALETTE, np.uint8)[predicted])

    builtin = SegmentationView({"class_labels": LABELS, "color_palette": PALETTE}, color_map="builtin")
    colours = _decode(builtin.process_data("s", np.zeros((16, 16), np.uint8), _one_hot(predicted, 3))["prediction"])
    assert np.array_equal(colours, np.asarray(maps.BUILTIN_PALETTE[:3], np.uint8)[predicted])


def test_overlay_blends_foreground_and_outlines_truth():
    truth, predicted = _sample(1)
    image = np.full((16, 16), 100, np.uint8)
    view = SegmentationView({"color_palette": PALETTE}, opacity=0.25)
    data = view.process_data("s", image, _one_hot(predicted, 3), truth)
    over = _decode(data["overlay"]).astype(int)
    edge = maps.outline(truth)
    assert np.all(over[edge] == 255)
    inside = (~edge) & (predicted == 1)
    assert np.all(over[inside] == np.rint(0.75 * 100 + 0.25 * np.array([255, 0, 0])).astype(int))
    background = (~edge) & (predicted == 0)
    assert np.all(over[background] == 100)


def test_outline_is_the_region_border():
    mask = np.zeros((6, 6), int)
    mask[1:5, 1:5] = 1
    expected = mask.astype(bool).copy()
    expected[2:4, 2:4] = False
    assert np.array_equal(maps.outline(mask), expected)


def test_dice_and_iou_match_an_independent_computation():
    view = SegmentationView({"class_labels": LABELS}, ignore_background=False)
    truths, preds = [], []
    for seed in range(3):
        truth, predicted = _sample(seed)
        data = view.process_data(f"s{seed}", np.zeros((16, 16), np.float32), _one_hot(predicted, 3), truth)
        f1 = f1_score(truth.ravel(), predicted.ravel(), labels=[0, 1, 2], average=None)
        iou = jaccard_score(truth.ravel(), predicted.ravel(), labels=[0, 1, 2], average=None)
        assert [s["dice"] for s in data["scores"]] == pytest.approx(list(f1))
        assert [s["iou"] for s in data["scores"]] == pytest.approx(list(iou))
        assert data["mean_dice"] == pytest.approx(f1.mean())
        truths.append(f1)
        preds.append(iou)
    summary = view.summary()
    assert [c["mean_dice"] for c in summary["per_class"]] == pytest.approx(list(np.mean(truths, axis=0)))
    assert [c["mean_iou"] for c in summary["per_class"]] == pytest.approx(list(np.mean(preds, axis=0)))


def test_background_left_out_of_the_sample_mean():
    truth, predicted = _sample(2)
    view = SegmentationView({})
    data = view.process_data("s", np.zeros((16, 16), np.uint8), _one_hot(predicted, 3), truth)
    f1 = f1_score(truth.ravel(), predicted.ravel(), labels=[1, 2], average=None)
    assert data["mean_dice"] == pytest.approx(f1.mean())


def test_binary_probability_output_and_resized_ground_truth():
    probability = np.zeros((8, 8, 1), np.float32)
    probability[2:6, 2:6, 0] = 0.9
    truth = np.zeros((4, 4), np.int64)
    truth[1:3, 1:3] = 1  # half resolution: resized to the output's 8×8 (nearest)
    view = SegmentationView({})
    data = view.process_data("s", np.zeros((8, 8, 1), np.uint8), probability, truth)
    assert data["classes"] == [0, 1]
    assert data["mean_dice"] == pytest.approx(1.0)


def test_16bit_input_windowed_between_1st_and_99th_percentile():
    image = np.arange(10000, dtype=np.uint16).reshape(100, 100) * 6
    shown = to_display_uint8(image[:, :, None])
    low, high = np.percentile(image, [1, 99])
    assert shown.dtype == np.uint8
    assert shown[image <= low].max() == 0 and shown[image >= high].min() == 255
    middle = image.ravel()[5000]
    assert shown.ravel()[5000] == int(np.rint((middle - low) * 255 / (high - low)))
    view = SegmentationView({})
    data = view.process_data("dicom", image, np.zeros((100, 100, 2), np.float32))
    assert np.array_equal(_decode(data["image"])[:, :, 0], shown)


def test_page_has_legend_with_class_labels_each_sample_and_summary():
    view = SegmentationView({"class_labels": LABELS, "color_palette": PALETTE})
    samples = []
    for seed in range(3):
        truth, predicted = _sample(seed)
        samples.append((f"case-{seed}", np.zeros((16, 16), np.int16), _one_hot(predicted, 3), truth))
    processed = run_view(view, samples)
    page = render_html(view, processed)

    class Parser(HTMLParser):
        ids, legend = [], []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if "data-input-id" in attrs:
                self.ids.append(attrs["data-input-id"])
            if tag == "li" and "data-class" in attrs:
                self.legend.append(attrs["data-class"])

    parser = Parser()
    parser.feed(page)
    assert parser.ids == ["case-0", "case-1", "case-2"]
    assert parser.legend == ["0", "1", "2"]
    assert "ventricle" in page and "myocardium" in page and "#ff0000" in page
    assert "Mean Dice" in page and ".dsv-sample" in page
    data = report_json(view, processed)
    assert len(data["summary"]["summary"]["per_class"]) == 3
    assert data["header"]["legend"][1] == {"class": 1, "label": "ventricle", "color": "#ff0000"}


def test_config_template_renders_the_form():
    import jinja2

    from digits_core import bind_form

    form = bind_form(SegmentationView.get_config_form(), {"opacity": "0.3"}, meta={"csrf": False})
    source, context = SegmentationView.get_config_template(form)
    html = jinja2.Environment(autoescape=True).from_string(source).render(**context)
    assert 'name="opacity"' in html and 'value="0.3"' in html and "Built-in categorical map" in html
