"""Data roots: the web server reads server-side paths only under its roots; errors never echo files.

The CLI and Python API (the user's own rights) keep accepting any path.
"""

from __future__ import annotations

import json
import logging
import os

import pytest

from digits_core.errors import FormValidationError
from digits_core.jobs import Job, JobStatus
from digits_core.paths import PathOutsideRootsError, check_server_path, confined_to
from digits_core.web import create_app

SECRET = "root:x:0:0:SECRET-LINE"


@pytest.fixture
def world(tmp_path):
    """A data root with one class folder, and secrets outside it."""
    root = tmp_path / "data"
    (root / "digits" / "c0").mkdir(parents=True)
    (root / "digits" / "c0" / "0.png").write_bytes(b"")  # the form checks that a class folder holds an image
    outside = tmp_path / "private"
    (outside / "home").mkdir(parents=True)
    (outside / ".bashrc").write_text("export TOKEN=abc\n")
    (outside / "passwd").write_text(SECRET + "\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, data_roots=[root])
    return {"root": root, "outside": outside, "app": app, "client": app.test_client(), "jobs": tmp_path / "jobs"}


def post_dataset(client, plugin_id, form_data):
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    return client.post(
        "/api/datasets",
        json={"plugin_id": plugin_id, "name": "d", "form_data": form_data},
        headers={"X-CSRFToken": token},
    )


def assert_refused(resp, field, world):
    assert resp.status_code == 400, resp.get_data(as_text=True)
    body = resp.get_data(as_text=True)
    assert field in body and "outside the server's data roots" in body and str(world["root"]) in body
    assert SECRET not in body and ".bashrc" not in body and "TOKEN" not in body


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("folder", "{outside}"),
        ("train_list", "{outside}/passwd"),
        ("folder", "{root}/escape"),  # a symlink inside the root leading out of it
        ("train_list", "{root}/escape/passwd"),
        ("folder", "{root}/../private"),
    ],
)
def test_dataset_paths_outside_the_roots_are_400(world, field, value):
    value = value.format(root=world["root"], outside=world["outside"])
    resp = post_dataset(world["client"], "image-classification", {field: value, "width": 8, "height": 8})
    assert_refused(resp, field, world)
    assert not any(world["jobs"].iterdir()), "no job is created"


def test_sunnybrook_never_lists_a_folder_outside_the_roots(world):
    for value in (str(world["outside"]), str(world["outside"] / "missing")):
        resp = post_dataset(
            world["client"], "image-sunnybrook", {"image_folder": value, "contour_folder": str(world["root"])}
        )
        assert_refused(resp, "image_folder", world)


def test_dataset_page_shows_the_error_next_to_the_field(world):
    client = world["client"]
    page = client.get("/datasets/new/image-classification").get_data(as_text=True)
    token = page.split('name="csrf_token"', 1)[1].split('value="', 1)[1].split('"', 1)[0]
    resp = client.post(
        "/datasets/new/image-classification",
        data={"csrf_token": token, "job_name": "x", "folder": str(world["outside"]), "width": "8", "height": "8"},
    )
    assert resp.status_code == 200
    html = resp.get_data(as_text=True)
    assert "outside the server&#39;s data roots" in html or "outside the server's data roots" in html


def test_dataset_under_the_root_is_queued_with_its_roots(world):
    resp = post_dataset(
        world["client"], "image-classification", {"folder": str(world["root"] / "digits"), "width": 8, "height": 8}
    )
    assert resp.status_code == 202, resp.get_data(as_text=True)
    job = Job.load(world["jobs"] / resp.get_json()["id"])
    # The jobs folder always is a root (inference uploads are saved there).
    assert job.data["data_roots"] == [str(world["root"].resolve()), str(world["jobs"].resolve())]


def test_inference_inputs_outside_the_roots_are_400(world):
    model = Job.create("model", "m", jobs_dir=world["jobs"])
    model.set_status(JobStatus.DONE)
    client = world["client"]
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    for inputs in (["/etc/shadow"], [str(world["outside"] / "passwd")], [str(world["root"] / "escape" / "passwd")]):
        resp = client.post(f"/api/models/{model.id}/infer", json={"inputs": inputs}, headers={"X-CSRFToken": token})
        assert_refused(resp, "inputs", world)


