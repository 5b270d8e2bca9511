"""The regression view on synthetic arrays (no TensorFlow): values, MAE/RMSE, scatter plot, reports."""

from __future__ import annotations

import re

import numpy as np
from sklearn.metrics import mean_absolute_error, mean_squared_error

from digits_core import registry, validate_values
from digits_core.inference import render_html, report_json, run_view
from digits_view_generic.metrics import mae_rmse
from digits_view_generic.regression import RegressionConfigForm, RegressionView
from digits_view_generic.scatter import MAX_POINTS, scatter_svg_data

DATASET = {"userdata": {"target_names": ["cx", "cy"]}}


def _samples(n=6, seed=0):
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(n, 2)).astype(np.float32)
    predicted = true + rng.normal(scale=0.3, size=(n, 2)).astype(np.float32)
    image = rng.integers(0, 256, (8, 8, 1), dtype=np.uint8)
    return [(f"img{i}.png", image, predicted[i], true[i]) for i in range(n)], predicted, true


def test_mae_rmse_match_sklearn():
    rng = np.random.default_rng(3)
    p, t = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    mae, rmse = mae_rmse(p, t)
    np.testing.assert_allclose(mae, mean_absolute_error(t, p, multioutput="raw_values"))
    np.testing.assert_allclose(rmse, np.sqrt(mean_squared_error(t, p, multioutput="raw_values")))


def test_registered_and_config_defaults():
    assert registry.get_view("regression") is RegressionView
    assert validate_values(RegressionConfigForm, {}, "x") == {"show_input": True, "thumbnail_size": 128, "precision": 4}


def test_per_sample_values_and_summary_figures():
    samples, predicted, true = _samples()
    view = RegressionView(DATASET)
    processed = run_view(view, samples)
    first = processed[0].data
    assert [t["name"] for t in first["targets"]] == ["cx", "cy"]
    assert first["targets"][1]["error"] == float(np.float64(predicted[0, 1]) - np.float64(true[0, 1]))
    summary = view.summary()
    assert summary["labelled"] == 6
    np.testing.assert_allclose(
        [t["mae"] for t in summary["per_target"]],
        mean_absolute_error(true, predicted, multioutput="raw_values"),
        rtol=1e-6,
    )
    np.testing.assert_allclose(summary["rmse"], np.sqrt(mean_squared_error(true.ravel(), predicted.ravel())), rtol=1e-6)


def test_html_report_has_values_metrics_and_one_point_per_input():
    samples, predicted, true = _samples(n=7)
    view = RegressionView(DATASET, precision=3)
    html = render_html(view, run_view(view, samples), title="r")
    assert "<script src=" not in html and "http" not in re.sub(r'xmlns="[^"]*"', "", html)
    assert html.count('class="dvg-sample"') == 7
    assert f"{predicted[0, 0]:.3g}" in html
    plots = re.findall(r'<figure class="dvg-plot" data-target="(\w+)">(.*?)</figure>', html, re.S)
    assert [name for name, _ in plots] == ["cx", "cy"]
    assert all(body.count("<circle") == 7 for _, body in plots)
    assert "dvg-mae" in html and ".dvg-point" in html  # CSS inlined


def test_unlabelled_inputs_have_no_summary_and_json_has_predictions():
    samples, predicted, _ = _samples(n=3)
    view = RegressionView({"userdata": {}})
    processed = run_view(view, [(i, x, p, None) for i, x, p, _ in samples])
    assert processed[0].data["targets"][0]["name"] == "t1" and processed[0].data["targets"][0]["true"] is None
    assert view.get_summary_template() == (None, None)
    report = report_json(view, processed)
    assert report["samples"][2]["data"]["targets"][1]["predicted"] == float(predicted[2, 1])


def test_scatter_points_on_the_diagonal_and_capped():
    plot = scatter_svg_data([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])
    x1, y1, x2, y2 = plot["diagonal"]
    for point in plot["points"]:  # exact predictions lie on the y = x line
        assert abs((point["x"] - x1) * (y2 - y1) - (point["y"] - y1) * (x2 - x1)) < 1e-6 * plot["size"] ** 2
    assert plot["points"][0]["y"] > plot["points"][2]["y"]  # larger values are higher up
    big = scatter_svg_data(np.arange(5000.0), np.arange(5000.0))
    assert big["drawn"] == MAX_POINTS and big["total"] == 5000
