"""A job whose record cannot be read: its page says what is wrong, it can be deleted, and a real server starts.

Also the request side of issue 39's finding 9: a JSON body nested deeper than a record may be and
a 5,000-character job name are refused with 400 naming the field, at every door (nothing created).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from digits_core.cli import main as digits_main
from digits_core.errors import FormValidationError
from digits_core.jobs import Job, JobStore
from digits_core.jobs.checks import MAX_JOB_NAME_LENGTH
from digits_core.jobs.record import JobRecordError
from digits_core.web.app import create_app

NON_UTF8 = b'{"id": "x\xff\xfe", "kind": "model"}'


def _broken_job(root, raw: bytes = NON_UTF8) -> Job:
    job = Job.create("model", "soon broken", jobs_dir=root)
    (job.path / "job.json").write_bytes(raw)
    return job


@pytest.fixture
def app(tmp_path):
    app = create_app(tmp_path / "jobs", testing=True, start_scheduler=False)
    yield app
    app.extensions["digits"]["scheduler"].shutdown()


def _csrf(client) -> dict:
    return {"X-CSRFToken": client.get("/api/csrf-token").get_json()["csrf_token"]}


def test_the_page_of_an_unreadable_job_says_which_file_why_and_what_to_do(app):
    job = _broken_job(app.extensions["digits"]["jobs_dir"])
    client = app.test_client()
    page = client.get(f"/jobs/{job.id}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert str(job.path / "job.json") in text and "not UTF-8" in text
    assert "delete-unreadable" in text and "Restore the file" in text
    for url in (f"/models/{job.id}", f"/datasets/{job.id}", f"/api/jobs/{job.id}/abort"):  # every door to it
        method = client.post if "/api/" in url else client.get
        answer = method(url, headers=_csrf(client))
        assert answer.status_code == 409, url
        assert "job.json" in answer.get_data(as_text=True)
    assert client.get(f"/models/{job.id}.json").get_json()["error"]["reason"].startswith("it is not UTF-8")
    assert (job.path / "job.json").read_bytes() == NON_UTF8  # nothing rewrote it


def test_an_unreadable_job_is_deleted_from_its_page_the_api_and_the_cli(app, capsys):
    root = app.extensions["digits"]["jobs_dir"]
    client = app.test_client()
    first, second, third = _broken_job(root), _broken_job(root, b""), _broken_job(root, b'{"id": 1e999}')
    answer = client.post("/jobs/delete", data={"job_id": first.id, "csrf_token": _csrf(client)["X-CSRFToken"]})
    assert answer.status_code == 302 and not first.path.exists()
    answer = client.delete(f"/api/jobs/{second.id}", headers=_csrf(client))
    assert answer.status_code == 200 and answer.get_json()["deleted"] and not second.path.exists()
    assert digits_main(["--jobs-dir", str(root), "model", "delete", third.id]) == 0
    assert not third.path.exists() and "could not be read" in capsys.readouterr().out


OWNER = textwrap.dedent("""
    import sys, time
    from digits_core.jobs import JobLock
    JobLock(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(120)
""")


def test_an_unreadable_job_a_live_process_owns_is_not_deleted(tmp_path):
    job = _broken_job(tmp_path)
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(job.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "held"
        with pytest.raises(Exception, match="running in another process"):
            JobStore(tmp_path).delete(job.id)
        assert job.path.exists()
    finally:
        owner.kill()
        owner.wait()
    JobStore(tmp_path).delete(job.id)
    assert not job.path.exists()


def test_scan_reports_every_unreadable_folder_and_list_keeps_working(tmp_path):
    good = Job.create("dataset", "fine", jobs_dir=tmp_path)
    bad = _broken_job(tmp_path, b'{"id": "x", "kind": "model", "status_history": [["Done", "noon"]]}')
    fifo = Job.create("model", "a pipe", jobs_dir=tmp_path)
    (fifo.path / "job.json").unlink()
    os.mkfifo(fifo.path / "job.json")  # opening it would block the listing for good
    jobs, unreadable = JobStore(tmp_path).scan()
    assert [j.id for j in jobs] == [good.id]
    assert sorted((u.id, u.file.name) for u in unreadable) == sorted([(bad.id, "job.json"), (fifo.id, "job.json")])
    reasons = {u.id: u.reason for u in unreadable}
    assert "not a Unix time" in reasons[bad.id] and "not a regular file" in reasons[fifo.id]
    JobStore(tmp_path).delete(fifo.id)  # without opening the pipe
    assert not fifo.path.exists()
    assert [j.id for j in JobStore(tmp_path).list()] == [good.id]
    with pytest.raises(JobRecordError) as info:
        JobStore(tmp_path).get(bad.id)
    assert info.value.file == bad.path / "job.json"


@pytest.mark.slow
def test_a_real_server_starts_and_lists_a_job_whose_json_is_not_utf8(live_server, tmp_path):
    root = tmp_path / "jobs"
    good = Job.create("dataset", "fine", jobs_dir=root, plugin_id="image-classification")
    bad = _broken_job(root)
    server = live_server(root)
    home = server.get("/")
    assert home.status == 200 and bad.id in home.text and "Unreadable" in home.text
    index = server.get_json("/index.json")
    assert [u["id"] for u in index["unreadable"]] == [bad.id]
    assert good.id in [r["id"] for r in index["datasets"]]
    listed = server.get_json("/api/jobs")
    assert {r["id"]: r["status"] for r in listed}[bad.id] == "Unreadable"
    assert server.get(f"/jobs/{bad.id}").status == 200
    assert server.process.poll() is None


# -- request bodies: nesting and name length --------------------------------------------------------


DEEP_BODY = '{"name": "m", "options": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("url", ["/api/models", "/api/datasets", "/api/jobs/delete", "/api/sweeps"])
def test_a_json_body_nested_100k_deep_is_a_400_naming_the_body(app, url):
    client = app.test_client()
    answer = client.post(url, data=DEEP_BODY, content_type="application/json", headers=_csrf(client))
    assert answer.status_code == 400
    assert "body" in answer.get_json()["error"]["fields"]
    assert not any(app.extensions["digits"]["jobs_dir"].iterdir())


def test_a_5000_character_name_is_refused_at_every_door(app, tmp_path):
    client = app.test_client()
    root = app.extensions["digits"]["jobs_dir"]
    long_name = "n" * 5000
    answer = client.post(
        "/api/models", json={"name": long_name, "dataset": "x", "network": "lenet"}, headers=_csrf(client)
    )
    assert answer.status_code == 400 and "name" in answer.get_json()["error"]["fields"]
    answer = client.post(
        "/api/datasets", json={"name": long_name, "plugin_id": "x", "form_data": {}}, headers=_csrf(client)
    )
    assert answer.status_code == 400 and "name" in answer.get_json()["error"]["fields"]
    page = client.post(
        "/models/new",
        data={"model_name": long_name, "csrf_token": _csrf(client)["X-CSRFToken"], "network": "lenet"},
    )
    assert f"longer than {MAX_JOB_NAME_LENGTH} characters" in page.get_data(as_text=True)
    with pytest.raises(FormValidationError) as info:  # the Python API, and every door's last stop
        Job.create("model", long_name, jobs_dir=root)
    assert "name" in info.value.errors
    assert not any(root.iterdir())  # nothing was created anywhere


@pytest.mark.slow  # a `digits train` process (it loads TensorFlow before it reads its flags)
def test_digits_train_refuses_a_5000_character_name_naming_the_flag(tmp_path, digits_cli):
    result = digits_cli(
        "--jobs-dir", str(tmp_path), "train", "--dataset", "x", "--network", "lenet", "--name", "n" * 5000
    )
    assert result.returncode == 2
    assert "--name: at most 200 characters" in result.stderr
    assert not list(tmp_path.iterdir())


def test_the_json_list_of_digits_model_list_has_the_unreadable_job(tmp_path, capsys):
    bad = _broken_job(tmp_path)
    assert digits_main(["--jobs-dir", str(tmp_path), "model", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["id"], row["status"], row["file"]) == (bad.id, "Unreadable", str(bad.path / "job.json"))
    assert digits_main(["--jobs-dir", str(tmp_path), "dataset", "list"]) == 0
    out = capsys.readouterr().out
    assert bad.id in out and "Unreadable" in out and "not UTF-8" in out


@pytest.mark.parametrize("raw", [b'{"stages": "\xff"}', b'{"stages": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"])
def test_the_dataset_reader_names_a_damaged_dataset_json(tmp_path, raw):
    from digits_core.datasets import open_dataset
    from digits_core.errors import DatasetError

    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset" / "dataset.json").write_bytes(raw)
    with pytest.raises(DatasetError, match="dataset.json cannot be read: it (is not UTF-8|nests)"):
        open_dataset(tmp_path)


def test_a_dataset_json_without_what_readers_need_is_named_on_every_page(app, capsys):
    root = app.extensions["digits"]["jobs_dir"]
    job = Job.create("dataset", "half a record", jobs_dir=root, plugin_id="image-classification")
    (job.path / "dataset").mkdir()
    path = job.path / "dataset" / "dataset.json"
    path.write_text(json.dumps({"id": job.id, "stages": {"train": {"count": 4}}, "label": {"kind": "class"}}))
    client = app.test_client()
    (row,) = client.get("/index.json").get_json()["datasets"]
    assert row["unreadable"] == {
        "file": str(path),
        "reason": "it lacks feature.shape, feature.dtype, label.dtype, label.shape",
    }
    for url in (f"/datasets/{job.id}", f"/datasets/{job.id}.json", f"/datasets/{job.id}/explore?stage=train"):
        answer = client.get(url)
        assert answer.status_code == 409 and "lacks feature.shape" in answer.get_data(as_text=True), url
    assert digits_main(["--jobs-dir", str(root), "dataset", "show", job.id]) == 1
    assert "lacks feature.shape" in capsys.readouterr().err
