"""TF Serving's REST predict API on a real ``digits serve``, spoken by ``requests`` as a TF Serving client.

Bodies and answers follow TF Serving's REST API (row ``instances`` /
columnar ``inputs``, images as ``{"b64": ...}`` or nested lists); the
predictions equal ``digits infer`` on the same images. No cookie and no
CSRF token are sent, as a TF Serving client sends none; a browser's
cross-site request is still refused.
"""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
import requests
from PIL import Image

from digits_core import registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    jobs = tmp_path_factory.mktemp("tf-serving") / "jobs"
    registry.register(SyntheticShapes)
    try:
        shapes = create_dataset(
            "synthetic-shapes", {"count": 48, "val_count": 8, "size": 16, "classes": 3}, workers=1, jobs_dir=jobs
        )
    finally:
        registry.unregister(SyntheticShapes)
    return jobs, train(shapes.id, "lenet", name="shapes-lenet", epochs=1, batch_size=16, jobs_dir=jobs, seed=0)


def _png(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def test_predict_answers_like_digits_infer(classifier, live_server):
    from digits_core.inference import infer

    jobs, job = classifier
    server = live_server(jobs)
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (16, 16), dtype=np.uint8), rng.integers(0, 256, (21, 13), dtype=np.uint8)]
    expected = infer(job.id, [(str(i), a[:, :, None]) for i, a in enumerate(images)], jobs_dir=jobs)
    url = f"{server.url}/v1/models/{job.id}:predict"
    rows = requests.post(url, json={"instances": [{"b64": _png(images[0])}, images[1].tolist()]}, timeout=300)
    assert rows.status_code == 200, rows.text
    predictions = rows.json()["predictions"]
    for got, sample in zip(predictions, expected.samples):
        assert np.allclose(got["outputs"], sample.output, atol=1e-6)
        assert got["classes"][0] == int(np.argmax(sample.output))
    by_name = requests.post(
        f"{server.url}/v1/models/shapes-lenet/versions/1:predict",
        json={"inputs": {"images": [images[1].tolist()]}},
        timeout=300,
    )
    assert by_name.status_code == 200, by_name.text
    assert np.allclose(by_name.json()["outputs"]["outputs"][0], expected.samples[1].output, atol=1e-6)
    status = requests.get(f"{server.url}/v1/models/{job.id}", timeout=60).json()
    assert status["model_version_status"] == [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    ]
    assert requests.get(f"{server.url}/v1/models/{job.id}/versions/7", timeout=60).status_code == 404
    bad = requests.post(url, json={"instances": [{"b64": "not base64!"}]}, timeout=60)
    assert bad.status_code == 400 and "instances[0]" in bad.json()["error"]
    assert requests.post(url, data="instances", headers={"Content-Type": "text/plain"}, timeout=60).status_code in (
        400,
        415,
    )
    cross_site = requests.post(
        url,
        json={"instances": [images[1].tolist()]},
        timeout=60,
        headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert cross_site.status_code == 403


def test_predict_needs_the_auth_token_when_the_server_has_one(classifier, live_server):
    jobs, job = classifier
    server = live_server(jobs, auth_token="s3cret")
    body = {"instances": [np.zeros((16, 16)).tolist()]}
    url = f"{server.url}/v1/models/{job.id}:predict"
    assert requests.post(url, json=body, timeout=60).status_code == 401
    answer = requests.post(url, json=body, headers={"Authorization": "Bearer s3cret"}, timeout=300)
    assert answer.status_code == 200 and len(answer.json()["predictions"][0]["outputs"]) == 3
