"""Accounts, continued (issue 47): groups, sharing a job with a group or everyone, data roots per user or group,
the annotator role, the signed-in header, and the owner of a sweep's trials."""

from __future__ import annotations

import json

import pytest

from digits_core.accounts import AccountStore, JobAccess, User, authorize, narrow_roots
from digits_core.accounts.store import AccountError
from digits_core.cli import main
from digits_core.jobs import Job
from digits_core.web.app import create_app

PASSWORD = "a long enough password"


def _bearer(token, **more):
    return {"Authorization": f"Bearer {token}", **more}


@pytest.fixture
def lab(tmp_path):
    """A server over a jobs folder with an admin, two trainers, an annotator and a viewer; a job of each trainer."""
    jobs_dir = tmp_path / "jobs"
    store = AccountStore(jobs_dir)
    tokens = {}
    for name, role in (("root", "admin"), ("ada", "trainer"), ("bob", "trainer"), ("ann", "annotator")):
        store.add_user(name, role, PASSWORD)
        tokens[name] = store.create_token(name, "t")
    jobs = {
        n: Job.create("dataset", f"{n}'s data", jobs_dir=jobs_dir, owned_by=n, plugin_id="image-classification").id
        for n in ("ada", "bob")
    }
    app = create_app(jobs_dir, start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path])
    return app, store, tokens, jobs, tmp_path


def test_groups_are_made_listed_and_left_and_a_users_groups_come_with_it(tmp_path):
    store = AccountStore(tmp_path)
    store.add_user("ada", "trainer", PASSWORD)
    store.add_user("ann", "annotator", PASSWORD)
    store.add_to_group("cardiac", ["ada", "ann"])
    store.add_to_group("empty")
    assert store.list_groups() == {"cardiac": ["ada", "ann"], "empty": []}
    token = store.create_token("ann", "t")
    assert store.get_user("ann").groups == ("cardiac",) == store.token_user(token).groups
    assert store.verify_password("ada", PASSWORD).groups == ("cardiac",)
    with pytest.raises(AccountError, match='no user "eve"'):
        store.add_to_group("cardiac", ["eve"])
    store.remove_from_group("cardiac", ["ann"])
    assert store.get_user("ann").groups == ()
    store.remove_from_group("cardiac")
    assert "cardiac" not in store.list_groups() and store.get_user("ada").groups == ()
    with pytest.raises(AccountError, match="digits users group list"):
        store.remove_from_group("cardiac")


def test_a_job_shared_with_a_group_is_read_by_its_members_and_managed_by_its_owner_only():
    shared = JobAccess("bob", groups=("cardiac",))
    ada, ann, vic = User("ada", "trainer", groups=("cardiac",)), User("ann", "annotator", groups=("cardiac",)), None
    assert authorize(ada, "read", shared) and authorize(ann, "read", shared)
    assert authorize(ada, "create", shared)  # a model from a dataset shared with her
    assert not authorize(ada, "manage", shared)
    assert not authorize(User("eve", "trainer", groups=("other",)), "read", shared)
    assert not authorize(vic, "read", shared)
    assert JobAccess.of({"owned_by": "bob", "shared_with": ["cardiac", 3, ""]}) == shared


def test_annotators_review_what_they_may_read_and_never_create_or_manage():
    pool = JobAccess("bob", groups=("cardiac",))
    ann = User("ann", "annotator", groups=("cardiac",))
    assert authorize(ann, "review", pool) and authorize(ann, "read", pool)
    assert not authorize(ann, "create", pool) and not authorize(ann, "create", None)
    assert not authorize(ann, "manage", JobAccess("ann"))  # not even a job of its own
    assert not authorize(User("ann", "annotator"), "review", pool)  # not in the group: not readable
    assert not authorize(User("vic", "viewer", groups=("cardiac",)), "review", pool)
    assert authorize(User("ada", "trainer", groups=("cardiac",)), "review", pool)


