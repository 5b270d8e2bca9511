"""Accounts and paths (issue 47): with accounts, a path in a request reaches into the jobs folder only inside a job
its user may read; another user's private job folder is outside the data roots, word for word, at every door."""

from __future__ import annotations

import os

import pytest
from PIL import Image

from digits_core.accounts import AccountStore
from digits_core.executors.worker import run_job
from digits_core.jobs import Job, JobStatus
from digits_core.paths import (
    FENCE_MARK,
    OutsideDataRootsError,
    PathOutsideRootsError,
    check_server_path,
    confined_to,
    current_roots,
    fence,
    open_in_roots,
    resolve_in_roots,
)
from digits_core.web.app import create_app

PASSWORD = "a long enough password"
OUTSIDE = "outside the server's data roots"


@pytest.fixture
def lab(tmp_path):
    """Ada's private model with an upload folder, a list file and a weights file; Bob (group cardiac) and his model.

    The server's data root is the jobs folder's parent (as when ``digits serve`` starts beside its jobs folder).
    """
    jobs_dir = tmp_path / "jobs"
    store = AccountStore(jobs_dir)
    tokens = {}
    for name, role in (("root", "admin"), ("ada", "trainer"), ("bob", "trainer")):
        store.add_user(name, role, PASSWORD)
        tokens[name] = {"Authorization": f"Bearer {store.create_token(name, 't')}"}
    store.add_to_group("cardiac", ["bob"])
    models = {}
    for name in ("ada", "bob"):
        models[name] = Job.create("model", f"{name}'s model", jobs_dir=jobs_dir, owned_by=name)
        models[name].set_status(JobStatus.DONE)
    ada = models["ada"].path
    for shade, label in ((0, "cat"), (255, "dog")):
        (ada / "inference" / "upload-1" / label).mkdir(parents=True)
        for name in ("a.png", "b.png"):
            Image.new("L", (4, 4), shade).save(ada / "inference" / "upload-1" / label / name)
    images = [
        (f"{ada}/inference/upload-1/{label}/{name}", i) for i, label in enumerate(("cat", "dog")) for name in "ab"
    ]
    (ada / "train.txt").write_text("".join(f"{path}.png {i}\n" for path, i in images), encoding="utf-8")
    (ada / "pretrained.weights.h5").write_bytes(b"ada's weights")
    (tmp_path / "data").mkdir()
    app = create_app(jobs_dir, start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path])
    return {"app": app, "client": app.test_client(), "tokens": tokens, "models": models, "tmp": tmp_path}


def _doors(ada: os.PathLike, bob_model: str) -> dict[str, tuple[str, dict]]:
    """Each door that takes a path, naming a file in ``ada`` (a job folder): (url, JSON body) by field."""
    folder, listed, weights = f"{ada}/inference/upload-1", f"{ada}/train.txt", f"{ada}/pretrained.weights.h5"
    dataset = {"plugin_id": "image-classification", "name": "d", "workers": 1}
    return {
        "folder": ("/api/datasets", {**dataset, "form_data": {"folder": folder, "width": 4, "height": 4}}),
        "train_list": ("/api/datasets", {**dataset, "form_data": {"train_list": listed, "width": 4, "height": 4}}),
        "inputs": (f"/api/models/{bob_model}/infer", {"inputs": [f"{folder}/cat/a.png"]}),
        "weights": (
            "/api/models",
            {"name": "m", "dataset": "none", "network": "mobilenet_v3_small", "options": {"weights": weights}},
        ),
    }


def _ask(client, door, headers):
    url, body = door
    return client.post(url, json=body, headers=headers)


def _jobs(lab):
    return sorted(p.name for p in (lab["tmp"] / "jobs").iterdir() if (p / "job.json").exists())