def test_server_context_applies_to_paths_inside_list_files(world, tmp_path):
    """What the worker does for a server job: a list file under the root naming a file outside it."""
    from digits_core.inference.inputs import collect_inputs
    from digits_data_images import listing

    listed = world["root"] / "list.txt"
    listed.write_text(f"{world['outside'] / 'passwd'} 0\n")
    with confined_to([world["root"]]):
        with pytest.raises(ValueError, match="outside the server's data roots") as exc:
            listing.read_list_file(str(listed))
        assert SECRET not in str(exc.value)
        with pytest.raises(Exception, match="outside the server's data roots") as exc:
            collect_inputs([str(listed)])
        assert SECRET not in str(exc.value)
        with pytest.raises(ValueError, match="outside the server's data roots"):
            listing.list_images(str(world["root"]))  # the escape symlink
        with pytest.raises(PathOutsideRootsError, match="field_x"):
            check_server_path(world["outside"], "field_x")
    # The CLI and the Python API (no server context) accept any path...
    assert listing.read_list_file(str(listed)) == [(str(world["outside"] / "passwd"), 0)]
    assert check_server_path(world["outside"]) == world["outside"]


def test_list_file_errors_never_quote_the_file(tmp_path):
    """`train_list=/etc/passwd` from the CLI: the error names the file and line, not its content."""
    from digits_core.inference.inputs import collect_inputs
    from digits_data_images import listing

    secret = tmp_path / "shadow"
    secret.write_text(SECRET + "\n")
    for call in (lambda: listing.read_list_file(str(secret)), lambda: collect_inputs([str(secret)])):
        with pytest.raises(Exception) as exc:
            call()
        assert str(secret) in str(exc.value) and "line 1" in str(exc.value)
        assert "SECRET" not in str(exc.value) and "root:x" not in str(exc.value)
    secret.write_text("/some/image.png SECRET\n")
    with pytest.raises(ValueError) as exc:
        listing.read_list_file(str(secret))
    assert "SECRET" not in str(exc.value)


def test_symlink_loop_is_followed_once(tmp_path, caplog):
    from digits_data_images import listing

    data = tmp_path / "DATA" / "c0"
    data.mkdir(parents=True)
    for i in range(3):
        (data / f"{i}.png").write_bytes(b"")
    (data / "loop").symlink_to(".", target_is_directory=True)
    (data / "again.png").symlink_to(data / "0.png")
    with caplog.at_level(logging.WARNING):
        found = listing.list_images(str(data))
    assert sorted(os.path.basename(p) for p in found) == ["0.png", "1.png", "2.png"]
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "symlink loop" in messages and str(data / "loop") in messages


def test_check_form_paths_reports_every_field(world):
    from digits_core.paths import check_form_paths

    with confined_to([world["root"]]), pytest.raises(FormValidationError) as exc:
        check_form_paths({"a": "/etc", "b": "~", "c": "s3://bucket/x", "d": "plain words", "e": 3})
    assert set(exc.value.errors) == {"a", "b"}
    json.dumps(exc.value.errors)


def test_bare_relative_name_is_checked_by_the_plugin_validator(world, tmp_path, monkeypatch):
    """`folder=link` (no slash) relative to the server's folder, a symlink leading out of the roots."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link").symlink_to(world["outside"], target_is_directory=True)
    resp = post_dataset(world["client"], "image-classification", {"folder": "link", "width": 8, "height": 8})
    assert_refused(resp, "folder", world)


def test_a_file_symlink_leading_out_of_the_roots_is_refused(world):
    from digits_data_images import listing

    (world["root"] / "digits" / "c0" / "stolen.png").symlink_to(world["outside"] / "passwd")
    refused = "stolen.png leads to .* outside the server's data roots"
    with confined_to([world["root"]]), pytest.raises(ValueError, match=refused):
        listing.list_images(str(world["root"] / "digits"))
