"""The model page says where a backbone's weights came from (Flask's test client, no TensorFlow)."""

from __future__ import annotations

import json

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
