"""Web UI model pages and API with the Flask test client (no TensorFlow: nothing trains here)."""

from __future__ import annotations

import json

import pytest

from digits_core import registry
from digits_core.jobs import Job, JobStatus


@pytest.fixture
def dataset(app):
    job = Job.create(
        "dataset", "ds <1>", jobs_dir=app.extensions["digits"]["jobs_dir"], plugin_id="image-classification"
    )
    job.set_status(JobStatus.DONE)
    return job


def model_job(app, dataset, status=JobStatus.DONE, snapshots=0, **fields):
    job = Job.create(
        "model",
        "m",
        jobs_dir=app.extensions["digits"]["jobs_dir"],
        dataset_id=dataset.id,
        train_options={"dataset": dataset.id, "network": "lenet", "epochs": 3},
        **fields,
    )
    job.set_status(status)
    if snapshots:
        (job.path / "snapshots").mkdir()
        for epoch in range(1, snapshots + 1):
            (job.path / "snapshots" / f"epoch-{epoch:03d}.keras").write_bytes(b"x" * 10)
    return job


def form_values(token, dataset, **changes):
    values = {
        "csrf_token": token,
        "model_name": "lenet <x>",
        "dataset": dataset.id,
        "network": "lenet",
        "epochs": "2",
        "learning_rate": "0.01",
        "lr_policy": "step",
        "solver": "sgd",
        "momentum": "0.9",
        "snapshot_interval": "1",
        "validation_interval": "1",
        "weight_decay": "0",
        "network_params": "{}",
        "mean_subtraction": "image",
        "aug_flip": "none",
        "aug_rotation": "0",
        "aug_scale": "0",
        "aug_noise": "0",
        "aug_contrast": "0",
        "aug_brightness": "0",
        "aug_hue": "0",
        "aug_saturation": "0",
        "shuffle": "y",
    }
    values.update(changes)
    return values


def test_new_model_page_lists_done_datasets_networks_and_warning(app, client, dataset):
    running = Job.create("dataset", "busy", jobs_dir=app.extensions["digits"]["jobs_dir"])
    running.set_status(JobStatus.RUNNING)
    html = client.get("/models/new").get_data(as_text=True)
    assert dataset.id in html and running.id not in html
    assert "ds &lt;1&gt;" in html
    for name in ("lenet", "alexnet", "unet", "Custom code"):
        assert name in html
    assert "executable Python" in html and "build_model(input_shape, num_outputs, **params)" in html
    assert 'id="lr-preview"' in html
    networks = client.get("/api/networks").get_json()
    assert {"lenet", "unet"} <= {n["name"] for n in networks}


def test_new_model_errors_next_to_fields(app, client, dataset, token):
    resp = client.post(
        "/models/new",
        data=form_values(token, dataset, model_name="", learning_rate="0", network_params="{bad", aug_scale="1.5"),
    )
    assert resp.status_code == 200 and 'id="form-errors"' in resp.get_data(as_text=True)
    html = resp.get_data(as_text=True)
    for name in ("model_name", "network_params", "aug_scale"):
        assert f'data-for="{name}"' in html, name
    assert app.extensions["digits"]["store"].list("model") == []
    resp = client.post(
        "/models/new", data=form_values(token, dataset, network="__custom__", custom_network="print('no builder')")
    )
    assert resp.status_code == 200 and 'data-for="custom_network"' in resp.get_data(as_text=True)


def test_new_model_queues_job_and_clone(app, client, dataset, token):
    resp = client.post(
        "/models/new", data=form_values(token, dataset, lr_policy="multistep", lr_step_values="50,85", batch_size="16")
    )
    assert resp.status_code == 302, resp.get_data(as_text=True)[:2000]
    job_id = resp.headers["Location"].rsplit("/", 1)[1]
    job = app.extensions["digits"]["store"].get(job_id)
    assert job.status is JobStatus.WAITING and job.name == "lenet <x>"
    options = job.data["train_options"]
    assert options["dataset"] == dataset.id and options["network"] == "lenet"
    assert options["epochs"] == 2 and options["batch_size"] == 16 and options["lr_step_values"] == "50,85"
    assert app.extensions["digits"]["scheduler"].status()["waiting"] == [job_id]
    page = client.get(f"/models/{job_id}").get_data(as_text=True)
    assert "lenet &lt;x&gt;" in page and "Waiting" in page and "Abort" in page
    clone = client.get(f"/models/new?clone={job_id}").get_data(as_text=True)
    assert 'value="lenet &lt;x&gt; (clone)"' in clone and 'value="50,85"' in clone and 'value="16"' in clone


def test_custom_network_saved_only_as_a_file(app, client, dataset, token):
    code = "def build_model(input_shape, num_outputs, **params):\n    raise SystemExit('not run here')\n"
    resp = client.post("/models/new", data=form_values(token, dataset, network="__custom__", custom_network=code))
    assert resp.status_code == 302
    job = app.extensions["digits"]["store"].get(resp.headers["Location"].rsplit("/", 1)[1])
    assert (job.path / "custom_network.py").read_text() == code
    assert job.data["train_options"]["network"] == str(job.path / "custom_network.py")


