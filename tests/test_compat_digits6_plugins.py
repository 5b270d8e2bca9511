"""DIGITS-6-style plugins, pip-installed with their own setup.py next to digits6-compat, run on DIGITS Core.

The plugins under ``tests/digits6_plugins/`` are written in the DIGITS 6
idiom (``setup.py`` importing ``digits.extensions.*.GROUP``, entry points
all named ``class``, ``flask.ext.wtf`` forms with ``tooltip=``, templates
importing ``helper.html`` macros, C×H×W features and ``1×1×2`` labels, a
3-argument ``process_data``). Each test really installs them with
``pip install --no-build-isolation --target`` (as DIGITS required: their
``setup.py`` imports ``digits``), then lists them, builds datasets from the
command line, trains ``examples/networks/regression_mse.py`` and renders
inference through the view's own template from the CLI and the web UI.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import pip_install_target
from PIL import Image

pytestmark = pytest.mark.slow  # real pip installs (and, below, TensorFlow)

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "digits6_plugins"
DISTRIBUTIONS = {
    "data_gradients": "digits6_fixture_gradients_data",
    "view_gradients": "digits6_fixture_gradients_view",
    "data_stripes": "digits6_fixture_stripes_data",
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> list[Path]:
    """The three fixture plugins pip-installed from copies of their sources (the repo stays clean)."""
    root = tmp_path_factory.mktemp("digits6-plugins")
    paths = []
    for folder in DISTRIBUTIONS:
        source = shutil.copytree(FIXTURES / folder, root / "src" / folder)
        paths.append(pip_install_target(source, root / folder))
    return paths


def _dataset_json(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_listed_with_entry_points_all_named_class(installed, digits_cli):
    listing = digits_cli("plugins", "--json", "--all", pythonpath=installed)
    assert listing.returncode == 0, listing.stderr
    assert listing.heavy_modules == []  # loading DIGITS 6 plugins through digits6-compat imports no TensorFlow
    records = [r for r in json.loads(listing.stdout) if r["distribution"] in DISTRIBUTIONS.values()]
    found = {(r["kind"], r["id"]): r for r in records}
    assert set(found) == {("data", "gradients6"), ("view", "gradients6"), ("data", "stripes6")}, records
    for record in records:
        assert record["name"] == "class" and record["status"] == "loaded", record
    assert found[("data", "gradients6")]["title"] == "Gradients (DIGITS 6)"
    assert found[("data", "gradients6")]["category"] == "Images"


def test_cli_help_shows_tooltips_and_datasets_build_without_tensorflow(installed, digits_cli, tmp_path):
    jobs = str(tmp_path / "jobs")
    help_text = digits_cli("dataset", "create", "gradients6", "--help", pythonpath=installed)
    assert help_text.returncode == 0, help_text.stderr
    flat = " ".join(help_text.stdout.split())
    assert "--train-image-count" in flat and "How many gradient images the training set gets (default: 200)" in flat

    gradients = _dataset_json(
        digits_cli(
            "--jobs-dir",
            jobs,
            "dataset",
            "create",
            "gradients6",
            "--name",
            "g",
            "--train-image-count",
            "12",
            "--val-image-count",
            "4",
            "--image-width",
            "10",
            "--image-height",
            "8",
            "--workers",
            "2",
            "--json",
            pythonpath=installed,
        )
    )["job"]["dataset"]
    assert gradients["stages"] == {"train": 12, "val": 4} and gradients["skipped"] == 0
    assert gradients["feature"]["shape"] == [8, 10, 1] and gradients["feature"]["dtype"] == "uint8"
    assert gradients["label"] == {"kind": "regression", "dtype": "float32", "shape": [2]}

    stripes = digits_cli(
        "--jobs-dir",
        jobs,
        "dataset",
        "create",
        "stripes6",
        "--count",
        "6",
        "--size",
        "16",
        "--workers",
        "1",
        "--json",
        pythonpath=installed,
    )
    info = _dataset_json(stripes)["job"]["dataset"]
    assert info["feature"]["shape"] == [16, 16, 3] and info["feature"]["dtype"] == "float32"
    assert info["label"]["kind"] == "class"
    assert stripes.heavy_modules == []


def _decode(uri: str) -> np.ndarray:
    header, data = uri.split(",", 1)
    assert header == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))


def _arrow_image(html: str) -> np.ndarray:
    match = re.search(r'<div class="col-sm-6 gradients6-image">\s*<img src="([^"]+)"', html)
    assert match, html[-2000:]
    return _decode(match.group(1))


def _pixels(picture: np.ndarray, colour: tuple) -> int:
    return int(np.all(picture == np.array(colour, np.uint8), axis=2).sum())


def _gradient(slope_x: float, slope_y: float, width: int, height: int) -> np.ndarray:
    """What the fixture data plugin encodes for these slopes (H×W uint8)."""
    rows, cols = np.mgrid[:height, :width].astype(float)
    image = 127.5 + slope_x * 255 * (cols - width / 2.0) / width + slope_y * 255 * (rows - height / 2.0) / height
    return np.clip(image, 0, 255).astype(np.uint8)


@pytest.fixture
def on_path(installed, monkeypatch):
    """Make the installed plugins visible to this process's registry and to worker subprocesses."""
    from digits_core import registry

    for path in installed:
        monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*map(str, installed), os.environ.get("PYTHONPATH", "")]))
    for variable in [v for v in os.environ if v.startswith("DIGITS_")]:
        monkeypatch.delenv(variable)
    registry.reload()
    yield
    registry.reload()


