"""Backbones on the web (Flask's test client, no TensorFlow): the model page names the weights; the zoo page and
its JSON list the entries; the New Model page gets each network's minimum input and the zoo for its picker, and
the API refuses images below a network's minimum before any job exists."""

from __future__ import annotations

import json
import re
from html import unescape as html_unescape

from digits_core.jobs import Job, JobStatus
from digits_core.web import create_app


def test_model_page_names_the_weights_with_hash_and_source(tmp_path):
    app = create_app(tmp_path / "jobs", testing=True, start_scheduler=False)
    try:
        jobs = app.extensions["digits"]["jobs_dir"]
        job = Job.create("model", "cells", jobs_dir=jobs, train_options={"network": "mobilenet_v3_small"})
        job.set_status(JobStatus.RUNNING)
        job.set_status(JobStatus.DONE)
        weights = {
            "name": "zoo:cells-v1",
            "path": "/zoo/cells-v1.weights.h5",
            "sha256": "ab" * 32,
            "source": "job 20261206-071500-ab12 epoch 30.0",
            "license": "CC-BY-4.0",
            "channels": 1,
        }
        (job.path / "model.json").write_text(json.dumps({"network": "mobilenet_v3_small", "weights": weights}))
        html = app.test_client().get(f"/models/{job.id}").get_data(as_text=True)
        assert 'id="model-weights"' in html and "<code>zoo:cells-v1</code>" in html
        assert "abababababab" in html and "job 20261206-071500-ab12 epoch 30.0" in html and "CC-BY-4.0" in html
        (job.path / "model.json").write_text(json.dumps({"network": "lenet"}))
        assert 'id="model-weights"' not in app.test_client().get(f"/models/{job.id}").get_data(as_text=True)
    finally:
        app.extensions["digits"]["scheduler"].shutdown()


