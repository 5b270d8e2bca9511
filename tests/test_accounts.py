"""User accounts (issue 47): the SQLite store, argon2id hashes, API tokens, the CLI, sign-in, throttling, audit."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from digits_core.accounts import AccountStore, JobAccess, User, authorize
from digits_core.accounts.audit import AuditLog
from digits_core.accounts.store import AccountError
from digits_core.jobs import Job
from digits_core.submit.records import create_job_record
from digits_core.web.app import create_app
from digits_core.web.context import web_context

PASSWORD = "correct horse battery staple"


def test_a_fresh_jobs_folder_has_no_accounts_and_no_default_user(tmp_path):
    store = AccountStore(tmp_path)
    assert not store.enabled() and store.list_users() == []
    assert not (tmp_path / "accounts.sqlite3").exists()  # asking creates nothing
    for name in ("admin", "root", "digits"):
        assert store.verify_password(name, "") is None and store.verify_password(name, name) is None


def test_passwords_are_argon2id_at_owasp_parameters_or_above(tmp_path):
    store = AccountStore(tmp_path)
    store.add_user("ada", "trainer", PASSWORD)
    import sqlite3

    (stored,) = sqlite3.connect(tmp_path / "accounts.sqlite3").execute("SELECT password_hash FROM users").fetchone()
    assert stored.startswith("$argon2id$") and PASSWORD not in stored
    params = dict(p.split("=") for p in stored.split("$")[3].split(","))
    assert int(params["m"]) >= 19 * 1024 and int(params["t"]) >= 2 and int(params["p"]) >= 1
    assert store.verify_password("ada", PASSWORD) == User("ada", "trainer", False, store.get_user("ada").created)
    assert store.verify_password("ada", PASSWORD + "x") is None
    store.set_disabled("ada")
    assert store.verify_password("ada", PASSWORD) is None
    with pytest.raises(AccountError, match="too short"):
        store.add_user("bob", "viewer", "short")
    with pytest.raises(AccountError, match="role"):
        store.add_user("bob", "owner", PASSWORD)
    with pytest.raises(AccountError, match="exists"):
        store.add_user("ada", "viewer", PASSWORD)


def test_api_tokens_are_shown_once_stored_hashed_and_refused_once_revoked_expired_or_disabled(tmp_path):
    store = AccountStore(tmp_path)
    store.add_user("ada", "trainer", PASSWORD)
    token = store.create_token("ada", "laptop", days=30)
    assert store.token_user(token).name == "ada"
    assert token.encode() not in (tmp_path / "accounts.sqlite3").read_bytes()
    assert store.token_user(token + "x") is None and store.token_user("") is None
    store.revoke_token("ada", "laptop")
    assert store.token_user(token) is None
    expiring = store.create_token("ada", "short", days=1e-9)
    assert store.token_user(expiring) is None
    other = store.create_token("ada", "other")
    store.set_disabled("ada")
    assert store.token_user(other) is None
    assert [t.name for t in store.list_tokens("ada")] == ["laptop", "other", "short"]


@pytest.mark.parametrize(
    ("role", "action", "owner", "expected"),
    [
        ("viewer", "read", "ada", False),
        ("viewer", "read", "vic", True),
        ("viewer", "read", None, True),
        ("viewer", "create", None, False),
        ("viewer", "manage", "vic", False),
        ("annotator", "create", None, False),
        ("trainer", "read", "bob", False),
        ("trainer", "read", "ada", True),
        ("trainer", "create", None, True),
        ("trainer", "create", "bob", False),
        ("trainer", "manage", "ada", True),
        ("trainer", "manage", "bob", False),
        ("trainer", "manage", None, False),
        ("trainer", "admin", None, False),
        ("admin", "manage", "bob", True),
        ("admin", "admin", None, True),
    ],
)
def test_authorize(role, action, owner, expected):
    name = {"viewer": "vic", "annotator": "ann", "trainer": "ada", "admin": "root"}[role]
    obj = None if owner is None and action in ("create", "admin") else JobAccess(owner)
    assert authorize(User(name, role), action, obj) is expected


def test_public_jobs_are_readable_by_everyone_but_managed_by_their_owner_only():
    public = JobAccess("bob", public=True)
    assert authorize(User("vic", "viewer"), "read", public)
    assert not authorize(User("ada", "trainer"), "manage", public)
    assert not authorize(User("ada", "trainer", disabled=True), "read", None)
    assert not authorize(None, "read", None)


def test_the_cli_reads_passwords_from_stdin_never_from_argv(tmp_path, monkeypatch, capsys):
    from digits_core.cli import main

    monkeypatch.setattr(sys, "stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["--jobs-dir", str(tmp_path), "users", "add", "root", "--role", "admin", "--password-stdin"]) == 0
    assert AccountStore(tmp_path).verify_password("root", PASSWORD).role == "admin"
    with pytest.raises(SystemExit):
        main(["--jobs-dir", str(tmp_path), "users", "add", "eve", "--role", "viewer", "--password", PASSWORD])
    assert main(["--jobs-dir", str(tmp_path), "users", "token", "root", "ci"]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert AccountStore(tmp_path).token_user(token).name == "root"
    assert main(["--jobs-dir", str(tmp_path), "users", "revoke", "root", "ci"]) == 0
    assert AccountStore(tmp_path).token_user(token) is None
    assert main(["--jobs-dir", str(tmp_path), "users", "disable", "root"]) == 0
    capsys.readouterr()
    assert main(["--jobs-dir", str(tmp_path), "users", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["disabled"] is True
    assert PASSWORD not in (tmp_path / "audit.jsonl").read_text()


def test_the_audit_log_rotates_by_size(tmp_path):
    log = AuditLog(tmp_path, max_bytes=400)
    for i in range(12):
        log.record("ada", "manage", f"job-{i}", allowed=i % 2 == 0, address="127.0.0.1")
    assert (tmp_path / "audit.jsonl.1").exists()
    assert (tmp_path / "audit.jsonl").stat().st_size <= 400
    assert log.tail(1)[0]["object"] == "job-11" and log.tail(1)[0]["allowed"] is False


@pytest.fixture
def lab(tmp_path):
    """An app over a jobs folder with four users and a job of each trainer."""
    store = AccountStore(tmp_path)
    tokens = {}
    for name, role in (("root", "admin"), ("ada", "trainer"), ("bob", "trainer"), ("vic", "viewer")):
        store.add_user(name, role, PASSWORD + name)
        tokens[name] = store.create_token(name, "t")
    jobs = {
        n: Job.create("dataset", f"{n}'s data", jobs_dir=tmp_path, owned_by=n, plugin_id="image-classification").id
        for n in ("ada", "bob")
    }
    app = create_app(tmp_path, start_scheduler=False, testing=True, secret_key="k")
    yield app, tokens, jobs, tmp_path
    app.extensions["digits"].inference_worker.close() if hasattr(
        app.extensions["digits"].inference_worker, "close"
    ) else None


def _bearer(token):
    return {"Authorization": f"Bearer {token}"}


def test_without_users_the_server_behaves_as_before(tmp_path):
    client = create_app(tmp_path, start_scheduler=False, testing=True).test_client()
    assert client.get("/").status_code == 200
    assert client.get("/api/jobs").status_code == 200


def test_with_users_everything_needs_a_sign_in(lab):
    app, tokens, jobs, _ = lab
    client = app.test_client()
    assert client.get("/api/jobs").status_code == 401
    page = client.get("/")
    assert page.status_code == 302 and "/account/login" in page.headers["Location"]
    assert client.get("/api/jobs", headers=_bearer("dgt_not-a-token")).status_code == 401
    assert client.get("/api/jobs", headers=_bearer(tokens["vic"])).status_code == 200


def test_a_trainer_cannot_open_or_delete_another_trainers_job_and_a_viewer_cannot_create(lab):
    app, tokens, jobs, _ = lab
    client = app.test_client()
    ada, bob, vic, root = (_bearer(tokens[n]) for n in ("ada", "bob", "vic", "root"))
    assert client.get(f"/datasets/{jobs['ada']}", headers=ada).status_code == 200
    assert client.get(f"/datasets/{jobs['bob']}", headers=ada).status_code == 404
    assert client.delete(f"/api/jobs/{jobs['bob']}", headers=ada).status_code == 404
    assert client.get(f"/datasets/{jobs['bob']}", headers=bob).status_code == 200
    assert client.post("/api/datasets", json={}, headers=vic).status_code == 403
    assert client.get(f"/datasets/{jobs['ada']}", headers=vic).status_code == 404
    assert client.delete(f"/api/jobs/{jobs['bob']}", headers=root).status_code in (200, 202, 204)


def test_jobs_created_in_a_request_belong_to_its_user(lab):
    app, tokens, jobs, tmp_path = lab
    from digits_core.web import accounts_views

    with app.test_request_context("/api/datasets", method="POST", headers=_bearer(tokens["ada"]), json={}):
        assert accounts_views._gate() is None
        job = create_job_record("dataset", "made by ada", jobs_dir=tmp_path)
    assert Job.load(job.path).data.get("owned_by") == "ada"
    assert Job.load(create_job_record("dataset", "outside", jobs_dir=tmp_path).path).data.get("owned_by") is None


def _login(client, name, password, addr="10.0.0.1"):
    page = client.get("/account/login", environ_base={"REMOTE_ADDR": addr})
    csrf = page.get_data(as_text=True).split('name="csrf_token" value="')[1].split('"')[0]
    return client.post(
        "/account/login",
        data={"name": name, "password": password, "csrf_token": csrf, "next": "/"},
        environ_base={"REMOTE_ADDR": addr},
    )


def test_sign_in_sign_out_and_no_password_in_pages_logs_or_the_audit_log(lab, caplog):
    app, tokens, jobs, tmp_path = lab
    client = app.test_client()
    caplog.set_level(logging.DEBUG)
    wrong = _login(client, "ada", "wrong password 1")
    assert wrong.status_code == 401 and "wrong password 1" not in wrong.get_data(as_text=True)
    right = _login(client, "ada", PASSWORD + "ada")
    assert right.status_code == 302
    assert client.get(f"/datasets/{jobs['ada']}").status_code == 200
    assert client.get(f"/datasets/{jobs['bob']}").status_code == 404
    page = client.get("/account/logout")
    csrf = page.get_data(as_text=True).split('name="csrf_token" value="')[1].split('"')[0]
    assert client.post("/account/logout", data={"csrf_token": csrf}).status_code == 302
    assert client.get(f"/datasets/{jobs['ada']}").status_code == 302  # back to the sign-in page
    audit = (tmp_path / "audit.jsonl").read_text()
    for secret in ("wrong password 1", PASSWORD):
        assert secret not in audit and secret not in caplog.text
    entries = [json.loads(line) for line in audit.splitlines()]
    assert {"user": "ada", "action": "sign-in", "allowed": False} in [
        {k: e[k] for k in ("user", "action", "allowed")} for e in entries
    ]
    assert any(e["object"] == jobs["bob"] and not e["allowed"] and e["address"] for e in entries)


def test_guessing_one_accounts_password_is_throttled_whatever_the_client_address(lab):
    app, *_ = lab
    with app.app_context():
        web_context().login.clock = lambda: 1000.0  # frozen: no wall clock in the test
    client = app.test_client()
    for i in range(5):
        assert _login(client, "bob", f"guess {i}", addr=f"10.{i}.0.1").status_code == 401
    refused = _login(client, "bob", PASSWORD + "bob", addr="192.168.7.7")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert _login(client, "ada", PASSWORD + "ada", addr="192.168.7.8").status_code == 302  # other accounts unaffected


def test_lists_show_a_trainer_only_the_jobs_it_may_read(lab):
    app, tokens, jobs, _ = lab
    client = app.test_client()
    listed = json.dumps(client.get("/api/jobs", headers=_bearer(tokens["ada"])).get_json())
    assert jobs["ada"] in listed and jobs["bob"] not in listed
    page = client.get("/", headers=_bearer(tokens["ada"])).get_data(as_text=True)
    assert jobs["ada"] in page and jobs["bob"] not in page and "bob&#39;s data" not in page
    everything = json.dumps(client.get("/api/jobs", headers=_bearer(tokens["root"])).get_json())
    assert jobs["ada"] in everything and jobs["bob"] in everything


def test_tokens_from_the_web_are_shown_once_and_revoked_at_once(lab):
    app, tokens, _, tmp_path = lab
    client = app.test_client()
    _login(client, "ada", PASSWORD + "ada")
    page = client.get("/account/tokens").get_data(as_text=True)
    csrf = page.split('name="csrf_token" value="')[1].split('"')[0]
    made = client.post("/account/tokens", data={"csrf_token": csrf, "token_name": "script", "days": "7"})
    token = made.get_data(as_text=True).split('<code id="new-token">')[1].split("<")[0]
    assert client.get("/api/jobs", headers=_bearer(token)).status_code == 200
    assert token not in client.get("/account/tokens").get_data(as_text=True)  # shown once
    client.post("/account/tokens", data={"csrf_token": csrf, "revoke": "script"})
    assert client.get("/api/jobs", headers=_bearer(token)).status_code == 401


def test_only_admins_read_the_audit_log(lab):
    app, tokens, jobs, _ = lab
    client = app.test_client()
    assert client.get(f"/datasets/{jobs['bob']}", headers=_bearer(tokens["ada"])).status_code == 404
    assert client.get("/admin/audit", headers=_bearer(tokens["ada"])).status_code == 403
    entries = client.get("/admin/audit", headers={**_bearer(tokens["root"]), "Accept": "application/json"}).get_json()
    assert any(e["user"] == "ada" and e["object"] == jobs["bob"] and not e["allowed"] for e in entries["entries"])


def test_the_servers_auth_token_still_works_beside_accounts_and_wrong_ones_are_counted(tmp_path):
    AccountStore(tmp_path).add_user("root", "admin", PASSWORD)
    app = create_app(tmp_path, auth_token="s3cret-token", start_scheduler=False, testing=True)
    client = app.test_client()
    assert client.get("/api/jobs", headers=_bearer("s3cret-token")).status_code == 200
    with app.app_context():
        web_context().login.clock = lambda: 1000.0  # frozen: no wall clock in the test
    answers = [client.get("/api/jobs", headers=_bearer(f"wrong-{i}")).status_code for i in range(7)]
    assert answers[:5] == [401] * 5 and 429 in answers[5:]


def test_guessed_user_tokens_are_throttled(lab):
    app, tokens, _, _ = lab
    client = app.test_client()
    with app.app_context():
        web_context().login.clock = lambda: 1000.0  # frozen: no wall clock in the test
    answers = [client.get("/api/jobs", headers=_bearer(f"dgt_guess-{i}")).status_code for i in range(7)]
    assert answers[:5] == [401] * 5 and answers[6] == 429


def test_a_file_from_before_single_sign_on_gains_its_column_and_keeps_its_users(tmp_path):
    import sqlite3

    db = sqlite3.connect(tmp_path / "accounts.sqlite3")
    db.executescript(
        "CREATE TABLE users (name TEXT PRIMARY KEY, role TEXT NOT NULL, password_hash TEXT NOT NULL,"
        " disabled INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL);"
        "INSERT INTO users VALUES ('old', 'admin', '!', 0, 1.0);"
    )
    db.commit()
    db.close()
    store = AccountStore(tmp_path)
    assert store.sign_in_external("old", "viewer") is None  # a local user: never taken over
    assert store.sign_in_external("new", "viewer").role == "viewer"


def test_another_users_private_job_is_answered_word_for_word_as_a_missing_one(lab):
    app, tokens, jobs, _ = lab
    client = app.test_client()
    missing = jobs["bob"][:-4] + "zzzz"
    for path in ("/datasets/{}", "/models/{}/metrics.json", "/v1/models/{}"):
        private = client.get(path.format(jobs["bob"]), headers={**_bearer(tokens["ada"]), "Accept": "application/json"})
        absent = client.get(path.format(missing), headers={**_bearer(tokens["ada"]), "Accept": "application/json"})
        assert private.status_code == absent.status_code == 404
        assert private.get_data(as_text=True).replace(jobs["bob"], missing) == absent.get_data(as_text=True), path


def test_an_owner_makes_its_job_public_and_private_again(lab):
    app, tokens, jobs, _ = lab
    client = app.test_client()
    ada, bob = _bearer(tokens["ada"]), _bearer(tokens["bob"])
    url = f"/api/jobs/{jobs['bob']}/visibility"
    assert client.post(url, json={"visibility": "public"}, headers=ada).status_code == 404  # not ada's
    assert client.post(url, json={"visibility": "public"}, headers=bob).status_code == 200
    assert client.get(f"/datasets/{jobs['bob']}", headers=ada).status_code == 200
    assert client.delete(f"/api/jobs/{jobs['bob']}", headers=ada).status_code == 403  # readable, not hers
    assert client.post(url, json={"visibility": "private"}, headers=bob).status_code == 200
    assert client.get(f"/datasets/{jobs['bob']}", headers=ada).status_code == 404
    assert client.post(url, json={"visibility": "everyone"}, headers=bob).status_code == 400
