"""A classification dataset built straight from S3 equals the one built from the same local folder.

The S3 server is moto's standalone server on 127.0.0.1 with signature
checking on (see ``digits_core.sources.s3_testing``); nothing is patched.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core import FormValidationError
from digits_core.datasets import create_dataset, open_dataset
from digits_core.sources import upload_tree
from digits_core.sources.s3_testing import free_port, local_s3_server

BUCKET = "digits-data"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    root = tmp_path_factory.mktemp("pets")
    rng = np.random.default_rng(7)
    for stage, count in (("train", 8), ("test", 2)):
        for name in ("bird", "cat", "dog"):
            (root / stage / name).mkdir(parents=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)).save(
                    root / stage / name / f"{name}_{i:02d}.png"
                )
    with local_s3_server() as server:
        upload_tree(root, server.location(BUCKET, "pets"))
        server.root = root
        yield server


def s3_fields(s3, **extra):
    return {
        "s3_endpoint_url": s3.endpoint,
        "s3_bucket": BUCKET,
        "s3_path": "pets/train",
        "s3_accesskey": s3.access_key,
        "s3_secretkey": s3.secret_key,
        **extra,
    }


COMMON = {"width": 8, "height": 8, "image_type": "color", "resize_mode": "squash", "val_percent": 25}


def all_records(dataset):
    return {stage: dataset.read_all(stage) for stage in dataset.stages}


@pytest.mark.slow
def test_dataset_from_s3_equals_dataset_from_local_folder(s3, tmp_path):
    local = create_dataset(
        "image-classification",
        {**COMMON, "folder": str(s3.root / "train"), "test_folder": str(s3.root / "test")},
        name="local",
        workers=2,
        jobs_dir=tmp_path,
    )
    remote = create_dataset(
        "image-classification",
        {**COMMON, **s3_fields(s3, s3_test_path="pets/test/")},
        name="s3",
        workers=2,
        jobs_dir=tmp_path,
    )
    a, b = open_dataset(local.id, jobs_dir=tmp_path), open_dataset(remote.id, jobs_dir=tmp_path)
    assert a.class_labels == b.class_labels == ["bird", "cat", "dog"]
    assert a.stages == b.stages == ["train", "val", "test"]
    ra, rb = all_records(a), all_records(b)
    for stage in a.stages:
        assert a.count(stage) == b.count(stage) > 0
        np.testing.assert_array_equal(ra[stage][1], rb[stage][1])  # same labels, same order
        np.testing.assert_array_equal(ra[stage][0], rb[stage][0])  # same pixels
    # the secret key was used but is written nowhere
    for path in remote.path.rglob("*"):
        if path.is_file():
            assert s3.secret_key.encode() not in path.read_bytes(), path
    assert remote.data["form_data"]["s3_secretkey"] == "********"


def test_credentials_from_the_standard_aws_environment(s3, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    values = {**COMMON, **s3_fields(s3, s3_accesskey="", s3_secretkey="")}
    job = create_dataset("image-classification", values, workers=1, jobs_dir=tmp_path)
    assert open_dataset(job.id, jobs_dir=tmp_path).count("train") == 18


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"s3_bucket": "no-such-bucket"}, "s3_bucket", "'no-such-bucket' does not exist"),
        ({"s3_secretkey": "wrong-secret"}, "s3_secretkey", "SignatureDoesNotMatch"),
        ({"s3_accesskey": "AKIANOTAREALKEY00"}, "s3_accesskey", "InvalidAccessKeyId"),
        ({"s3_endpoint_url": "DEAD"}, "s3_endpoint_url", "Cannot reach the S3 endpoint"),
        ({"s3_path": "pets/nothing-here/"}, "s3_path", "Nothing found"),
        ({"folder": "/tmp"}, "s3_path", "not both"),
    ],
)
def test_bad_s3_settings_fail_before_the_job_with_the_field_named(s3, tmp_path, change, field, message):
    if change.get("s3_endpoint_url") == "DEAD":
        change = {"s3_endpoint_url": f"http://127.0.0.1:{free_port()}"}
    with pytest.raises(FormValidationError) as info:
        create_dataset("image-classification", {**COMMON, **s3_fields(s3, **change)}, workers=1, jobs_dir=tmp_path)
    assert message in " ".join(info.value.errors.get(field, [])), info.value.errors
    assert "wrong-secret" not in str(info.value) and s3.secret_key not in str(info.value)
    assert not list(tmp_path.iterdir())  # no job was created


@pytest.mark.slow
def test_job_run_by_the_scheduler_worker_process_gets_the_secret_key(s3, tmp_path, monkeypatch):
    """The web UI's path: the job is queued and built by a separate worker process."""
    from digits_core.datasets.create import create_dataset_job
    from digits_core.jobs import JobStatus
    from digits_core.scheduler import Scheduler

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    scheduler = Scheduler(tmp_path, poll_interval=0.1).start()
    try:
        job = create_dataset_job("image-classification", {**COMMON, **s3_fields(s3)}, workers=1, jobs_dir=tmp_path)
        scheduler.submit(job)
        job = scheduler.wait(job.id, timeout=120)
    finally:
        scheduler.shutdown()
    assert job.status is JobStatus.DONE, job.error
    assert open_dataset(job.id, jobs_dir=tmp_path).count("train") == 18
    for path in job.path.rglob("*"):
        if path.is_file():
            assert s3.secret_key.encode() not in path.read_bytes(), path
