"""Two-worker MultiWorkerMirroredStrategy training on localhost CPU, for real (two processes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from digits_core import registry
from digits_core.jobs import JobStore

pytestmark = pytest.mark.slow


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def test_two_workers_train_together_and_only_the_chief_writes(tmp_path):
    from synthetic_plugins import SyntheticShapes

    from digits_core.datasets import create_dataset

    jobs = tmp_path / "jobs"
    registry.register(SyntheticShapes)
    try:
        ds = create_dataset("synthetic-shapes", {"count": 256, "val_count": 64, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    ports = _free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for index in range(2):
        env = {
            **os.environ,
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "",
        }
        cmd = [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(jobs),
            "train",
            "--dataset",
            ds.id,
            "--network",
            "lenet",
            "--name",
            "two-workers",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--quiet",
            "--json",
        ]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=240))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]

    chief = json.loads(outputs[0][0])
    assert chief["status"] == "Done"
    assert chief["distributed"]["strategy"] == "MultiWorkerMirroredStrategy"
    assert chief["distributed"]["num_workers"] == 2 and chief["distributed"]["replicas"] == 2
    assert chief["steps_per_epoch"] == 8  # 256 images, global batch 32 = 2 workers x 16
    assert [s["file"] for s in chief["snapshots"]] == ["epoch-001.keras", "epoch-002.keras"]
    assert "worker 1 of 2 finished (Done) after 16 steps on its shard of 128 images" in outputs[1][0]

    models = JobStore(jobs).list(kind="model")
    assert len(models) == 1  # the non-chief wrote nothing in the jobs folder
    job = models[0]
    assert job.data["worker_report"] == {"worker_index": 0, "num_workers": 2, "steps": 16, "images_per_epoch": 128}
    names = {json.loads(line)["name"] for line in (job.path / "metrics.jsonl").read_text().splitlines()}
    assert {"loss", "val_loss", "val_accuracy"} <= names
    assert any((job.path / "tb").iterdir())
    val = [json.loads(line) for line in (job.path / "metrics.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in val if p["name"] == "val_loss"] == [1.0, 2.0]


def test_sigterm_aborts_cli_training_and_resume_finishes(tmp_path):
    import signal
    import time

    from synthetic_plugins import SyntheticShapes

    from digits_core.datasets import create_dataset

    jobs = tmp_path / "jobs"
    registry.register(SyntheticShapes)
    try:
        ds = create_dataset("synthetic-shapes", {"count": 256, "val_count": 32, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    env.pop("TF_CONFIG", None)
    cmd = [
        sys.executable,
        "-m",
        "digits_core",
        "--jobs-dir",
        str(jobs),
        "train",
        "--dataset",
        ds.id,
        "--network",
        "lenet",
        "--name",
        "sigterm",
        "--epochs",
        "200",
        "--batch-size",
        "16",
        "--quiet",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            models = JobStore(jobs).list(kind="model")
            if models and (models[0].path / "snapshots").is_dir():
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err[-2000:]
    job = JobStore(jobs).list(kind="model")[0]
    assert job.status.value == "Aborted" and "SIGTERM" in job.error
    assert f"digits train --resume {job.id}" in out
    info = json.loads((job.path / "model.json").read_text())
    assert info["snapshots"] and info["last_epoch"] < 200
    # resume to a smaller total than planned is refused; resuming to the snapshot's epoch + 1 finishes
    from digits_core.cli import main

    target = int(info["last_epoch"]) + 1
    cmd = [
        sys.executable,
        "-m",
        "digits_core",
        "--jobs-dir",
        str(jobs),
        "train",
        "--resume",
        job.id,
        "--epochs",
        str(target),
        "--quiet",
        "--json",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["last_epoch"] == target
    del main


def test_abort_on_the_chief_stops_every_worker(tmp_path):
    import time

    from synthetic_plugins import SyntheticShapes

    from digits_core.cli import main
    from digits_core.datasets import create_dataset

    jobs = tmp_path / "jobs"
    registry.register(SyntheticShapes)
    try:
        ds = create_dataset("synthetic-shapes", {"count": 128, "val_count": 32, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    cluster = {"worker": [f"localhost:{p}" for p in _free_ports(2)]}
    procs = []
    for index in range(2):
        env = {
            **os.environ,
            "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "CUDA_VISIBLE_DEVICES": "",
        }
        cmd = [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(jobs),
            "train",
            "--dataset",
            ds.id,
            "--network",
            "lenet",
            "--name",
            "abort-all",
            "--epochs",
            "500",
            "--batch-size",
            "32",
            "--quiet",
        ]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        deadline = time.time() + 180
        job = None
        while time.time() < deadline:
            models = JobStore(jobs).list(kind="model")
            if models and (models[0].path / "snapshots").is_dir():
                job = models[0]
                break
            time.sleep(0.2)
        assert job is not None, "the chief never wrote a snapshot"
        assert main(["--jobs-dir", str(jobs), "model", "abort", job.id]) == 0
        outputs = [proc.communicate(timeout=90) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert procs[0].returncode == 3, outputs[0][1][-2000:]
    assert procs[1].returncode == 0 and "finished (Aborted)" in outputs[1][0], outputs[1][1][-2000:]
    assert job.reload().status.value == "Aborted"