def test_the_owner_shares_a_job_with_a_group_through_the_api_and_makes_it_private_again(lab):
    app, store, tokens, jobs, _ = lab
    store.add_to_group("cardiac", ["ann"])
    client = app.test_client()
    url, bob_job = f"/api/jobs/{jobs['bob']}/visibility", jobs["bob"]
    ann = _bearer(tokens["ann"])
    assert client.get(f"/datasets/{bob_job}", headers=ann).status_code == 404
    assert client.post(url, json={"share": "cardiac"}, headers=_bearer(tokens["ada"])).status_code == 404
    assert client.post(url, json={"share": "nobody-made-it"}, headers=_bearer(tokens["bob"])).status_code == 400
    shared = client.post(url, json={"share": "cardiac"}, headers=_bearer(tokens["bob"]))
    assert shared.get_json() == {"id": bob_job, "visibility": "private", "groups": ["cardiac"]}
    assert client.get(f"/datasets/{bob_job}", headers=ann).status_code == 200
    assert bob_job in json.dumps(client.get("/api/jobs", headers=ann).get_json())
    assert client.get(f"/datasets/{bob_job}", headers=_bearer(tokens["ada"])).status_code == 404  # not in it
    assert client.delete(f"/api/jobs/{bob_job}", headers=ann).status_code == 403  # readable, not hers
    assert client.post(url, json={"visibility": "private"}, headers=_bearer(tokens["root"])).status_code == 200
    assert client.get(f"/datasets/{bob_job}", headers=ann).status_code == 404
    assert "shared_with" not in Job.load(app.extensions["digits"].jobs_dir / bob_job).data


def test_the_job_page_has_the_sharing_control_for_its_owner_and_admins_only(lab):
    app, store, tokens, jobs, _ = lab
    store.add_to_group("cardiac", ["ada"])
    client = app.test_client()
    page = client.get(f"/datasets/{jobs['bob']}", headers=_bearer(tokens["bob"])).get_data(as_text=True)
    assert 'id="sharing"' in page and "private: its owner and admins only" in page
    csrf = page.split('name="csrf_token" value="')[1].split('"')[0]
    form = {"csrf_token": csrf, "share": "cardiac"}
    done = client.post(f"/api/jobs/{jobs['bob']}/visibility", data=form, headers=_bearer(tokens["bob"]))
    assert done.status_code == 302 and done.headers["Location"].endswith(jobs["bob"])
    seen_by_ada = client.get(f"/datasets/{jobs['bob']}", headers=_bearer(tokens["ada"])).get_data(as_text=True)
    assert "bob&#39;s data" in seen_by_ada and 'id="sharing"' not in seen_by_ada  # readable, not hers to share
    admin_page = client.get(f"/datasets/{jobs['bob']}", headers=_bearer(tokens["root"])).get_data(as_text=True)
    assert "shared with\n      cardiac" in admin_page and 'value="cardiac"' in admin_page


def test_the_header_names_the_user_with_a_sign_out_and_admins_get_accounts_and_audit(lab):
    app, store, tokens, _, _ = lab
    client = app.test_client()
    page = client.get("/", headers=_bearer(tokens["ada"])).get_data(as_text=True)
    assert 'id="nav-user"' in page and "ada (trainer)" in page
    assert 'id="sign-out"' in page and 'action="/account/logout"' in page and 'method="post"' in page
    assert 'id="nav-accounts"' not in page and 'id="nav-audit"' not in page
    admin = client.get("/", headers=_bearer(tokens["root"])).get_data(as_text=True)
    assert 'id="nav-accounts"' in admin and 'id="nav-audit"' in admin
    store.add_to_group("cardiac", ["ann"])
    listing = client.get("/admin/accounts", headers=_bearer(tokens["root"], Accept="application/json")).get_json()
    assert listing["groups"] == {"cardiac": ["ann"]}
    assert client.get("/admin/accounts", headers=_bearer(tokens["ada"])).status_code == 403


def test_without_accounts_the_header_is_as_before(tmp_path):
    page = create_app(tmp_path, start_scheduler=False, testing=True).test_client().get("/").get_data(as_text=True)
    assert 'id="nav-user"' not in page and 'id="sign-out"' not in page and 'id="nav-accounts"' not in page