def test_trained_and_shown_through_the_view_on_cli_and_web(installed, on_path, digits_cli, tmp_path, capsys):
    from digits_core.cli import main

    jobs = tmp_path / "jobs"
    base = ["--jobs-dir", str(jobs)]
    dataset = _dataset_json(
        digits_cli(
            *base,
            "dataset",
            "create",
            "gradients6",
            "--train-image-count",
            "48",
            "--val-image-count",
            "8",
            "--image-width",
            "16",
            "--image-height",
            "16",
            "--workers",
            "1",
            "--json",
            pythonpath=installed,
        )
    )["job"]

    assert (
        main(
            base
            + [
                "train",
                "--dataset",
                dataset["id"],
                "--network",
                str(REPO / "examples" / "networks" / "regression_mse.py"),
                "--epochs",
                "2",
                "--batch-size",
                "16",
                "--seed",
                "1",
                "--name",
                "gradients",
                "--quiet",
                "--json",
            ]
        )
        == 0
    )
    model = json.loads(capsys.readouterr().out)
    assert model["status"] == "Done" and model["task"] == "regression"

    # CLI: the data plugin's inference form as options, the DIGITS 6 view's template in the HTML report
    report = tmp_path / "report.html"
    assert (
        main(
            base
            + [
                "infer",
                "--model",
                model["job_id"],
                "--gradient-x",
                "0.3",
                "--gradient-y",
                "-0.2",
                "--view",
                "gradients6",
                "--view-option",
                "arrow_color=blue",
                "--out",
                str(report),
            ]
        )
        == 0
    )
    html = report.read_text(encoding="utf-8")
    values = re.findall(r"<li>Gradient ([xy]): (-?\d+\.\d{4})</li>", html)
    assert [axis for axis, _ in values] == ["x", "y"], html[-2000:]
    picture = _arrow_image(html)
    assert picture.shape == (16, 16, 3)  # the view got the grayscale input as H×W, as in DIGITS 6
    expected = _gradient(0.3, -0.2, 16, 16)
    assert np.array_equal(picture[0, :, 0], expected[0]) and np.array_equal(picture[:, 0, 1], expected[:, 0])
    assert _pixels(picture, (0, 0, 255)) > 0  # the arrow, in the colour of the --view-option

    # Web UI: the DIGITS 6 dataset template, the inference form on the model page, results through the view
    from digits_core.web import create_app

    app = create_app(jobs, start_scheduler=False, testing=True)
    client = app.test_client()
    try:
        page = client.get("/datasets/new/gradients6")
        assert page.status_code == 200
        text = page.get_data(as_text=True)
        assert 'title="How many gradient images the training set gets"' in text and 'class="form-group' in text
        token = client.get("/api/csrf-token").get_json()["csrf_token"]
        fields = {
            "csrf_token": token,
            "job_name": "from the web",
            "job_workers": "1",
            "train_image_count": "6",
            "val_image_count": "2",
            "image_width": "12",
            "image_height": "12",
        }
        refused = client.post("/datasets/new/gradients6", data={**fields, "train_image_count": "0"})
        assert refused.status_code == 200  # re-rendered with errors; the template's own mark_errors() marks the field
        assert re.search(
            r'class="form-group has-error">\s*<label for="train_image_count"', refused.get_data(as_text=True)
        )
        created = client.post("/datasets/new/gradients6", data=fields)
        assert created.status_code == 302
        from digits_core.datasets import open_dataset, run_dataset_job
        from digits_core.jobs import Job

        web_job = run_dataset_job(Job.load(jobs / created.headers["Location"].rsplit("/", 1)[1]), workers=1)
        assert tuple(open_dataset(web_job.id, jobs).feature_shape()) == (12, 12, 1)
        model_page = client.get(f"/models/{model['job_id']}").get_data(as_text=True)
        assert 'name="gradient_x"' in model_page and "Random gradients" in model_page
        result = client.post(
            f"/models/{model['job_id']}/infer",
            follow_redirects=True,
            data={
                "csrf_token": token,
                "input_mode": "plugin",
                "view_id": "gradients6",
                "arrow_color": "green",
                "arrow_size": "90",
                "gradient_x": "-0.25",
                "gradient_y": "0.1",
            },
        )
        body = result.get_data(as_text=True)
        assert result.status_code == 200, body[-3000:]
        assert len(re.findall(r"<li>Gradient [xy]: -?\d+\.\d{4}</li>", body)) == 2
        web_picture = _arrow_image(body)
        assert np.array_equal(web_picture[0, :, 0], _gradient(-0.25, 0.1, 16, 16)[0])
        assert _pixels(web_picture, (0, 255, 0)) > 0 and _pixels(web_picture, (0, 0, 255)) == 0
    finally:
        app.extensions["digits"]["inference_worker"].close()
