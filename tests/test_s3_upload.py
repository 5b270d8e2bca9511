"""S3 source and ``digits upload-s3`` against a real S3 server (moto standalone) on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.cli import main
from digits_core.sources import (
    S3BucketNotFoundError,
    S3CredentialsError,
    S3EndpointError,
    S3Error,
    S3Location,
    check_location,
    download_prefix,
    list_class_tree,
    read_object,
    read_upload_config,
    upload_tree,
)
from digits_core.sources.s3_testing import free_port, local_s3_server


@pytest.fixture(scope="module")
def s3():
    with local_s3_server() as server:
        yield server


def make_tree(root, classes=("cat", "dog"), per_class=3):
    for c, name in enumerate(classes):
        (root / "train" / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = np.full((5, 6, 3), 40 * c + i, np.uint8)
            Image.fromarray(pixels).save(root / "train" / name / f"{i:03d}.png")
    (root / "train" / "notes.txt").write_text("not an image")
    return root


def test_upload_creates_bucket_lists_classes_and_skips_unchanged(s3, tmp_path):
    tree = make_tree(tmp_path / "data")
    location = s3.location("upload-one", "pets")
    report = upload_tree(tree, location, workers=4)
    assert report.bucket_created
    assert report.uploaded == [f"pets/train/{c}/{i:03d}.png" for c in ("cat", "dog") for i in range(3)]
    assert report.bytes_uploaded == sum(p.stat().st_size for p in tree.rglob("*.png"))

    classes = list_class_tree(location.child("pets/train/"))
    assert list(classes) == ["cat", "dog"]
    assert [o.key for o in classes["dog"]] == [f"pets/train/dog/{i:03d}.png" for i in range(3)]
    assert read_object(location, "pets/train/dog/002.png") == (tree / "train/dog/002.png").read_bytes()

    copied = download_prefix(location.child("pets/"), tmp_path / "copy", workers=3)
    assert len(copied) == 6
    for path in (tree / "train").rglob("*.png"):
        assert (tmp_path / "copy" / "train" / path.relative_to(tree / "train")).read_bytes() == path.read_bytes()

    # again: everything skipped; a changed file is uploaded again
    again = upload_tree(tree, location)
    assert again.uploaded == [] and len(again.skipped) == 6 and not again.bucket_created
    Image.fromarray(np.zeros((7, 7), np.uint8)).save(tree / "train/cat/001.png")
    third = upload_tree(tree, location)
    assert third.uploaded == ["pets/train/cat/001.png"] and len(third.skipped) == 5


def test_error_cases_name_what_is_wrong(s3, tmp_path):
    good = s3.location("errors-bucket", "")
    upload_tree(make_tree(tmp_path / "d"), good)
    check_location(good)

    with pytest.raises(S3BucketNotFoundError, match="'no-such-bucket' does not exist"):
        check_location(s3.location("no-such-bucket"))
    with pytest.raises(S3CredentialsError, match="InvalidAccessKeyId") as info:
        check_location(S3Location("errors-bucket", "", s3.endpoint, "AKIAWRONGWRONG12", s3.secret_key))
    assert s3.secret_key not in str(info.value)
    with pytest.raises(S3CredentialsError, match="secret key") as info:
        check_location(S3Location("errors-bucket", "", s3.endpoint, s3.access_key, "not-the-secret"))
    assert "not-the-secret" not in str(info.value)
    with pytest.raises(S3CredentialsError, match="No secret key for access key"):
        check_location(S3Location("errors-bucket", "", s3.endpoint, s3.access_key, None))
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(S3EndpointError, match="Cannot reach the S3 endpoint " + dead):
        check_location(S3Location("errors-bucket", "", dead, s3.access_key, s3.secret_key))
    with pytest.raises(S3Error, match="Nothing found"):
        check_location(s3.location("errors-bucket", "no/such/prefix/"))


def test_location_never_shows_the_secret(s3):
    location = s3.location("b-b-b", "p/")
    assert s3.secret_key not in repr(location) and s3.secret_key not in location.describe()
    assert S3Location.from_url("s3://bkt/a/b/", endpoint_url="http://x").prefix == "a/b/"


def test_cli_upload_with_digits_config_file(s3, tmp_path, capsys):
    tree = make_tree(tmp_path / "mnist")
    config = tmp_path / "upload_config.cfg"
    config.write_text(
        "[S3 Config]\n"
        f"endpoint = {s3.endpoint}\n"
        f"accesskey = {s3.access_key}\n"
        f"secretkey = {s3.secret_key}\n"
        "bucket = cli-bucket\n"
        "prefix = mnist\n"
    )
    assert read_upload_config(config)["prefix"] == "mnist"
    assert main(["upload-s3", str(tree), "--config", str(config), "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "Created bucket cli-bucket" in out and "Uploaded 6 files" in out and s3.secret_key not in out
    # options override the file; a second run skips everything
    assert main(["upload-s3", str(tree), "--config", str(config), "--prefix", "mnist"]) == 0
    out = capsys.readouterr().out
    assert "Uploaded 0 files" in out and "6 already there" in out
    assert main(["upload-s3", str(tree), "--config", str(config), "--endpoint", f"http://127.0.0.1:{free_port()}"]) == 1
    assert "Cannot reach the S3 endpoint" in capsys.readouterr().err