def test_given_roots_narrow_the_servers_which_stay_the_outer_bound(tmp_path):
    server = [str(tmp_path / "data"), str(tmp_path / "jobs")]
    assert narrow_roots(server, []) == server  # nothing given: the server's
    inside, above, beside = str(tmp_path / "data" / "ada"), str(tmp_path), str(tmp_path / "elsewhere")
    assert narrow_roots(server, [inside]) == [inside]
    assert narrow_roots(server, [above]) == server  # no wider than the server's
    assert narrow_roots(server, [beside], keep=[server[1]]) == [server[1]]


def _dataset_request(folder):
    return {"plugin_id": "image-classification", "form_data": {"folder": str(folder)}, "name": "d"}


def test_a_users_data_roots_gate_its_requests_at_the_dataset_door(lab):
    app, store, tokens, _, tmp_path = lab
    mine, theirs = tmp_path / "ada-data", tmp_path / "group-data"
    from PIL import Image

    for folder in (mine, theirs, tmp_path / "other"):
        (folder / "cat").mkdir(parents=True)
        Image.new("L", (4, 4)).save(folder / "cat" / "a.png")
    client = app.test_client()
    store.add_roots("user", "ada", [str(mine)])
    store.add_to_group("cardiac", ["ada"])
    store.add_roots("group", "cardiac", [str(theirs)])
    ada = _bearer(tokens["ada"])
    refused = client.post("/api/datasets", json=_dataset_request(tmp_path / "other"), headers=ada)
    assert refused.status_code == 400 and "folder" in refused.get_data(as_text=True)
    assert "outside the server's data roots" in refused.get_data(as_text=True)
    for folder in (mine, theirs):  # her own roots and her group's
        made = client.post("/api/datasets", json=_dataset_request(folder), headers=ada)
        assert made.status_code == 202, made.get_data(as_text=True)
        recorded = Job.load(app.extensions["digits"].jobs_dir / made.get_json()["id"]).data["data_roots"]
        assert str(mine) in recorded and str(tmp_path) not in recorded  # the worker reads under hers too
    bob = client.post("/api/datasets", json=_dataset_request(tmp_path / "other"), headers=_bearer(tokens["bob"]))
    assert bob.status_code == 202  # no roots given: the server's
    root = client.post("/api/datasets", json=_dataset_request(tmp_path / "other"), headers=_bearer(tokens["root"]))
    assert root.status_code == 202  # admins keep the server's


