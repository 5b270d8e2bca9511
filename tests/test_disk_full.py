"""A full disk: a job that cannot finish ends Error "disk full", the server starts and keeps serving.

Each test mounts a small tmpfs as the jobs folder (needs root and ``mount -t
tmpfs``; skipped with the reason otherwise) and checks that nothing of an
earlier job changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from digits_core.errors import DatasetError
from digits_core.jobs import Job, JobStatus


def _can_mount() -> str | None:
    if os.geteuid() != 0:
        return "needs root to mount a small tmpfs"
    return None


def _mounted(tmp_path, size: str, name: str = "fs"):
    reason = _can_mount()
    if reason:
        pytest.skip(reason)
    mount = tmp_path / name
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"mount -t tmpfs does not work here: {result.stderr.strip()[:200]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs mounted at tmp_path/fs (unmounted afterwards)."""
    yield from _mounted(tmp_path, "3m")


@pytest.fixture
def model_disk(tmp_path):
    """A 24 MB tmpfs (room for a tiny dataset, a LeNet and its snapshots) mounted at tmp_path/fs."""
    yield from _mounted(tmp_path, "24m")


@pytest.fixture
def images(tmp_path):
    """Two classes of noise images, 4 MB raw: more than the small disk holds."""
    src = tmp_path / "src"
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(180):
            Image.fromarray(np.random.default_rng(i).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(
                src / c / f"{i}.png"
            )
    small = tmp_path / "small"
    for c in ("a", "b"):
        (small / c).mkdir(parents=True)
        for i in range(4):
            Image.fromarray(np.full((8, 8, 3), i * 30, np.uint8)).save(small / c / f"{i}.png")
    return src, small


def _checksums(folder) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in ("job.lock",)
    }


@pytest.fixture
def earlier(small_disk, images):
    """A small Done dataset on the small disk, and the checksums of its files."""
    from digits_core.datasets import create_dataset

    job = create_dataset(
        "image-classification",
        {"folder": str(images[1]), "width": 8, "height": 8},
        name="earlier",
        jobs_dir=small_disk / "jobs",
        workers=1,
    )
    return job, _checksums(job.path)


def test_a_dataset_that_does_not_fit_ends_error_disk_full_and_frees_its_build(small_disk, images, earlier):
    from digits_core.datasets import create_dataset

    src, jobs = images[0], small_disk / "jobs"
    earlier, before = earlier
    with pytest.raises(DatasetError, match="the disk is full") as exc:
        create_dataset(
            "image-classification",
            {"folder": str(src), "width": 64, "height": 64, "encoding": "none"},
            name="big",
            jobs_dir=jobs,
            workers=1,
        )
    assert str(jobs) in str(exc.value)
    big = next(Job.load(p) for p in jobs.iterdir() if p.is_dir() and p != earlier.path)
    assert big.status is JobStatus.ERROR and "the disk is full" in (big.error or "")
    assert not [p for p in big.path.iterdir() if p.name.startswith(".building-")]
    assert _checksums(earlier.path) == before


def _fill(path) -> None:
    """Fill the disk to its last block."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 16, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


DEAD_BUILD = """
import os, sys
from digits_core.jobs import Job, JobStatus
job = Job.create("dataset", "killed", jobs_dir=sys.argv[1], hold=True)
job.set_status(JobStatus.RUNNING)
build = job.path / ".building-x"
build.mkdir()
with open(build / "data.mdb", "wb") as f:
    f.write(b"x" * 1_500_000)
