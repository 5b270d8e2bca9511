"""Layer visualizations and statistics for one image (issue 15; DIGITS's "Classify One" extras).

Fast tests check the pictures and statistics on numpy arrays and the form's one-image rule;
slow tests train one real LeNet (module fixture, 1 epoch on scikit-learn digits) and check
every layer's activations against a Keras sub-model of the snapshot and its weights against
the layer's own, then walk the model page in headless Chromium against a real ``digits serve``.
Screenshots go to ``test-artifacts/`` (git-ignored)::

    flock /tmp/digits-heavy.lock .venv/bin/python -m pytest tests/test_ui_layer_vis.py
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from digits_core.inference.visualize import (
    HISTOGRAM_BINS,
    LayerVisualizations,
    VisLimits,
    draw_activation,
    draw_weights,
    tensor_statistics,
)


def _assert_stats(stats, values):
    finite = np.asarray(values, np.float64).reshape(-1)
    finite = finite[np.isfinite(finite)]
    assert stats["mean"] == pytest.approx(finite.mean(), rel=1e-6, abs=1e-7)
    assert stats["std"] == pytest.approx(finite.std(), rel=1e-6, abs=1e-7)
    assert stats["min"] == pytest.approx(finite.min(), abs=1e-7) and stats["max"] == pytest.approx(
        finite.max(), abs=1e-7
    )
    counts, edges = np.histogram(finite, bins=HISTOGRAM_BINS)
    assert stats["histogram"]["counts"] == counts.tolist()
    assert np.allclose(stats["histogram"]["edges"], edges)


# -- numpy only ---------------------------------------------------------------------------------------------------


def test_statistics_equal_numpy_and_leave_out_non_finite_values():
    rng = np.random.default_rng(3)
    values = rng.normal(2.0, 3.0, size=(7, 9, 5)).astype(np.float32)
    values[0, 0, 0], values[1, 2, 3] = np.nan, np.inf
    stats = tensor_statistics(values)
    assert stats["count"] == values.size and stats["nonfinite"] == 2
    _assert_stats(stats, values)
    assert sum(stats["histogram"]["counts"]) == values.size - 2
    empty = tensor_statistics(np.full(4, np.nan))
    assert empty["mean"] is None and empty["histogram"]["counts"] == []


def test_feature_maps_are_capped_sampled_and_share_one_colour_scale():
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(200, 150, 100)).astype(np.float32)
    pic = draw_activation(maps, VisLimits())
    # 32 of 100 maps, every 5th pixel (200 px > 48 px), 6 columns of 40x30 tiles with 1 px gaps.
    assert (pic.kind, pic.shown, pic.total, pic.stride) == ("maps", 32, 100, [5, 5])
    assert (pic.height, pic.width) == (6 * 41 - 1, 6 * 31 - 1) == pic.image.shape
    shown = maps[::5, ::5, :32]
    low, high = shown.min(), shown.max()
    tile = pic.image[41:81, 31 * 3 : 31 * 3 + 30]  # map 6*1 + 3 = 9
    expected = np.rint((shown[:, :, 9].astype(np.float64) - low) * 254.0 / (high - low))
    assert np.array_equal(tile, expected.astype(np.uint8))
    assert (pic.image[40, :] == 255).all() and (pic.image[:, 30] == 255).all()  # the gaps
    assert pic.image.min() == 0 and pic.image[pic.image < 255].max() == 254
    small = draw_activation(maps[:20, :20, :3], VisLimits(max_channels=2))
    assert (small.shown, small.total, small.stride) == (2, 3, [1, 1])
    vector = draw_activation(np.arange(2000, dtype=np.float32), VisLimits())
    assert (vector.kind, vector.shown, vector.total, vector.image.shape) == ("vector", 1024, 2000, (32, 32))
    scores = draw_activation(np.array([0.1, 0.7, 0.2]), VisLimits())
    assert scores.image.tolist() == [[0, 254, 42]]  # a short vector is one row


def test_weights_pictures_filters_rgb_filters_and_dense_matrices():
    rng = np.random.default_rng(1)
    conv = rng.normal(size=(3, 3, 16, 40)).astype(np.float32)
    pic = draw_weights(conv, VisLimits())
    assert (pic.kind, pic.shown, pic.total) == ("filters", 256, 640)
    # Output-major: tile 17 is output filter 1, input channel 1.
    cols = 16
    r, c = divmod(17, cols)
    tile = pic.image[r * 4 : r * 4 + 3, c * 4 : c * 4 + 3]
    shown = np.transpose(conv, (3, 2, 0, 1)).reshape(-1, 3, 3)[:256]
    expected = np.rint((conv[:, :, 1, 1].astype(np.float64) - shown.min()) * 254.0 / (shown.max() - shown.min()))
    assert np.array_equal(tile, expected.astype(np.uint8))
    rgb = draw_weights(rng.normal(size=(5, 5, 3, 8)), VisLimits())
    assert (rgb.kind, rgb.shown, rgb.total, rgb.image.shape) == ("rgb-filters", 8, 8, (17, 17, 3))
    dense = draw_weights(rng.normal(size=(800, 500)), VisLimits())
    # One row per output unit, sampled to at most 128 px a side.
    assert (dense.kind, dense.stride, dense.image.shape, dense.total) == ("matrix", [4, 7], (125, 115), 400_000)
    assert dense.shown == 125 * 115


def test_pictures_are_png_data_uris():
    import base64

    from PIL import Image

    pic = draw_activation(np.random.default_rng(2).normal(size=(8, 8, 4)), VisLimits())
    data = pic.to_json()
    assert data["uri"].startswith("data:image/png;base64,") and "image" not in data
    image = Image.open(io.BytesIO(base64.b64decode(data["uri"].split(",", 1)[1])))
    assert image.mode == "P" and image.size == (data["width"], data["height"])
    assert image.getpalette()[255 * 3 : 256 * 3] == [255, 255, 255]  # the gaps
    assert "uri" not in pic.to_json(include_image=False)


def test_partial_captions_histograms_and_escaping(tmp_path):
    """What the results page's partial says about each picture, without a model."""
    import re

    from flask import render_template

    from digits_core.web import create_app

    limits = VisLimits()
    rng = np.random.default_rng(0)
    maps, dense, matrix = rng.normal(size=(200, 200, 3)), rng.normal(size=(500, 10)), rng.normal(size=(800, 500))

    def entry(values, picture, **extra):
        return {"shape": list(values.shape), "stats": tensor_statistics(values), "picture": picture.to_json(), **extra}

    vis = {
        "input_id": "x.png",
        "seconds": 0.1,
        "limits": vars(limits),
        "notes": ["a note"],
        "layers": [
            {
                "index": 0,
                "name": "<b>conv</b>",
                "type": "Conv2D",
                "params": 1234,
                "activations": entry(maps, draw_activation(maps, limits)),
                "weights": entry(dense, draw_weights(dense, limits), name="kernel"),
            },
            {
                "index": 1,
                "name": "seq",
                "type": "Dense",
                "params": 0,
                "activations": entry(matrix, draw_activation(matrix, limits)),
                "weights": None,
            },
        ],
    }
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
    with app.test_request_context():
        html = render_template("_layer_vis.html", vis=vis, job=type("J", (), {"id": "job-1"})())
    captions = re.findall(r'class="lv-caption[^>]*>([^<]*)<', html)
    assert captions == [
        "3 of 3 maps · sampled 1 in 5 px",
        "1250 of 5000 values · sampled 1 in 4 columns",
        "14375 of 400000 values · sampled 1 in 7 rows, 1 in 4 columns",
    ]
    assert html.count("<rect ") == 3 * HISTOGRAM_BINS and "1,234 parameters" in html and "a note" in html
    assert "&lt;b&gt;conv&lt;/b&gt;" in html and "<b>conv</b>" not in html
    assert "/api/models/job-1/infer" in html
    assert 'id="layer-nav"' not in html  # a short network needs no index
    vis["layers"] = [{**vis["layers"][1], "index": i, "name": f"layer{i}"} for i in range(13)]
    with app.test_request_context():
        html = render_template("_layer_vis.html", vis=vis, job=type("J", (), {"id": "job-1"})())
    nav = re.search(r'<nav [^>]*id="layer-nav".*?</nav>', html, re.DOTALL).group(0)
    assert re.findall(r'href="#layer-(\d+)">layer\1<', nav) == [str(i) for i in range(13)]