def test_another_users_private_job_folder_is_outside_the_roots_as_a_job_that_does_not_exist(lab):
    client, bob, ada = lab["client"], lab["tokens"]["bob"], lab["models"]["ada"]
    ghost = ada.id[:-6] + "ffffff"  # the same name of a job that does not exist
    before = _jobs(lab)
    for field, door in _doors(ada.path, lab["models"]["bob"].id).items():
        refused = _ask(client, door, bob)
        body = refused.get_data(as_text=True)
        assert refused.status_code == 400, (field, body)
        assert refused.get_json()["error"]["fields"][field] and OUTSIDE in str(
            refused.get_json()["error"]["fields"][field]
        )
        assert "ada" not in body.replace(str(ada.path), "")  # neither the owner, nor the job's name
        missing = _ask(client, _doors(ada.path.parent / ghost, lab["models"]["bob"].id)[field], bob)
        assert missing.status_code == 400 and missing.get_data(as_text=True).replace(ghost, ada.id) == body
    assert _jobs(lab) == before  # nothing was created


def test_sharing_the_job_with_the_users_group_lets_the_same_requests_through(lab):
    client, tokens, ada = lab["client"], lab["tokens"], lab["models"]["ada"]
    shared = client.post(f"/api/jobs/{ada.id}/visibility", json={"share": "cardiac"}, headers=tokens["ada"])
    assert shared.status_code == 200
    doors = _doors(ada.path, lab["models"]["bob"].id)
    for field in ("folder", "train_list"):
        assert _ask(client, doors[field], tokens["bob"]).status_code == 202, field
    url, body = doors["inputs"]  # a missing file there: the gate passed, and no inference worker is started
    missing = client.post(url, json={"inputs": [f"{ada.path}/inference/upload-1/cat/c.png"]}, headers=tokens["bob"])
    assert missing.status_code == 400 and "does not exist on the server" in missing.get_data(as_text=True)
    weighed = _ask(client, doors["weights"], tokens["bob"])
    assert weighed.status_code == 400 and set(weighed.get_json()["error"]["fields"]) == {
        "dataset"
    }  # the weights file passed


def test_a_users_own_job_folder_and_admins_pass_and_nobody_names_the_jobs_folder_itself(lab):
    client, tokens, ada, tmp = lab["client"], lab["tokens"], lab["models"]["ada"], lab["tmp"]
    doors = _doors(ada.path, lab["models"]["ada"].id)
    for who in ("ada", "root"):
        for field in ("folder", "train_list"):
            assert _ask(client, doors[field], tokens[who]).status_code == 202, (who, field)
    dataset = {"plugin_id": "image-classification", "name": "d"}
    for who in ("ada", "root"):  # the jobs folder itself (a listing of every job) and its accounts database
        for field, value in (("folder", tmp / "jobs"), ("train_list", tmp / "jobs" / "accounts.sqlite3")):
            form = {field: str(value), "width": 4, "height": 4}
            refused = client.post("/api/datasets", json={**dataset, "form_data": form}, headers=tokens[who])
            assert refused.status_code == 400 and OUTSIDE in str(refused.get_json()["error"]["fields"][field]), (
                who,
                field,
            )


def test_symlinks_and_dotdot_into_another_users_private_job_are_refused(lab):
    client, bob, ada, tmp = lab["client"], lab["tokens"]["bob"], lab["models"]["ada"], lab["tmp"]
    bob_model = lab["models"]["bob"]
    (tmp / "data" / "link").symlink_to(ada.path, target_is_directory=True)
    (bob_model.path / "link").symlink_to(ada.path, target_is_directory=True)  # inside a job he may read
    for via in (
        tmp / "data" / "link",
        bob_model.path / "link",
        bob_model.path / ".." / ada.id,
        tmp / "data" / ".." / "jobs" / ada.id,
    ):
        for field, door in _doors(via, bob_model.id).items():
            refused = _ask(client, door, bob)
            assert refused.status_code == 400 and OUTSIDE in str(refused.get_json()["error"]["fields"][field]), (
                via,
                field,
            )