def test_the_cli_manages_groups_roots_and_sharing(tmp_path, capsys):
    jobs_dir, data = tmp_path / "jobs", tmp_path / "data"
    data.mkdir()
    store = AccountStore(jobs_dir)
    store.add_user("ada", "trainer", PASSWORD)
    job = Job.create("model", "m", jobs_dir=jobs_dir, owned_by="ada").id
    run = ["--jobs-dir", str(jobs_dir)]
    assert main([*run, "users", "group", "add", "cardiac", "ada"]) == 0
    capsys.readouterr()
    assert main([*run, "users", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["groups"] == ["cardiac"]
    assert main([*run, "users", "roots", "add", "cardiac", str(data), "--group"]) == 0
    assert main([*run, "users", "roots", "add", "ada", str(tmp_path / "missing")]) != 0
    capsys.readouterr()
    assert main([*run, "users", "roots", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"kind": "group", "name": "cardiac", "path": str(data.resolve())}]
    assert store.roots_of(store.get_user("ada")) == [str(data.resolve())]
    assert main([*run, "job", "share", job, "--group", "cardiac", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"] == ["cardiac"]
    assert main([*run, "job", "share", job, "--group", "nobody"]) != 0
    assert main([*run, "job", "share", job, "--public"]) == 0
    assert JobAccess.of(dict(Job.load(jobs_dir / job).data)) == JobAccess("ada", True, ("cardiac",))
    assert main([*run, "job", "share", job, "--private"]) == 0
    assert JobAccess.of(dict(Job.load(jobs_dir / job).data)) == JobAccess("ada")
    assert main([*run, "users", "group", "remove", "cardiac"]) == 0
    assert store.list_groups() == {} and store.list_roots() == []


def _sweep(jobs_dir, sweep_id, owner):
    from digits_core.jobs import write_json_atomic
    from digits_core.sweeps.record import sweeps_root

    folder = sweeps_root(jobs_dir) / sweep_id
    folder.mkdir(parents=True)
    settings = {"metric": "val_accuracy", "mode": "max", "max_epochs": 1, "scheduler": "grid"}
    record = {"id": sweep_id, "name": f"{owner}s-search", "group": sweep_id, "dataset": "d", "network": "lenet"}
    write_json_atomic(
        folder / "sweep.json",
        {**record, "settings": settings, "search": [], "trials": [], "status": "Done", "owned_by": owner},
    )


def test_sweeps_and_comparisons_show_a_trainer_only_what_it_may_read(lab):
    app, store, tokens, jobs, _ = lab
    jobs_dir = app.extensions["digits"].jobs_dir
    for owner in ("ada", "bob"):
        _sweep(jobs_dir, f"sweep-{owner}", owner)
    client = app.test_client()
    ada = _bearer(tokens["ada"], Accept="application/json")
    listed = json.dumps(client.get("/sweeps.json", headers=ada).get_json())
    assert "sweep-ada" in listed and "sweep-bob" not in listed and "bobs-search" not in listed
    everything = json.dumps(client.get("/sweeps.json", headers=_bearer(tokens["root"])).get_json())
    assert "sweep-bob" in everything
    private, absent = (client.get(f"/sweeps/{s}.json", headers=ada) for s in ("sweep-bob", "sweep-nobody"))
    assert private.status_code == absent.status_code == 404
    assert private.get_data(as_text=True).replace("sweep-bob", "sweep-nobody") == absent.get_data(as_text=True)
    assert client.post("/api/sweeps/sweep-bob/abort", headers=ada).status_code == 404
    assert client.post("/api/sweeps/sweep-ada/abort", headers=ada).status_code == 200  # her own sweep
    models = {n: Job.create("model", f"{n}s-net", jobs_dir=jobs_dir, owned_by=n).id for n in ("ada", "bob")}
    assert client.get(f"/compare.json?jobs={models['ada']}", headers=ada).status_code == 200
    compared = client.get(f"/compare.json?jobs={models['ada']},{models['bob']}", headers=ada)
    assert compared.status_code == 404 and "bobs-net" not in compared.get_data(as_text=True)


def test_the_leaderboard_of_a_shared_dataset_lists_only_the_evaluations_one_may_read(lab):
    from digits_core.jobs import JobStatus

    app, _, tokens, _, _ = lab
    jobs_dir = app.extensions["digits"].jobs_dir
    dataset = Job.create("dataset", "public test set", jobs_dir=jobs_dir, owned_by="root", visibility="public")
    for owner, accuracy in (("ada", 0.5), ("bob", 0.9)):
        model = Job.create("model", f"{owner}s-net", jobs_dir=jobs_dir, owned_by=owner)
        record = {"dataset_id": dataset.id, "stage": "test", "task": "classification", "epoch": 1}
        evaluation = Job.create(
            "evaluation",
            f"{owner}s-eval",
            jobs_dir=jobs_dir,
            owned_by=owner,
            model_id=model.id,
            evaluation={**record, "metrics": {"accuracy": accuracy}},
        )
        evaluation.set_status(JobStatus.DONE)
    client = app.test_client()
    board = client.get(f"/api/leaderboard?dataset={dataset.id}", headers=_bearer(tokens["ada"])).get_json()
    assert [row["model_name"] for row in board["rows"]] == ["adas-net"]
    assert "0.9" not in json.dumps(board)  # not even bob's figure as "the best"
    every = client.get(f"/api/leaderboard?dataset={dataset.id}", headers=_bearer(tokens["root"])).get_json()
    assert [row["model_name"] for row in every["rows"]] == ["bobs-net", "adas-net"]
