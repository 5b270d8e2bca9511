"""The web UI's New Model form trains unet3d on a volume dataset (Flask test client, the worker's own entry point)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_new_model_form_queues_unet3d_and_the_worker_trains_it(tmp_path):
    from digits_core.datasets import create_dataset
    from digits_core.executors.worker import train_into_job
    from digits_core.jobs import JobStatus
    from digits_core.web import create_app
    from digits_data_volumes.synth import generate

    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
    synth = generate(tmp_path / "synth", cases=5, shape=(8, 16, 16), dicom=False)
    ds = create_dataset(
        "msd-volumes", {"data_folder": str(synth.task), "pct_val": 40}, jobs_dir=tmp_path / "jobs", workers=1
    )
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    page = client.get(f"/models/new?dataset={ds.id}").get_data(as_text=True)
    assert 'value="unet3d"' in page and 'value="unet2.5d"' in page
    resp = client.post(
        "/models/new",
        data={
            "csrf_token": token,
            "model_name": "vol",
            "dataset": ds.id,
            "network": "unet3d",
            "epochs": "2",
            "network_params": json.dumps({"steps_per_epoch": 3}),
        },
    )
    assert resp.status_code == 302, resp.get_data(as_text=True)[:2000]
    job = app.extensions["digits"]["store"].get(resp.headers["Location"].rsplit("/", 1)[1])
    train_into_job(job, job.train_options)
    assert job.status is JobStatus.DONE
    assert client.get(f"/models/{job.id}").status_code == 200
    points = client.get(f"/models/{job.id}/metrics.json").get_json()["points"]
    names = {p["name"] for p in points}
    assert {"loss", "val_dice", "val_dice_class1", "val_hd95"} <= names  # what the page's live charts plot
