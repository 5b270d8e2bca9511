"""Web UI parity with DIGITS 6 (issue 15): what a daily user sees on the home, model and inference pages.

Fast tests use Flask's test client on server-rendered pages and JSON; the browser test
(``slow``, ``browser``) runs a real server, real training and inference in headless Chromium
for what JavaScript does. Screenshots go to ``test-artifacts/`` (git-ignored)::

    flock /tmp/digits-heavy.lock .venv/bin/python -m pytest tests/test_ui_parity.py
"""

from __future__ import annotations

import json
import re

import pytest

from digits_core.jobs import Job, JobStatus
from digits_core.web import create_app


@pytest.fixture
def app(tmp_path):
    return create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[tmp_path])


@pytest.fixture
def client(app):
    return app.test_client()


def make_job(app, kind, name, *statuses, **fields):
    job = Job.create(kind, name, jobs_dir=app.extensions["digits"]["jobs_dir"], **fields)
    for status in statuses:
        job.set_status(status) if not isinstance(status, tuple) else job.set_status(status[0], error=status[1])
    return job


def model_with_snapshots(app, *statuses, epochs=(1, 2)):
    """A model job with snapshot files and metric lines, as the trainer leaves them after ``epochs``."""
    ds = make_job(app, "dataset", "digits", JobStatus.DONE, plugin_id="image-classification")
    job = make_job(app, "model", "lenet", *statuses, dataset_id=ds.id,
                   train_options={"network": "lenet", "epochs": 5})
    (job.path / "snapshots").mkdir()
    with open(job.path / "metrics.jsonl", "w") as handle:
        for epoch in epochs:
            (job.path / "snapshots" / f"epoch-{epoch}.keras").write_bytes(b"x" * 10)
            for name, value in (("loss", 1.0 / epoch), ("val_accuracy", 0.8), ("val_top5", 0.97)):
                handle.write(json.dumps({"epoch": epoch, "step": epoch * 10, "name": name, "value": value}) + "\n")
    return job


def test_favicon_linked_and_served(client):
    html = client.get("/").get_data(as_text=True)
    href = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)"', html).group(1)
    icon = client.get(href)
    assert icon.status_code == 200 and icon.mimetype == "image/svg+xml" and b"<svg" in icon.data


def test_empty_home_names_the_next_step(client):
    html = client.get("/").get_data(as_text=True)
    row = re.search(r'id="datasets-table".*?<tr class="empty">(.*?)</tr>', html, re.S).group(1)
    assert "No datasets yet — create one:" in row
    assert 'href="/datasets/new/image-classification"' in row  # a link into the New dataset menu
    models_row = re.search(r'id="models-table".*?<tr class="empty">(.*?)</tr>', html, re.S).group(1)
    assert "create a dataset first" in models_row


def test_empty_models_link_to_new_model_once_a_dataset_exists(app, client):
    make_job(app, "dataset", "digits", JobStatus.DONE, plugin_id="image-classification")
    html = client.get("/").get_data(as_text=True)
    models_row = re.search(r'id="models-table".*?<tr class="empty">(.*?)</tr>', html, re.S).group(1)
    assert 'href="/models/new"' in models_row and "train one" in models_row


def test_abort_and_delete_ask_for_confirmation(app, client):
    job = model_with_snapshots(app, JobStatus.WAITING, JobStatus.RUNNING)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    abort_form = re.search(r'<form[^>]*action="/models/[^"]+/abort"[^>]*>', html).group(0)
    delete_form = re.search(r'<form[^>]*action="/models/[^"]+/delete"[^>]*>', html).group(0)
    assert 'data-confirm="Abort training of lenet?' in abort_form
    assert 'data-confirm="Delete model lenet' in delete_form


def test_resumed_job_hides_the_old_abort_banner(app, client):
    job = model_with_snapshots(app, JobStatus.RUNNING, (JobStatus.ABORTED, "Aborted: abort requested"),
                               JobStatus.WAITING)  # Resume: queued again, the old error still stored
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    banner = re.search(r'<div [^>]*id="job-error"[^>]*>', html).group(0)
    assert "hidden" in banner
    aborted = model_with_snapshots(app, JobStatus.RUNNING, (JobStatus.ABORTED, "Aborted: abort requested"))
    html = client.get(f"/models/{aborted.id}").get_data(as_text=True)
    assert "hidden" not in re.search(r'<div [^>]*id="job-error"[^>]*>', html).group(0)


def test_metrics_json_carries_what_the_page_updates_live(app, client):
    job = model_with_snapshots(app, JobStatus.WAITING, JobStatus.RUNNING, epochs=(1, 2, 3))
    data = client.get(f"/models/{job.id}/metrics.json").get_json()
    assert [s["epoch"] for s in data["snapshots"]] == [1, 2, 3]
    assert [s for s, _ in data["status_history"]] == ["Initialized", "Waiting", "Running"]
    assert data["epoch"] == 3 and data["epochs"] == 5
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert "No snapshot yet." not in html
    assert re.search(r'id="train-progress">Epoch 3(\.0)? of 5<', html)


def test_inference_error_stays_on_the_form_with_values_kept(app, client, tmp_path):
    job = model_with_snapshots(app, JobStatus.RUNNING, JobStatus.DONE)
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    missing = tmp_path / "no such image.png"
    resp = client.post(f"/models/{job.id}/infer", data={
        "csrf_token": token, "view_id": "image-classification", "input_mode": "path",
        "server_path": str(missing), "snapshot": "1"})
    assert resp.status_code == 400
    html = resp.get_data(as_text=True)
    assert "Cannot do that" not in html and 'id="infer-form"' in html
    assert re.search(r'id="infer-errors".*does not exist on the server', html, re.S)
    assert f'value="{missing}"' in html  # the path typed is still there
    assert re.search(r'value="path" checked', html)
    assert re.search(r'<option value="1(\.0)?" selected>epoch 1', html)
    # JSON clients keep the error object.
    resp = client.post(f"/models/{job.id}/infer", headers={"Accept": "application/json"}, data={
        "csrf_token": token, "view_id": "image-classification", "input_mode": "path", "server_path": str(missing)})
    assert resp.status_code == 400 and "does not exist" in resp.get_json()["error"]["message"]


def test_inference_upload_without_files_is_an_inline_error(app, client):
    job = model_with_snapshots(app, JobStatus.RUNNING, JobStatus.DONE)
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    resp = client.post(f"/models/{job.id}/infer", data={"csrf_token": token, "view_id": "image-classification",
                                                         "input_mode": "upload"})
    html = resp.get_data(as_text=True)
    assert resp.status_code == 400 and "Choose at least one image to upload." in html
    assert "choose the image(s) again" in html