def test_a_job_records_the_readable_job_folders_and_its_worker_reads_list_lines_only_there(lab):
    """Bob's own list file names images in Ada's folder: the request passes (the lines are read by the worker),
    the worker refuses them; once Ada shares the model with Bob's group, a new request's worker reads them."""
    client, tokens, ada, tmp = lab["client"], lab["tokens"], lab["models"]["ada"], lab["tmp"]
    listed = tmp / "data" / "bob.txt"
    listed.write_text((ada.path / "train.txt").read_text(encoding="utf-8"), encoding="utf-8")
    form = {"train_list": str(listed), "width": 4, "height": 4, "val_percent": 0}
    request = {"plugin_id": "image-classification", "name": "d", "workers": 1, "form_data": form}
    made = client.post("/api/datasets", json=request, headers=tokens["bob"])
    assert made.status_code == 202, made.get_data(as_text=True)
    job = Job.load(tmp / "jobs" / made.get_json()["id"])
    roots = job.data["data_roots"]
    assert FENCE_MARK + str((tmp / "jobs").resolve()) in roots
    assert str(lab["models"]["bob"].path.resolve()) in roots and str(ada.path.resolve()) not in roots
    run_job(job.path)
    job = job.reload()
    assert job.status is JobStatus.ERROR and OUTSIDE in str(job.data.get("error"))
    assert (
        client.post(f"/api/jobs/{ada.id}/visibility", json={"share": "cardiac"}, headers=tokens["ada"]).status_code
        == 200
    )
    made = client.post("/api/datasets", json=request, headers=tokens["bob"])
    job = Job.load(tmp / "jobs" / made.get_json()["id"])
    assert str(ada.path.resolve()) in job.data["data_roots"]
    run_job(job.path)
    assert job.reload().status is JobStatus.DONE, job.data.get("error")


def test_without_accounts_the_jobs_folder_is_a_data_root_as_before(tmp_path):
    jobs_dir = tmp_path / "jobs"
    model = Job.create("model", "m", jobs_dir=jobs_dir)
    (model.path / "cat").mkdir()
    Image.new("L", (4, 4)).save(model.path / "cat" / "a.png")
    app = create_app(jobs_dir, start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path / "data"])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    form = {"folder": str(model.path), "width": 4, "height": 4}
    made = client.post(
        "/api/datasets",
        json={"plugin_id": "image-classification", "name": "d", "form_data": form},
        headers={"X-CSRFToken": token},
    )
    assert made.status_code == 202, made.get_data(as_text=True)
    recorded = Job.load(jobs_dir / made.get_json()["id"]).data["data_roots"]
    assert not any(str(r).startswith(FENCE_MARK) for r in recorded)


def test_a_fenced_folder_admits_only_the_folders_listed_inside_it_and_the_fence_travels_with_the_roots(tmp_path):
    """The gate itself, as every process confined to a job's recorded roots applies it (a Ray task gets
    :func:`current_roots` and confines itself to them again)."""
    jobs, mine, theirs = tmp_path / "jobs", tmp_path / "jobs" / "mine", tmp_path / "jobs" / "theirs"
    for folder in (mine, theirs):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text("x")
    (mine / "to-theirs").symlink_to(theirs / "f.txt")
    with confined_to([tmp_path, *fence(jobs, [mine])]):
        assert resolve_in_roots(mine / "f.txt") == (mine / "f.txt").resolve()
        with confined_to(current_roots()):
            for refused in (theirs / "f.txt", mine / "to-theirs", mine / ".." / "theirs" / "f.txt", jobs):
                with pytest.raises(OutsideDataRootsError):
                    resolve_in_roots(refused)
            with pytest.raises(OutsideDataRootsError):
                open_in_roots(mine / "to-theirs")
            with open_in_roots(mine / "f.txt", "r") as handle:
                assert handle.read() == "x"
            with pytest.raises(PathOutsideRootsError) as exc:
                check_server_path(theirs / "f.txt", "folder")
    message = str(exc.value)  # the jobs folder once, never the jobs admitted in it
    assert f"{jobs.resolve()} (only the jobs you may read)" in message and str(mine.resolve()) not in message
    assert check_server_path(theirs / "f.txt") == theirs / "f.txt"  # no server context: any path, as before