print(job.id, flush=True)
os._exit(0)  # killed mid-build: its lock file and its build folder stay
"""


def test_the_server_starts_serves_and_deletes_on_a_full_disk(small_disk, earlier):
    from digits_core.web import create_app

    jobs = small_disk / "jobs"
    earlier, before = earlier
    dead_id = subprocess.run(
        [sys.executable, "-c", DEAD_BUILD, str(jobs)], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()
    _fill(small_disk / "filler")
    app = create_app(jobs, start_scheduler=True, testing=True, data_roots=[small_disk])
    try:
        dead = Job.load(jobs / dead_id)
        assert not (dead.path / ".building-x").exists()  # the reaper freed the dead build first...
        assert dead.status is JobStatus.ABORTED  # ...so it could write the job's end
        _fill(small_disk / "filler-again")  # and full again while it serves
        client = app.test_client()
        assert client.get("/").status_code == 200
        assert client.get("/index.json").status_code == 200
        assert client.get(f"/datasets/{earlier.id}").status_code == 200
        token = client.get("/api/csrf-token").get_json()["csrf_token"]
        assert client.delete(f"/api/jobs/{dead_id}", headers={"X-CSRFToken": token}).status_code in (200, 202, 204)
        assert not (jobs / dead_id).exists()
        assert _checksums(earlier.path) == before
    finally:
        app.extensions["digits"]["scheduler"].shutdown()


@pytest.mark.slow
def test_a_training_whose_snapshot_does_not_fit_ends_error_disk_full(small_disk, tmp_path):
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    gray = tmp_path / "gray"
    for c in ("a", "b"):
        (gray / c).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(np.full((16, 16), i * 30 + (c == "b") * 100, np.uint8)).save(gray / c / f"{i}.png")
    jobs = small_disk / "jobs"
    dataset = create_dataset(
        "image-classification",
        {"folder": str(gray), "width": 16, "height": 16, "image_type": "grayscale"},
        name="d",
        jobs_dir=jobs,
        workers=1,
    )
    before = _checksums(dataset.path)
    stat = os.statvfs(small_disk)
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # leave room for the job's files, not for a LeNet snapshot
        os.write(fd, b"\0" * max(0, stat.f_bavail * stat.f_frsize - 300_000))
    finally:
        os.close(fd)
    with pytest.raises(Exception, match="the disk is full"):
        train(dataset.id, "lenet", jobs_dir=jobs, epochs=2, batch_size=4)
    model = next(Job.load(p) for p in jobs.iterdir() if p.is_dir() and p != dataset.path)
    assert model.status is JobStatus.ERROR and "the disk is full" in (model.error or "")
    assert not list((model.path / "snapshots").glob(".tmp-*"))
    assert _checksums(dataset.path) == before


def test_a_job_submitted_on_a_full_disk_is_refused_with_507_and_leaves_nothing(small_disk, images, earlier, tmp_path):
    """Dataset and model submissions on a full disk: 507 "the disk is full ... under <jobs>", no folder left behind."""
    from digits_core.web import create_app

    jobs = small_disk / "jobs"
    earlier, before = earlier
    entries = sorted(p.name for p in jobs.iterdir())
    _fill(small_disk / "filler")
    app = create_app(jobs, start_scheduler=False, testing=True, data_roots=[tmp_path])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    form_data = {"folder": str(images[1]), "width": 8, "height": 8}
    resp = client.post(
        "/api/datasets",
        headers={"X-CSRFToken": token},
        json={"plugin_id": "image-classification", "name": "late", "form_data": form_data},
    )
    message = resp.get_json()["error"]["message"]
    assert resp.status_code == 507 and "the disk is full" in message and str(jobs) in message, message
    page = client.post(
        "/datasets/new/image-classification",
        headers={"X-CSRFToken": token},
        data={**form_data, "job_name": "late", "min_per_class": 2, "seed": 0},
    )
    assert page.status_code == 507 and "the disk is full" in page.get_data(as_text=True)
    model = client.post(
        "/api/models",
        headers={"X-CSRFToken": token},
        json={"name": "m", "dataset": earlier.id, "network": "lenet", "options": {"epochs": 1}},
    )
    assert model.status_code == 507 and "the disk is full" in model.get_json()["error"]["message"], model.get_json()
    assert sorted(p.name for p in jobs.iterdir()) == entries  # no half-made job folder, hidden or not
    assert client.get("/").status_code == 200 and client.get("/index.json").status_code == 200
    assert _checksums(earlier.path) == before
    os.remove(small_disk / "filler")  # space again: the same submission is accepted
    resp = client.post(
        "/api/datasets",
        headers={"X-CSRFToken": token},
        json={"plugin_id": "image-classification", "name": "late", "form_data": form_data},
    )
    assert resp.status_code == 202, resp.get_json()
    assert Job.load(jobs / resp.get_json()["id"]).status is JobStatus.WAITING


def _gray_dataset(tmp_path, jobs):
    from digits_core.datasets import create_dataset

    gray = tmp_path / "gray"
    for c in ("a", "b"):
        (gray / c).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(np.full((16, 16), i * 30 + (c == "b") * 100, np.uint8)).save(gray / c / f"{i}.png")
    return create_dataset(
        "image-classification",
        {"folder": str(gray), "width": 16, "height": 16, "image_type": "grayscale"},
        name="d",
        jobs_dir=jobs,
        workers=1,
    )


@pytest.mark.slow
def test_a_tensorflow_save_on_a_full_disk_is_named_a_full_disk(small_disk):
    """TensorFlow's SaveV2 says ResourceExhaustedError, not OSError: still "the disk is full ... under FOLDER"."""
    import tensorflow as tf

    from digits_core.faults import disk_error_message

    _fill(small_disk / "filler")
    checkpoint = tf.train.Checkpoint(v=tf.Variable(tf.zeros([100_000])))
    with pytest.raises(tf.errors.ResourceExhaustedError) as exc:
        checkpoint.write(str(small_disk / "ckpt"))
    message = disk_error_message(exc.value, small_disk)
    assert message is not None and "the disk is full" in message and str(small_disk) in message, exc.value
    assert disk_error_message(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"), "x") is None


@pytest.mark.slow
def test_a_training_whose_model_json_write_hits_a_full_disk_ends_error_disk_full(model_disk, tmp_path, monkeypatch):
    """The disk fills right after a snapshot's files are written: listing it in model.json fails (ENOSPC)."""
    from digits_core.engine import snapshots, train

    jobs = model_disk / "jobs"
    dataset = _gray_dataset(tmp_path, jobs)
    before = _checksums(dataset.path)
    write_files = snapshots.write_snapshot_files

    def write_then_fill(*args, **kwargs):
        files = write_files(*args, **kwargs)
        _fill(model_disk / "filler")  # the real disk, full to its last block: model.json cannot be rewritten
        return files

    monkeypatch.setattr(snapshots, "write_snapshot_files", write_then_fill)
    with pytest.raises(Exception, match="the disk is full"):
        train(dataset.id, "lenet", jobs_dir=jobs, epochs=1, batch_size=4)
    model = next(Job.load(p) for p in jobs.iterdir() if p.is_dir() and p != dataset.path)
    assert model.status is JobStatus.ERROR, (model.status, model.error)
    assert "the disk is full" in (model.error or "") and str(jobs) in (model.error or ""), model.error
    assert "Errno" not in (model.error or "")
    listed = {s["file"] for s in json.loads((model.path / "model.json").read_text()).get("snapshots", [])}
    assert {p.name for p in (model.path / "snapshots").glob("*.keras")} <= listed  # no snapshot left unlisted
    assert not list((model.path / "snapshots").glob(".tmp-*"))
    assert _checksums(dataset.path) == before


@pytest.mark.slow
def test_an_export_on_a_full_disk_answers_507_and_leaves_nothing_half_written(model_disk, tmp_path):
    """Found: 400 "Internal error in the export worker: ResourceExhaustedError ... SaveV2"; now 507 "the disk is full"."""
    from digits_core.engine import train
    from digits_core.web import create_app

    jobs = model_disk / "jobs"
    model = train(_gray_dataset(tmp_path, jobs).id, "lenet", jobs_dir=jobs, epochs=1, batch_size=4)
    assert model.status is JobStatus.DONE
    _fill(model_disk / "filler")
    app = create_app(jobs, start_scheduler=False, testing=True, data_roots=[tmp_path])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    resp = client.post(
        f"/models/{model.id}/export",
        data={"format": "savedmodel", "csrf_token": token},
        headers={"Accept": "application/json"},
    )
    message = resp.get_json()["error"]["message"]
    assert resp.status_code == 507, message
    assert "the disk is full" in message and str(model.path / "export") in message, message
    page = client.post(f"/models/{model.id}/export", data={"format": "keras", "csrf_token": token})
    assert page.status_code == 507 and "the disk is full" in page.get_data(as_text=True)
    assert [p.name for p in (model.path / "export").iterdir()] == []  # no staging folder, no partial archive
    assert client.get(f"/models/{model.id}").status_code == 200
