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