def test_more_than_one_upload_is_refused_on_the_form(tmp_path):
    """Visualizations are for one image: the form says so next to the box and keeps it ticked."""
    from digits_core.jobs import Job, JobStatus
    from digits_core.web import create_app

    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[tmp_path])
    ds = Job.create("dataset", "d", jobs_dir=tmp_path / "jobs", plugin_id="image-classification")
    ds.set_status(JobStatus.DONE)
    job = Job.create("model", "m", jobs_dir=tmp_path / "jobs", dataset_id=ds.id)
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-1.keras").write_bytes(b"x")
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    resp = client.post(
        f"/models/{job.id}/infer",
        data={
            "csrf_token": token,
            "input_mode": "upload",
            "visualize": "1",
            "view_id": "image-classification",
            "images": [(io.BytesIO(b"a"), "a.png"), (io.BytesIO(b"b"), "b.png")],
        },
        content_type="multipart/form-data",
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert "Layer visualizations are for one image" in html and "2 were chosen" in html
    assert 'id="infer-visualize" checked' in html


# -- a real trained model ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A LeNet trained 1 epoch on 28x28 scikit-learn digits (image mean subtracted), and one test image."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from demo import export_sklearn_digits

    import digits_core.datasets
    import digits_core.engine

    root = tmp_path_factory.mktemp("layer-vis")
    data = root / "digits"
    export_sklearn_digits(data, per_class=8)
    jobs = root / "jobs"
    ds = digits_core.datasets.create_dataset(
        "image-classification",
        {"folder": str(data), "image_type": "grayscale", "width": 28, "height": 28},
        name="d",
        jobs_dir=jobs,
    )
    job = digits_core.engine.train(ds.id, "lenet", name="vis lenet", jobs_dir=jobs, epochs=1, batch_size=16)
    from PIL import Image

    image = root / "my seven.png"  # already 28x28: inference and the reference read the same pixels
    Image.open(sorted((data / "7").glob("*.png"))[0]).resize((28, 28), Image.Resampling.NEAREST).save(image)
    return {"root": root, "jobs": jobs, "job": job, "image": image}


def _reference(trained):
    """The snapshot loaded by plain Keras and the image prepared by the engine's numpy preprocessing."""
    import keras
    from PIL import Image

    from digits_core.engine.preprocessing import Preprocessing

    job = trained["job"]
    snapshot = sorted((job.path / "snapshots").glob("*.keras"))[-1]
    model = keras.models.load_model(snapshot, compile=False)
    raw = np.asarray(Image.open(trained["image"]))[:, :, None]
    x = Preprocessing.load(job.path).apply(raw[None])
    return model, x


@pytest.mark.slow
def test_activations_equal_keras_submodels_and_weights_equal_the_layers(trained):
    import keras

    from digits_core.inference.visualize import visualize

    vis = visualize(trained["job"].id, str(trained["image"]), jobs_dir=trained["jobs"])
    model, x = _reference(trained)
    assert [layer["name"] for layer in vis.layers] == [layer.name for layer in model.layers]
    assert vis.input_id.endswith("my seven.png") and vis.notes == []
    checked_maps = 0
    for entry, layer in zip(vis.layers, model.layers):
        reference = np.asarray(keras.Model(model.inputs, layer.output)([x], training=False))[0]
        act = entry["activations"]
        assert act["shape"] == list(reference.shape), layer.name
        _assert_stats(act["stats"], reference)
        expected = draw_activation(reference, vis.limits)
        # Same picture up to one colour level (float rounding of a different graph).
        assert act["picture"].image.shape == expected.image.shape, layer.name
        assert np.abs(act["picture"].image.astype(int) - expected.image).max() <= 1, layer.name
        checked_maps += act["picture"].kind == "maps"
        own = layer.get_weights()
        if own:
            assert entry["weights"]["name"] == "kernel" and entry["weights"]["shape"] == list(own[0].shape)
            _assert_stats(entry["weights"]["stats"], own[0])
            assert np.array_equal(entry["weights"]["picture"].image, draw_weights(own[0], vis.limits).image)
            assert entry["params"] == sum(w.size for w in own)
        else:
            assert entry["weights"] is None
    assert checked_maps == 5  # image, conv1, pool1, conv2, pool2
    # The last layer is the prediction infer() returns.
    from digits_core.inference import infer

    probabilities = infer(trained["job"].id, [str(trained["image"])], jobs_dir=trained["jobs"]).samples[0].output
    assert vis.layers[-1]["activations"]["stats"]["mean"] == pytest.approx(float(np.mean(probabilities)), rel=1e-6)
    assert vis.layers[-1]["activations"]["stats"]["max"] == pytest.approx(float(probabilities.max()), rel=1e-5)
    data = json.loads(json.dumps(vis.to_json()))
    assert data["layers"][1]["activations"]["picture"]["uri"].startswith("data:image/png;base64,")


@pytest.mark.slow
def test_a_folder_is_refused_and_limits_apply(trained):
    from digits_core.errors import InferenceError
    from digits_core.inference.visualize import visualize

    with pytest.raises(InferenceError, match=r"for one image .* 8 inputs"):
        visualize(trained["job"].id, str(trained["root"] / "digits" / "3"), jobs_dir=trained["jobs"])
    vis = visualize(
        trained["job"].id,
        str(trained["image"]),
        jobs_dir=trained["jobs"],
        limits=VisLimits(max_channels=4, max_layers=2),
    )
    assert isinstance(vis, LayerVisualizations)
    conv1 = vis.layers[1]["activations"]
    assert (conv1["picture"].shown, conv1["picture"].total) == (4, 20)
    assert (
        vis.layers[2]["activations"]["picture"] is None
        and vis.layers[2]["activations"]["stats"]["count"] == 12 * 12 * 20
    )
    assert "first 2 of 9 layers" in vis.notes[-1]


@pytest.mark.slow
def test_cli_writes_the_same_visualizations(trained, tmp_path, capsys):
    from digits_core.cli import main
    from digits_core.inference.visualize import visualize

    out = tmp_path / "layers.json"
    assert (
        main(
            [
                "--jobs-dir",
                str(trained["jobs"]),
                "infer",
                "--model",
                trained["job"].id,
                str(trained["image"]),
                "--visualize",
                str(out),
            ]
        )
        == 0
    )
    assert f"wrote {out} (9 layers of" in capsys.readouterr().err
    written = json.loads(out.read_text())
    expected = visualize(trained["job"].id, str(trained["image"]), jobs_dir=trained["jobs"]).to_json()
    assert [layer["name"] for layer in written["layers"]] == [layer["name"] for layer in expected["layers"]]
    for got, want in zip(written["layers"], expected["layers"]):
        assert got["activations"]["stats"]["mean"] == pytest.approx(want["activations"]["stats"]["mean"], rel=1e-6)
        assert got["activations"]["picture"]["uri"].startswith("data:image/png;base64,")
    folder = trained["root"] / "digits" / "3"
    assert (
        main(
            [
                "--jobs-dir",
                str(trained["jobs"]),
                "infer",
                "--model",
                trained["job"].id,
                str(folder),
                "--visualize",
                str(tmp_path / "many.json"),
            ]
        )
        != 0
    )
    assert "for one image" in capsys.readouterr().err and not list(tmp_path.glob("many.json*"))


@pytest.mark.slow
def test_subclassed_and_shared_layers_are_explained_not_fatal():
    """A subclassed model has no per-layer outputs (weights only); a layer called twice shows its first call."""
    from types import SimpleNamespace

    import keras

    from digits_core.engine.preprocessing import Preprocessing
    from digits_core.inference.visualize import layer_visualizations

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.conv = keras.layers.Conv2D(4, 3, name="c")
            self.flat = keras.layers.Flatten(name="f")
            self.dense = keras.layers.Dense(2, name="d")

        def call(self, x):
            return self.dense(self.flat(self.conv(x)))

    def model(network):
        prep = Preprocessing("none", None, 1.0, None, (8, 8, 1))
        return SimpleNamespace(model=network, preprocessing=prep, describe=lambda: {"id": "test"})

    net = Net()
    net(np.zeros((1, 8, 8, 1), np.float32))
    vis = layer_visualizations(model(net), np.ones((8, 8, 1), np.uint8))
    assert "subclassed" in vis.notes[0]
    assert [(e["name"], e["activations"], e["weights"] and e["weights"]["shape"]) for e in vis.layers] == [
        ("c", None, [3, 3, 1, 4]),
        ("f", None, None),
        ("d", None, [144, 2]),
    ]
    _assert_stats(vis.layers[2]["weights"]["stats"], net.dense.kernel.numpy())

    inputs = keras.Input((8, 8, 1))
    shared = keras.layers.Conv2D(2, 3, padding="same", name="shared")
    outputs = keras.layers.Add(name="sum")([shared(inputs), shared(inputs * 2.0)])
    vis = layer_visualizations(model(keras.Model(inputs, outputs)), np.ones((8, 8, 1), np.uint8))
    by_name = {e["name"]: e for e in vis.layers}
    assert vis.notes == ['Layer "shared" is called 2 times: its activations are those of the first call.']
    first_call = shared(np.ones((1, 8, 8, 1), np.float32)).numpy()[0]
    _assert_stats(by_name["shared"]["activations"]["stats"], first_call)
    assert by_name["shared"]["weights"]["shape"] == [3, 3, 1, 2] and by_name["sum"]["activations"]["shape"] == [8, 8, 2]


# -- in a real browser ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(trained):
    from live_server import running_server

    with running_server(trained["jobs"], log_dir=trained["root"]) as live:
        yield live


@pytest.fixture(scope="module")
def page(chromium, server):
    """A page on the module's Chromium; JavaScript errors and CSP violations fail the module."""
    errors: list[str] = []
    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(180_000)  # only the bound after which a wait on page state fails
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    yield page
    page.context.close()
    assert not errors, f"JavaScript errors: {errors}"


@pytest.mark.slow
@pytest.mark.browser
def test_classify_one_shows_every_layer_with_statistics(trained, server, page):
    from browser_support import ARTIFACTS, assert_fits_a_phone

    job = trained["job"]
    page.goto(f"{server.url}/models/{job.id}")
    page.set_input_files("#infer-images", str(trained["image"]))
    page.check("#infer-visualize")
    page.click("#infer-button")
    page.wait_for_selector("#layer-vis")
    page.screenshot(path=str(ARTIFACTS / "layer-vis-classify-one.png"), full_page=True)
    assert_fits_a_phone(page, "Classify One with layer visualizations", screenshot="layer-vis-classify-one-375")

    rows = page.locator("#layer-vis tr.lv-layer")
    names = [rows.nth(i).get_attribute("data-layer") for i in range(rows.count())]
    assert names == ["image", "conv1", "pool1", "conv2", "pool2", "flatten", "fc1", "fc2", "probabilities"]
    conv1 = page.locator("#layer-1")
    assert "Conv2D" in conv1.inner_text() and "520 parameters" in conv1.inner_text()
    assert "20 of 20 maps" in conv1.locator(".lv-activations").inner_text()
    assert "kernel 5 × 5 × 1 × 20" in conv1.locator(".lv-weights").inner_text()
    assert "32 of 50 maps" in page.locator("#layer-3 .lv-activations").inner_text()
    assert "256 of 1000 filters" in page.locator("#layer-3 .lv-weights").inner_text()
    assert page.locator("#layer-2 .lv-weights").count() == 0 and "no weights" in page.locator("#layer-2").inner_text()
    # Every picture decoded, drawn at least at its own size; 20 histogram bars per tensor.
    pictures = page.locator("#layer-vis img.lv-picture")
    assert pictures.count() == 9 + 4
    sizes = page.evaluate("""() => [...document.querySelectorAll('#layer-vis img.lv-picture')].map(
        i => [i.complete, i.naturalWidth, i.width, i.alt])""")
    assert all(done and natural > 0 and width >= natural for done, natural, width, _ in sizes), sizes
    assert page.locator("#layer-vis svg.lv-hist").count() == 13
    assert page.locator("#layer-1 .lv-activations svg.lv-hist rect").count() == HISTOGRAM_BINS
    # The classification above is the usual one; the page's numbers are the JSON twin's.
    assert page.locator(".dcv-id").all_inner_texts() == ["my seven.png"]
    means = page.locator("#layer-vis .lv-activations .lv-mean")
    shown_means = [
        (means.nth(i).inner_text(), float(means.nth(i).get_attribute("data-value"))) for i in range(means.count())
    ]
    twin = page.evaluate(
        """([url, path]) => fetch('/api/csrf-token').then(r => r.json()).then(t =>
        fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRFToken': t.csrf_token},
                    body: JSON.stringify({inputs: [path], visualize: true})})).then(r => r.json())""",
        [f"/api/models/{job.id}/infer", str(trained["image"])],
    )
    many = page.evaluate(
        """([url, paths]) => fetch('/api/csrf-token').then(r => r.json()).then(t =>
        fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRFToken': t.csrf_token},
                    body: JSON.stringify({inputs: paths, visualize: true})})).then(r => r.json().then(
                    body => [r.status, JSON.stringify(body)]))""",
        [f"/api/models/{job.id}/infer", [str(trained["image"]), str(trained["root"] / "digits" / "1")]],
    )
    assert many[0] == 400 and "for one image" in many[1] and "9 inputs" in many[1], many
    layers = twin["visualizations"]["layers"]
    assert [layer["name"] for layer in layers] == names
    assert len(shown_means) == len(layers)
    for (text, value), layer in zip(shown_means, layers):
        mean = layer["activations"]["stats"]["mean"]
        assert value == pytest.approx(mean, rel=1e-6, abs=1e-9)
        assert text == (f"{mean:.4f}" if 1e-3 <= abs(mean) < 1000 else f"{mean:.3e}"), (text, mean)

    # The form's own JSON twin (same form, Accept: application/json) answers the same layers.
    page.goto(f"{server.url}/models/{job.id}")
    page.set_input_files("#infer-images", str(trained["image"]))
    page.check("#infer-visualize")
    form_twin = page.evaluate("""() => { const f = document.getElementById('infer-form');
        return fetch(f.action, {method: 'POST', body: new FormData(f), headers: {Accept: 'application/json'}})
            .then(r => r.json()); }""")
    assert [layer["name"] for layer in form_twin["visualizations"]["layers"]] == names
    assert form_twin["visualizations"]["input_id"] == "my seven.png"

    # Several images with the box ticked: refused on the form, the box stays ticked.
    page.set_input_files(
        "#infer-images", [str(trained["image"]), str(sorted((trained["root"] / "digits" / "1").glob("*.png"))[0])]
    )
    page.check("#infer-visualize")
    page.click("#infer-button")
    page.wait_for_selector("#infer-errors")
    assert "for one image" in page.locator("#infer-errors").inner_text()
    assert page.locator("#infer-visualize").is_checked()