def test_api_refuses_missing_or_outside_weights_before_any_job(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGITS_OFFLINE", "1")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setenv("DIGITS_ZOO", str(tmp_path / "zoo"))
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside.weights.h5"
    outside.write_bytes(b"w")
    inside = data / "inside.weights.h5"
    inside.write_bytes(b"w")
    app = create_app(tmp_path / "jobs", testing=True, start_scheduler=False, data_roots=[str(data)])
    try:
        jobs = app.extensions["digits"]["jobs_dir"]
        ds = Job.create("dataset", "ds", jobs_dir=jobs, plugin_id="image-classification")
        ds.set_status(JobStatus.DONE)
        client = app.test_client()
        headers = {"X-CSRFToken": client.get("/api/csrf-token").get_json()["csrf_token"]}

        def post(**options):
            body = {"name": "m", "dataset": ds.id, "network": "mobilenet_v3_small", "options": options}
            return client.post("/api/models", json=body, headers=headers)

        missing = post(epochs=1)  # the backbone's default: imagenet
        assert missing.status_code == 400
        message = " ".join(missing.get_json()["error"]["fields"]["weights"])
        assert "weights_mobilenet_v3_small_224_1.0_float_no_top_v2.h5" in message and "d3e8ec80" in message
        refused = post(epochs=1, weights=str(outside))
        assert refused.status_code == 400 and "weights" in refused.get_json()["error"]["fields"]
        assert [j.kind for j in app.extensions["digits"]["store"].list()] == ["dataset"]
        assert post(epochs=1, weights=str(inside)).status_code == 202
        assert post(epochs=1, weights="none").status_code == 202
    finally:
        app.extensions["digits"]["scheduler"].shutdown()


def _dataset(jobs, name, size):
    """A Done classification dataset whose ``dataset.json`` says its images are ``size``×``size``×3."""
    ds = Job.create(
        "dataset", name, jobs_dir=jobs, plugin_id="image-classification", dataset={"label": {"kind": "class"}}
    )
    ds.set_status(JobStatus.DONE)
    (ds.path / "dataset").mkdir()
    feature = {"shape": [size, size, 3], "dtype": "uint8", "layout": "HWC"}
    (ds.path / "dataset" / "dataset.json").write_text(json.dumps({"feature": feature, "label": {"kind": "class"}}))
    return ds


def _zoo(folder, **entry):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cells-v1.weights.h5").write_bytes(b"w" * 3000)
    base = {"file": "cells-v1.weights.h5", "sha256": "cd" * 32, "network": "mobilenet_v3_small"}
    (folder / "manifest.json").write_text(json.dumps({"entries": {"cells-v1": {**base, **entry}}}))


def test_zoo_page_and_json_list_the_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGITS_ZOO", str(tmp_path / "zoo"))
    _zoo(
        tmp_path / "zoo",
        task="classification",
        input_shape=[64, 64, 1],
        input_channels=1,
        source="job 20261206-071500-ab12 epoch 3",
        job="20261206-071500-ab12",
        dataset="20261206-070000-cd34",
        metric={"name": "val_accuracy", "epoch": 3},
    )
    app = create_app(tmp_path / "jobs", testing=True, start_scheduler=False)
    try:
        client = app.test_client()
        listing = client.get("/zoo.json").get_json()
        assert listing["error"] is None and listing["folder"] == str(tmp_path / "zoo")
        (row,) = listing["entries"]
        assert (row["weights"], row["network"], row["task"], row["input"]) == (
            "zoo:cells-v1",
            "mobilenet_v3_small",
            "classification",
            "64×64×1",
        )
        assert (row["sha256"], row["size"], row["source"]) == ("cd" * 32, 3000, "job 20261206-071500-ab12 epoch 3")
        html = client.get("/zoo").get_data(as_text=True)
        assert 'data-entry="cells-v1"' in html and "cdcdcdcdcdcd" in html and "64×64×1" in html
        assert 'href="/models/20261206-071500-ab12"' in html and "val_accuracy" in html
        (tmp_path / "zoo" / "manifest.json").write_text("[1, 2")  # damaged: named on the page, not a 500
        broken = client.get("/zoo")
        assert broken.status_code == 200 and 'id="zoo-error"' in broken.get_data(as_text=True)
        assert "manifest.json" in client.get("/zoo.json").get_json()["error"]
    finally:
        app.extensions["digits"]["scheduler"].shutdown()


def test_new_model_page_knows_min_sizes_and_the_api_refuses_small_images(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGITS_ZOO", str(tmp_path / "zoo"))
    _zoo(tmp_path / "zoo", task="classification")
    app = create_app(tmp_path / "jobs", testing=True, start_scheduler=False)
    try:
        jobs = app.extensions["digits"]["jobs_dir"]
        small, large = _dataset(jobs, "small", 16), _dataset(jobs, "large", 64)
        client = app.test_client()
        html = client.get("/models/new").get_data(as_text=True)
        data = json.loads(html_unescape(re.search(r'data-options="([^"]*)"', html).group(1)))
        assert data["network_min_size"]["mobilenet_v3_small"] == 32 and "lenet" not in data["network_min_size"]
        for name in ("mobilenet_v3_small", "convnext_tiny"):  # 2-D images of every task, never a volume
            assert sorted(data["network_tasks"][name]) == ["classification", "detection", "regression", "segmentation"]
        assert data["dataset_sizes"] == {small.id: [16, 16], large.id: [64, 64]}
        assert data["network_weights"]["convnext_tiny"] == ["imagenet"]
        assert {"name": "zoo:cells-v1", "network": "mobilenet_v3_small", "task": "classification"} in data["zoo"]
        assert 'id="weights-picker"' in html and 'id="backbone-box"' in html
        headers = {"X-CSRFToken": client.get("/api/csrf-token").get_json()["csrf_token"]}

        def post(dataset, **options):
            body = {"name": "m", "dataset": dataset.id, "network": "mobilenet_v3_small", "options": options}
            return client.post("/api/models", json=body, headers=headers)

        refused = post(small, weights="none", epochs=1)
        assert refused.status_code == 400, refused.get_json()
        message = " ".join(refused.get_json()["error"]["fields"]["network"])
        assert "at least 32x32" in message and "16x16" in message and "input_size" in message
        assert [j.kind for j in app.extensions["digits"]["store"].list()] == ["dataset", "dataset"]
        assert post(small, weights="none", epochs=1, network_params={"input_size": 32}).status_code == 202
        assert post(large, weights="none", epochs=1).status_code == 202
    finally:
        app.extensions["digits"]["scheduler"].shutdown()