def test_api_create_model(app, client, dataset, token):
    headers = {"X-CSRFToken": token}
    bad = client.post(
        "/api/models",
        json={"name": "m", "dataset": dataset.id, "network": "nonet", "options": {"epochs": 0, "solver": "bogus"}},
        headers=headers,
    )
    fields = bad.get_json()["error"]["fields"]
    assert bad.status_code == 400 and {"network", "epochs", "solver"} <= set(fields)
    bad = client.post("/api/models", json={"name": "m", "dataset": "nope", "network": "lenet"}, headers=headers)
    assert bad.status_code == 400 and "dataset" in bad.get_json()["error"]["fields"]
    ok = client.post(
        "/api/models",
        json={"name": "m", "dataset": dataset.id, "network": "lenet", "options": {"epochs": 1, "learning_rate": 0.05}},
        headers=headers,
    )
    assert ok.status_code == 202
    job_id = ok.get_json()["id"]
    assert client.get(f"/models/{job_id}.json").get_json()["train_options"]["learning_rate"] == 0.05


def test_metrics_endpoint_reads_incrementally(app, client, dataset):
    job = model_job(app, dataset, status=JobStatus.RUNNING)
    lines = [
        {"epoch": 0.5, "step": 5, "name": "loss", "value": 2.0},
        {"epoch": 1, "step": 10, "name": "lr", "value": 0.01},
    ]
    with open(job.path / "metrics.jsonl", "w") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
        handle.write('{"epoch": 1, "step": 10, "na')  # a line being written
    first = client.get(f"/models/{job.id}/metrics.json").get_json()
    assert first["points"] == lines and first["status"] == "Running" and not first["done"]
    with open(job.path / "metrics.jsonl", "a") as handle:
        handle.write('me": "val_loss", "value": 1.5}\n')
    second = client.get(f"/models/{job.id}/metrics.json?offset={first['offset']}").get_json()
    assert [p["name"] for p in second["points"]] == ["val_loss"]
    assert client.get(f"/models/{job.id}/metrics.json?offset={second['offset']}").get_json()["points"] == []


def test_abort_resume_delete(app, client, dataset, token):
    scheduler = app.extensions["digits"]["scheduler"]
    waiting = model_job(app, dataset, status=JobStatus.INITIALIZED)
    scheduler.submit(waiting)
    resp = client.post(f"/models/{waiting.id}/abort", data={"csrf_token": token})
    assert resp.status_code == 302 and waiting.reload().status is JobStatus.ABORTED
    # No snapshot: resume refused with a clear message.
    resp = client.post(f"/models/{waiting.id}/resume", data={"csrf_token": token})
    assert resp.status_code == 400 and "no snapshot" in resp.get_data(as_text=True)
    with_snap = model_job(app, dataset, status=JobStatus.ABORTED, snapshots=2)
    page = client.get(f"/models/{with_snap.id}").get_data(as_text=True)
    assert "epoch-002.keras" in page and 'id="resume"' in page and 'id="infer-form"' in page
    resp = client.post(f"/api/jobs/{with_snap.id}/resume", headers={"X-CSRFToken": token})
    assert resp.status_code == 202 and with_snap.reload().status is JobStatus.WAITING
    assert with_snap.data["resume"] is True
    done = model_job(app, dataset)
    assert client.post(f"/api/jobs/{done.id}/abort", headers={"X-CSRFToken": token}).status_code == 400
    resp = client.post(f"/models/{done.id}/delete", data={"csrf_token": token})
    assert resp.status_code == 302 and not done.path.exists()
    assert client.get(f"/models/{done.id}").status_code == 404


def test_download_needs_a_snapshot(app, client, dataset):
    job = model_job(app, dataset, status=JobStatus.RUNNING)
    resp = client.get(f"/models/{job.id}/download")
    assert resp.status_code == 400 and "no snapshot" in resp.get_data(as_text=True)


def test_view_config_fragments(app, client, dataset):
    from digits_core.plugins.contract import config_form

    job = model_job(app, dataset, snapshots=1)
    for view_id, cls in registry.views().items():
        resp = client.get(f"/models/{job.id}/view-config?view_id={view_id}")
        assert resp.status_code == 200
        html = resp.get_data(as_text=True)
        form_class = config_form(cls)
        if form_class is None:
            assert "This view has no options." in html
            continue
        # The fragment is this view's form: each of its fields is there by name, with its default filled in.
        for field in form_class():
            assert f'name="{field.name}"' in html, (view_id, field.name)
            if field.type in ("IntegerField", "FloatField", "DecimalField") and field.default is not None:
                assert f'value="{field.default}"' in html, (view_id, field.name, field.default)
    assert client.get(f"/models/{job.id}/view-config?view_id=nope").status_code == 404


def test_inference_inputs_are_validated(app, client, dataset, token, tmp_path):
    job = model_job(app, dataset, snapshots=1)
    view = sorted(registry.views())[0]
    for path, message in (("relative/x.png", "absolute path"), (str(tmp_path / "missing.png"), "does not exist")):
        resp = client.post(
            f"/models/{job.id}/infer",
            data={"csrf_token": token, "input_mode": "path", "server_path": path, "view_id": view},
        )
        assert resp.status_code == 200 and message in resp.get_data(as_text=True), path
    resp = client.post(f"/models/{job.id}/infer", data={"csrf_token": token, "input_mode": "upload", "view_id": view})
    assert resp.status_code == 200 and "at least one image" in resp.get_data(as_text=True)
    resp = client.post(
        f"/api/models/{job.id}/infer", json={"inputs": ["../../etc/passwd"]}, headers={"X-CSRFToken": token}
    )
    assert resp.status_code == 400 and "inputs" in resp.get_json()["error"]["fields"]
