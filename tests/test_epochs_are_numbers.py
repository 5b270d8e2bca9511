"""Epochs are numbers everywhere: the web worker, the inference API and the engine pick the same snapshot."""

from __future__ import annotations

import json

import pytest

from digits_core.engine.snapshots import find_snapshot
from digits_core.errors import DigitsError
from digits_core.inference.model import resolve_epoch
from digits_core.jobs import Job, JobStatus


def _model(tmp_path, epochs):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    (job.path / "snapshots").mkdir()
    snaps = []
    for epoch in epochs:
        name = f"epoch-{epoch:g}.keras"
        (job.path / "snapshots" / name).write_bytes(b"not a real model")
        snaps.append({"epoch": epoch, "step": int(epoch * 4), "file": name, "state": name + ".npz"})
    (job.path / "model.json").write_text(json.dumps({"snapshots": snaps}), encoding="utf-8")
    job.set_status(JobStatus.DONE)
    return job


@pytest.mark.parametrize("asked", [1.5, "1.5", 2, "2", 2.0])
def test_inference_and_engine_pick_the_same_snapshot(tmp_path, asked):
    job = _model(tmp_path, [1, 1.5, 2])
    info = json.loads((job.path / "model.json").read_text())
    _, path = resolve_epoch(job, asked, info)
    assert path.name == find_snapshot(info, asked, job.id)["file"] == f"epoch-{float(asked):g}.keras"


def test_web_worker_keeps_a_fractional_epoch(tmp_path):
    from digits_core.web.worker_calls import _do_infer

    job = _model(tmp_path, [1, 2])  # no 1.5: truncating to 1 would silently run epoch 1
    with pytest.raises(DigitsError, match="epoch 1.5"):
        _do_infer({"model": str(job.path), "epoch": "1.5", "inputs": [], "jobs_dir": str(tmp_path)})
