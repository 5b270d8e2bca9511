"""Every input bounded: sweep value lists, request bodies per kind of route, parts of an upload."""

from __future__ import annotations

import io

import pytest

from digits_core.errors import FormValidationError
from digits_core.sweeps.grid import MAX_SWEEP_JOBS, parse_values
from digits_core.web.request_guard import MAX_BODY_BYTES, MAX_FORM_BYTES, MAX_JSON_BYTES, MAX_UPLOAD_PARTS


def test_a_huge_sweep_list_is_refused_before_any_per_value_work():
    """1.3 MB of distinct learning rates once held a request thread for 83 s (de-duplication was quadratic)."""
    huge = ",".join(f"0.{i:07d}" for i in range(1, 150_000))
    with pytest.raises(FormValidationError, match=f"149999 values; a sweep may create at most {MAX_SWEEP_JOBS}"):
        parse_values("learning_rate", huge)
    with pytest.raises(FormValidationError, match="at most"):
        parse_values("learning_rate", [0.1] * (MAX_SWEEP_JOBS + 1))
    assert parse_values("learning_rate", ",".join(["0.1", "0.01"] * 32)) == [0.1, 0.01]  # repeats count once
    with pytest.raises(FormValidationError) as exc:
        parse_values("learning_rate", "1" * 5000 + "x")
    assert len(str(exc.value)) < 300  # the value is named cut, never echoed whole


def test_a_json_body_over_the_limit_is_413_before_it_is_read(client, token):
    body = b'{"name": "' + b"x" * (MAX_BODY_BYTES + 1) + b'"}'
    resp = client.post("/api/models", data=body, content_type="application/json", headers={"X-CSRFToken": token})
    assert resp.status_code == 413
    small = client.post("/api/models", json={"name": "x"}, headers={"X-CSRFToken": token})
    assert small.status_code == 400  # refused for what it says, not for its size


def test_an_upload_with_too_many_parts_is_413(client, token):
    files = {f"f{i}": (io.BytesIO(b"x"), f"{i}.png") for i in range(MAX_UPLOAD_PARTS + 1)}
    resp = client.post(
        "/datasets/new/image-classification", data={"csrf_token": token, **files}, content_type="multipart/form-data"
    )
    assert resp.status_code == 413


def test_body_limits_are_per_route_uploads_json_and_forms(client, token):
    """A big multipart body is an upload only where the route takes files; JSON and plain forms have their own limit."""
    blob = (io.BytesIO(b"x" * (MAX_JSON_BYTES + 1024)), "big.png")
    # A route that takes no file: a multipart body is held to the form limit, and the 413 says which limit.
    resp = client.post(
        "/datasets/ID/notes", data={"csrf_token": token, "notes": "n", "f": blob}, content_type="multipart/form-data"
    )
    assert resp.status_code == 413 and "a form that uploads no file" in resp.get_data(as_text=True)
    # The New Dataset form takes files: the same size is an upload (within --max-upload-mb), not refused for size.
    blob = (io.BytesIO(b"x" * (MAX_JSON_BYTES + 1024)), "big.png")
    resp = client.post(
        "/datasets/new/image-classification", data={"csrf_token": token, "f": blob}, content_type="multipart/form-data"
    )
    assert resp.status_code != 413
    form = {"csrf_token": token, "notes": "x" * (MAX_FORM_BYTES + 1)}
    resp = client.post("/datasets/ID/notes", data=form)
    assert resp.status_code == 413 and f"{MAX_FORM_BYTES // 1024:,} KiB" in resp.get_data(as_text=True)
    between = b'{"name": "' + b"x" * (MAX_FORM_BYTES + 1) + b'"}'  # over the form limit, under the JSON one
    resp = client.post("/api/models", data=between, content_type="application/json", headers={"X-CSRFToken": token})
    assert resp.status_code == 400  # the JSON API's own limit: refused for what it says, not for its size


def test_a_cross_site_get_never_builds_an_export(app, client):
    """`<img src=http://digits/models/ID/download>` on another site once made the server export a model."""
    from digits_core.jobs import Job

    job = Job.create("model", "m", jobs_dir=app.extensions["digits"]["jobs_dir"])
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-001.keras").write_bytes(b"not really a model")
    for headers in (
        {"Sec-Fetch-Site": "cross-site"},
        {"Referer": "https://evil.example/page"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        resp = client.get(f"/models/{job.id}/download", headers=headers)
        assert resp.status_code == 403, resp.get_data(as_text=True)[:300]
    assert not (job.path / "export").exists()


def test_explore_and_the_dataset_page_list_a_capped_number_of_classes(tmp_path):
    """A dataset with 100,000 distinct class labels renders pages of at most 200 classes (was every one)."""
    import numpy as np
    from synthetic_plugins import _Synthetic

    from digits_core import registry
    from digits_core.datasets import create_dataset
    from digits_core.datasets.explore import MAX_LISTED_CLASSES
    from digits_core.web import create_app

    class ManyLabels(_Synthetic):
        plugin_id, title = "many-labels", "100k labels"

        def itemize_entries(self, stage):
            self.userdata["class_labels"] = [f"label{k}" for k in range(100_000)]
            return list(range(40)) if stage == "train" else []

        def encode_entry(self, entry):
            return np.full((4, 4, 1), entry, np.uint8), entry * 65535 // 39  # ids up to 65535: a long histogram

    registry.register(ManyLabels)
    try:
        job = create_dataset("many-labels", {"count": 40, "size": 4}, workers=1, jobs_dir=tmp_path)
    finally:
        registry.unregister(ManyLabels)
    client = create_app(tmp_path, start_scheduler=False, testing=True).test_client()
    data = client.get(f"/datasets/{job.id}/explore?stage=train&label=99999&format=json").get_json()
    assert data["class_count"] == 100_000 and len(data["classes"]) == MAX_LISTED_CLASSES + 1
    assert 99_999 in [c["id"] for c in data["classes"]]  # the chosen class is listed even if rare
    assert {c["id"] for c in data["classes"]} >= {k * 65535 // 39 for k in range(40)}  # the frequent ones first
    html = client.get(f"/datasets/{job.id}/explore?stage=train").get_data(as_text=True)
    assert html.count("<option") <= MAX_LISTED_CLASSES + 1 and 'id="classes-capped"' in html
    page = client.get(f"/datasets/{job.id}").get_data(as_text=True)
    assert page.count("<tr data-class=") == MAX_LISTED_CLASSES and 'id="classes-capped"' in page
    assert len(page) < 300_000
