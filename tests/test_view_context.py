"""Views that see the model (issue 43): ``View.model_context`` and the per-task default view.

The slow test trains a real LeNet on tiny images (with a centre crop, so the
context's ``run`` must take the cropped ``input_data`` a view gets) and renders
the bundled ``saliency`` view from it: no model id is typed anywhere but
``infer``'s own argument. The light tests hold the default-view settings to
their order: ``$DIGITS_DEFAULT_VIEWS`` (``digits serve --default-view``), then
the user's settings file, then the bundled view.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from digits_core.errors import ConfigurationError
from digits_core.inference.view_choice import DEFAULT_VIEWS_ENV, SETTINGS_ENV, default_view_for, default_views


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """No operator setting; a settings file of the test's own."""
    monkeypatch.delenv(DEFAULT_VIEWS_ENV, raising=False)
    path = tmp_path / "settings.json"
    monkeypatch.setenv(SETTINGS_ENV, str(path))
    return path


def test_default_view_order_env_then_settings_file_then_bundled(settings, monkeypatch):
    assert default_view_for("classification") == "image-classification"  # no file: the bundled view
    settings.write_text(json.dumps({"default_views": {"classification": "saliency"}}))
    assert default_view_for("classification") == "saliency"
    assert default_view_for("segmentation") == "image-segmentation"  # other tasks keep theirs
    monkeypatch.setenv(DEFAULT_VIEWS_ENV, "classification=image-classification")
    assert default_view_for("classification") == "image-classification"
    assert default_views()["classification"][1].startswith(f"${DEFAULT_VIEWS_ENV}")


def test_bad_settings_are_named(settings, monkeypatch):
    settings.write_text("{not json")
    with pytest.raises(ConfigurationError, match="settings.json is not valid JSON"):
        default_view_for("classification")
    settings.write_text(json.dumps({"default_views": {"classification": "no-such-view"}}))
    with pytest.raises(
        ConfigurationError, match=r'"no-such-view" \(settings file .*settings.json\), but no such view is installed'
    ):
        default_view_for("classification")
    monkeypatch.setenv(DEFAULT_VIEWS_ENV, "classification")
    with pytest.raises(ConfigurationError, match="is not TASK=VIEW"):
        default_view_for("classification")


def test_serve_refuses_an_unknown_default_view_before_serving(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env["DIGITS_JOBS_DIR"] = str(tmp_path / "jobs")
    out = subprocess.run(
        [sys.executable, "-m", "digits_core", "serve", "--port", "1", "--default-view", "classification=nope"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and '"nope"' in out.stderr and "no such view is installed" in out.stderr, out.stderr


@pytest.fixture(scope="module")
def cropped_model(tmp_path_factory):
    """A LeNet trained one epoch on 8x8 images of two classes, with a 6x6 centre crop."""
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    root = tmp_path_factory.mktemp("view_context")
    rng = np.random.default_rng(0)
    for label in range(2):
        folder = root / "images" / str(label)
        folder.mkdir(parents=True)
        for i in range(12):
            Image.fromarray((rng.integers(0, 120, (8, 8)) + 120 * label).astype(np.uint8)).save(folder / f"{i}.png")
    jobs = root / "jobs"
    data = create_dataset(
        "image-classification",
        {"folder": str(root / "images"), "image_type": "grayscale", "width": 8, "height": 8},
        name="tiny",
        workers=1,
        jobs_dir=jobs,
    )
    model = train(data.id, "lenet", name="cropped", epochs=1, seed=1, crop_size=6, jobs_dir=jobs)
    return model.id, jobs, sorted((root / "images").glob("*/*.png"))[:3]


@pytest.mark.slow
def test_saliency_view_runs_the_model_from_its_context(cropped_model, settings, monkeypatch):
    from digits_core.inference import infer

    model_id, jobs, images = cropped_model
    result = infer(model_id, [str(p) for p in images], view_id="saliency", view_config={"grid": 3}, jobs_dir=jobs)
    view, processed = result.run_view()
    context = view.model_context
    assert (context.model_id, context.task, context.input_shape) == (model_id, "classification", (6, 6, 1))
    sample = result.samples[0]
    assert sample.input_data.shape == (6, 6, 1)  # the crop the network saw
    assert np.allclose(context.run(sample.input_data)[0], sample.output, atol=1e-5)
    report = result.to_json(include_images=True)
    assert all(s["view"]["saliency"].startswith("data:image/png;base64,") for s in report["samples"])

    monkeypatch.setenv(DEFAULT_VIEWS_ENV, "classification=saliency")
    assert infer(model_id, [str(images[0])], jobs_dir=jobs).view_id == "saliency"
    bundled = infer(model_id, [str(images[0])], view_id="image-classification", jobs_dir=jobs)
    assert bundled.view_id == "image-classification" and "saliency" not in bundled.to_json()["samples"][0]["view"]

    env = {k: v for k, v in os.environ.items() if k != DEFAULT_VIEWS_ENV}
    env.update({SETTINGS_ENV: str(settings), "TF_CPP_MIN_LOG_LEVEL": "2"})
    settings.write_text(json.dumps({"default_views": {"classification": "saliency"}}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(jobs),
            "infer",
            "--model",
            model_id,
            str(images[0]),
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout)
    assert answer["view"] == "saliency" and answer["samples"][0]["view"]["saliency_class"] in ("0", "1")


def test_model_page_preselects_the_default_view_and_keeps_the_others(tmp_path, settings, monkeypatch):
    import re

    from digits_core.jobs import Job, JobStatus
    from digits_core.web import create_app

    jobs = tmp_path / "jobs"
    job = Job.create("model", "m", jobs_dir=jobs, train_options={"network": "lenet", "epochs": 1})
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    (job.path / "model.json").write_text(json.dumps({"task": "classification", "network": "lenet"}))
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-1.keras").write_bytes(b"")  # the Classify panel needs a snapshot to list
    client = create_app(jobs, start_scheduler=False, testing=True).test_client()

    def selected() -> list[str]:
        html = client.get(f"/models/{job.id}").get_data(as_text=True)
        menu = re.search(r'<select[^>]*name="view_id".*?</select>', html, re.S).group(0)
        assert 'value="image-classification"' in menu and 'value="saliency"' in menu  # every view offered
        return re.findall(r'<option value="([^"]+)" selected', menu)

    assert selected() == ["image-classification"]
    monkeypatch.setenv(DEFAULT_VIEWS_ENV, "classification=saliency")
    assert selected() == ["saliency"]
    monkeypatch.setenv(DEFAULT_VIEWS_ENV, "classification=gone")  # a broken setting costs the preselection only
    assert selected() == ["image-classification"]
