"""The model page's Export panel (digits_core/web/export_views.py) with Flask's test client (no TensorFlow).

Exports themselves run in a worker process with TensorFlow: the browser test
``test_ui_model_pages.py::test_export_panel_onnx_with_its_parity_report`` exports a real LeNet.
Here: the form, its refusals before any worker runs, and the listing and download of exports on disk.
"""

from __future__ import annotations

import io
import json
import re
import tarfile

from digits_core.jobs import Job, JobStatus


def _model(app, status=JobStatus.DONE):
    jobs = app.extensions["digits"]["jobs_dir"]
    ds = Job.create("dataset", "digits", jobs_dir=jobs, plugin_id="image-classification")
    ds.set_status(JobStatus.DONE)
    job = Job.create("model", "lenet", jobs_dir=jobs, dataset_id=ds.id, train_options={"network": "lenet"})
    job.set_status(JobStatus.RUNNING)
    if status != JobStatus.RUNNING:
        job.set_status(status)
    (job.path / "snapshots").mkdir()
    for tag in ("001", "002"):
        (job.path / "snapshots" / f"epoch-{tag}.keras").write_bytes(b"k" * 7)
    (job.path / "model.json").write_text(json.dumps({"task": "classification"}))
    return job


def _fake_export(job, name, fmt, parity, epoch=2):
    folder = job.path / "export" / name
    folder.mkdir(parents=True)
    (folder / "info.json").write_text(json.dumps({"format": fmt, "quantize": None, "model": {"epoch": epoch}}))
    if parity is not None:
        (folder / "parity.json").write_text(json.dumps(parity))
    with tarfile.open(job.path / "export" / f"{name}.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname=name)


def test_panel_offers_every_format_and_each_snapshot(client, app):
    job = _model(app)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    form = re.search(
        r'<form method="post" action="/models/[^"]+/export#export" id="export-form".*?</form>', html, re.DOTALL
    ).group(0)
    formats = re.search(r'id="export-format">(.*?)</select>', form, re.DOTALL).group(1)
    assert re.findall(r'<option value="([^"]*)"', formats) == ["savedmodel", "keras", "onnx", "tflite"]
    quantize = re.search(r'id="export-quantize">(.*?)</select>', form, re.DOTALL).group(1)
    assert re.findall(r'<option value="([^"]*)"', quantize) == ["", "dynamic", "float16"]
    snapshots = re.search(r'id="export-snapshot">(.*?)</select>', form, re.DOTALL).group(1)
    assert re.findall(r'<option value="([^"]*)"', snapshots) == ["", "2", "1"]
    assert 'id="exports"' not in html  # nothing exported yet
    running = _model(app, status=JobStatus.RUNNING)
    html = client.get(f"/models/{running.id}").get_data(as_text=True)
    assert 'id="export-form"' not in html and "once training has finished" in html


def test_bad_choices_are_refused_on_their_field_before_any_export(client, app, token):
    job = _model(app)
    resp = client.post(
        f"/models/{job.id}/export", data={"csrf_token": token, "format": "onnx", "quantize": "dynamic", "snapshot": "1"}
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert re.search(r'id="export-errors".*quantize: Quantization applies to the TFLite format only', html, re.DOTALL)
    assert re.search(r'id="export-format">.*<option value="onnx" selected>', html, re.DOTALL)
    assert re.search(r'id="export-snapshot">.*<option value="1" selected>epoch 1<', html, re.DOTALL)
    resp = client.post(
        f"/models/{job.id}/export",
        data={"csrf_token": token, "format": "caffe"},
        headers={"Accept": "application/json"},
    )
    assert resp.status_code == 400 and list(resp.get_json()["error"]["fields"]) == ["format"]
    resp = client.post(f"/models/{job.id}/export", data={"csrf_token": token, "format": "onnx", "snapshot": "7"})
    assert "has no snapshot at epoch 7 (snapshots: 1, 2)" in resp.get_data(as_text=True)
    assert not (job.path / "export").exists() or not list((job.path / "export").iterdir())
    running = _model(app, status=JobStatus.RUNNING)
    resp = client.post(
        f"/models/{running.id}/export",
        data={"csrf_token": token, "format": "onnx"},
        headers={"Accept": "application/json"},
    )
    assert resp.status_code == 400 and "still training" in resp.get_json()["error"]["message"]


def test_exports_are_listed_with_their_parity_verdict_and_download(client, app):
    job = _model(app)
    passed = {
        "format": "onnx",
        "passed": True,
        "top1_agreement": 1.0,
        "max_abs_diff": 2.5e-7,
        "inputs": 40,
        "runtime": "onnxruntime",
        "reference": "digits infer",
        "worst_input": "val[3]",
    }
    failed = {**passed, "format": "tflite", "passed": False, "top1_agreement": 0.95, "worst_input": "val[7] at 31x33"}
    _fake_export(job, f"{job.id}-epoch-002-onnx", "onnx", passed)
    _fake_export(job, f"{job.id}-epoch-001-tflite", "tflite", failed, epoch=1)
    _fake_export(job, f"{job.id}-epoch-002-keras", "keras", None)
    (job.path / "export" / f"{job.id}-epoch-002.tar.gz").write_bytes(b"")  # the Download button's: no folder
    html = client.get(f"/models/{job.id}?export={job.id}-epoch-002-onnx").get_data(as_text=True)
    rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr data-export="([^"]+)".*?</tr>', html, re.DOTALL)}
    assert sorted(rows) == sorted(f"{job.id}-epoch-{e}" for e in ("002-onnx", "001-tflite", "002-keras"))
    onnx = rows[f"{job.id}-epoch-002-onnx"]
    assert 'id="export-latest"' in onnx and ">passed<" in onnx
    assert "top-1 agreement 100 % · max |Δ| 2.5e-07 · 40 inputs (onnxruntime vs digits infer)" in onnx
    tflite = rows[f"{job.id}-epoch-001-tflite"]
    assert ">failed<" in tflite and "top-1 agreement 95 %" in tflite and "worst input val[7] at 31x33" in tflite
    assert ">not checked<" in rows[f"{job.id}-epoch-002-keras"]
    link = re.search(r'href="([^"]+)" class="export-download"', onnx).group(1)
    assert link == f"/models/{job.id}/export/{job.id}-epoch-002-onnx.tar.gz"
    resp = client.get(link)
    assert resp.status_code == 200 and "lenet-" in resp.headers["Content-Disposition"]
    with tarfile.open(fileobj=io.BytesIO(resp.data)) as tar:
        assert json.load(tar.extractfile(f"{job.id}-epoch-002-onnx/parity.json"))["passed"] is True
    other = _model(app)
    for name in (f"{job.id}-epoch-009-onnx", "..", f"{job.id}-epoch-002"):  # unknown, not a name, not the panel's
        assert client.get(f"/models/{other.id}/export/{name}.tar.gz").status_code == 404
    assert client.get(f"/models/{other.id}/export/{job.id}-epoch-002-onnx.tar.gz").status_code == 404
