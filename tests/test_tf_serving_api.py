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
    # Two snapshots (versions 1 and 2) whose outputs differ: a predict by version must pick its own.
    return jobs, train(shapes.id, "lenet", name="shapes-lenet", epochs=2, batch_size=16, jobs_dir=jobs, seed=0)


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
    first = infer(job.id, [(str(i), a[:, :, None]) for i, a in enumerate(images)], epoch=1, jobs_dir=jobs)
    assert expected.model.epoch == 2 and not np.allclose(first.outputs, expected.outputs, atol=1e-4)
    url = f"{server.url}/v1/models/{job.id}:predict"
    rows = requests.post(url, json={"instances": [{"b64": _png(images[0])}, images[1].tolist()]}, timeout=300)
    assert rows.status_code == 200, rows.text
    predictions = rows.json()["predictions"]
    for got, sample in zip(predictions, expected.samples):
        assert np.allclose(got["outputs"], sample.output, atol=1e-6)
        assert got["classes"][0] == int(np.argmax(sample.output))
    for version, reference in (("1", first), ("2", expected)):  # each version answers from its own snapshot
        by_name = requests.post(
            f"{server.url}/v1/models/shapes-lenet/versions/{version}:predict",
            json={"inputs": {"images": [images[1].tolist()]}},
            timeout=300,
        )
        assert by_name.status_code == 200, by_name.text
        assert np.allclose(by_name.json()["outputs"]["outputs"][0], reference.samples[1].output, atol=1e-6)
    status = requests.get(f"{server.url}/v1/models/{job.id}", timeout=60).json()
    assert status["model_version_status"] == [
        {"version": v, "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}} for v in ("1", "2")
    ]
    assert requests.get(f"{server.url}/v1/models/{job.id}/versions/7", timeout=60).status_code == 404
    bad = requests.post(url, json={"instances": [{"b64": "not base64!"}]}, timeout=60)
    assert bad.status_code == 400 and "instances[0]" in bad.json()["error"]
    not_json = requests.post(url, data="instances", headers={"Content-Type": "text/plain"}, timeout=60)
    # Not JSON: a body a cross-site form could send, so the CSRF check (which JSON predict skips) refuses it.
    assert not_json.status_code == 400 and "CSRF" in not_json.text, not_json.text[:300]
    garbled = requests.post(url, data="{instances", headers={"Content-Type": "application/json"}, timeout=60)
    assert garbled.status_code == 400 and "not valid JSON" in garbled.json()["error"]
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


def test_a_version_whose_snapshot_is_truncated_is_not_available(classifier, live_server, tmp_path):
    """A snapshot cut short (a copy interrupted, a disk filled outside the engine) is reported, never served."""
    import shutil

    from digits_core.inference import infer

    jobs, job = classifier
    copy = tmp_path / "jobs"
    shutil.copytree(jobs, copy)  # the module's model stays whole for the other tests
    folder = copy / job.path.relative_to(jobs)
    snapshot = folder / "snapshots" / "epoch-002.keras"
    data = snapshot.read_bytes()
    snapshot.write_bytes(data[: len(data) // 2])
    server = live_server(copy)
    status = requests.get(f"{server.url}/v1/models/{job.id}", timeout=60).json()["model_version_status"]
    assert [(v["version"], v["state"], v["status"]["error_code"]) for v in status] == [
        ("1", "AVAILABLE", "OK"),
        ("2", "END", "DATA_LOSS"),
    ]
    message = status[1]["status"]["error_message"]
    assert "epoch-002.keras is incomplete" in message and str(copy) not in message
    image = np.random.default_rng(4).integers(0, 256, (16, 16), dtype=np.uint8)
    body = {"instances": [image.tolist()]}
    refused = requests.post(f"{server.url}/v1/models/{job.id}/versions/2:predict", json=body, timeout=300)
    assert refused.status_code == 404 and "version 2 is not available" in refused.json()["error"]
    # Without a version, the latest version that can serve answers (TF Serving's latest loaded version).
    latest = requests.post(f"{server.url}/v1/models/{job.id}:predict", json=body, timeout=300)
    assert latest.status_code == 200, latest.text
    first = infer(job.id, [("x", image[:, :, None])], epoch=1, jobs_dir=jobs).samples[0].output
    assert np.allclose(latest.json()["predictions"][0]["outputs"], first, atol=1e-6)
    snapshot.write_bytes(b"")  # an empty file likewise, and then no version is left
    assert (
        requests.get(f"{server.url}/v1/models/{job.id}/versions/2", timeout=60).json()["model_version_status"][0][
            "state"
        ]
        == "END"
    )
    (folder / "snapshots" / "epoch-001.keras").write_bytes(data[:100])
    none_left = requests.post(f"{server.url}/v1/models/{job.id}:predict", json=body, timeout=300)
    assert none_left.status_code == 404 and "no available version" in none_left.json()["error"]
