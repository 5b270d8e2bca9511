"""Web UI: pages, JSON twins, auth, CSRF, error pages, static files, path traversal."""

from __future__ import annotations

import json

import pytest

from digits_core import registry
from digits_core.jobs import Job, JobStatus
from digits_core.web import create_app


@pytest.fixture
def app(tmp_path):
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True, max_upload_bytes=1024 * 1024)
    yield app


@pytest.fixture
def client(app):
    return app.test_client()


def csrf_token(client) -> str:
    return client.get("/api/csrf-token").get_json()["csrf_token"]


def make_job(app, kind="dataset", name="demo", status=JobStatus.DONE, **fields):
    job = Job.create(kind, name, jobs_dir=app.extensions["digits"]["jobs_dir"], **fields)
    if status is not JobStatus.INITIALIZED:
        job.set_status(status)
    return job


def test_home_lists_jobs_as_html_and_json(app, client):
    ds = make_job(app, "dataset", "digits <b>set</b>", plugin_id="image-classification")
    model = make_job(app, "model", "lenet-1", status=JobStatus.ERROR, dataset_id=ds.id)
    page = client.get("/")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "digits &lt;b&gt;set&lt;/b&gt;" in html and "<b>set</b>" not in html
    assert f"/datasets/{ds.id}" in html and f"/models/{model.id}" in html
    assert "sortable" in html
    data = client.get("/index.json").get_json()
    assert [r["id"] for r in data["datasets"]] == [ds.id]
    assert data["models"][0]["status"] == "Error"
    assert data["datasets"][0]["progress"] == 1.0 and data["datasets"][0]["size"] > 0
    assert client.get("/api/jobs?kind=model").get_json()[0]["id"] == model.id


def test_plugins_page_matches_registry(client):
    records = [r.to_dict() for r in registry.records(include_disabled=True)]
    assert client.get("/api/plugins").get_json() == json.loads(json.dumps(records, default=str))
    html = client.get("/plugins").get_data(as_text=True)
    for record in records:
        assert (record["id"] or record["name"]) in html


def test_error_pages_have_no_traceback(app, client):
    @app.get("/boom")
    def boom():
        raise RuntimeError("secret internal detail")

    resp = client.get("/boom")
    assert resp.status_code == 500
    text = resp.get_data(as_text=True)
    assert "Traceback" not in text and "secret internal detail" not in text
    assert "Internal error" in text
    resp = client.get("/datasets/20990101-000000-dead")
    assert resp.status_code == 404 and "does not exist" in resp.get_data(as_text=True)
    body = client.get("/datasets/20990101-000000-dead.json").get_json()
    assert body["error"]["code"] == 404
    assert client.get("/api/nothing-here").get_json()["error"]["code"] == 404


def test_kind_mismatch_is_404(app, client):
    ds = make_job(app, "dataset", "d")
    assert client.get(f"/models/{ds.id}").status_code == 404


def test_csrf_required_for_posts(app, client):
    ds = make_job(app, "dataset", "d")
    resp = client.post(f"/datasets/{ds.id}/delete")
    assert resp.status_code == 400 and "CSRF" in resp.get_data(as_text=True)
    assert ds.path.exists()
    resp = client.post("/api/datasets", json={"plugin_id": "x"})
    assert resp.status_code == 400 and "CSRF" in resp.get_json()["error"]["message"]
    token = csrf_token(client)
    resp = client.post(f"/datasets/{ds.id}/delete", data={"csrf_token": token})
    assert resp.status_code == 302 and not ds.path.exists()


def test_api_with_csrf_header(app, client):
    token = csrf_token(client)
    resp = client.post(
        "/api/datasets", json={"plugin_id": "no-such-plugin", "name": "x"}, headers={"X-CSRFToken": token}
    )
    assert resp.status_code == 404
    assert "no-such-plugin" in resp.get_json()["error"]["message"]


def test_auth_token(tmp_path):
    app = create_app(tmp_path / "jobs", auth_token="s3cret", start_scheduler=False, testing=True)
    client = app.test_client()
    resp = client.get("/")
    assert resp.status_code == 302 and "/login" in resp.headers["Location"]
    assert client.get("/api/jobs").status_code == 401
    assert client.get("/index.json").status_code == 401
    assert client.get("/static/digits.css").status_code == 200
    assert client.get("/api/jobs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/jobs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/api/jobs", headers={"X-Auth-Token": "s3cret"}).status_code == 200
    # Header-authenticated API calls need no CSRF token (a browser cannot forge the header).
    job = Job.create("dataset", "d", jobs_dir=tmp_path / "jobs")
    job.set_status(JobStatus.DONE)
    resp = client.delete(f"/api/jobs/{job.id}", headers={"Authorization": "Bearer s3cret"})
    assert resp.status_code == 200 and not job.path.exists()
    # Browser login: wrong token, then the right one; open redirects are refused.
    login = client.get("/login")
    assert login.status_code == 200
    token = csrf_token_from(login.get_data(as_text=True))
    bad = client.post("/login", data={"csrf_token": token, "token": "nope"})
    assert bad.status_code == 401 and "Wrong token" in bad.get_data(as_text=True)
    good = client.post("/login", data={"csrf_token": token, "token": "s3cret", "next": "//evil.example/"})
    assert good.status_code == 302 and good.headers["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.get("/logout").status_code == 200 and client.get("/").status_code == 200  # GET: only the button
    client.post("/logout", data={"csrf_token": csrf_token_from(client.get("/logout").get_data(as_text=True))})
    assert client.get("/").status_code == 302


def csrf_token_from(html: str) -> str:
    marker = 'name="csrf_token" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


def test_upload_size_limit(app, client):
    token = csrf_token(client)
    resp = client.post(
        "/api/datasets",
        data=b"x" * (2 * 1024 * 1024),
        headers={"X-CSRFToken": token},
        content_type="application/octet-stream",
    )
    assert resp.status_code == 413


@pytest.fixture
def static_view(tmp_path):
    from digits_core import View

    static = tmp_path / "viewpkg" / "static"
    static.mkdir(parents=True)
    (static / "view.css").write_text("body { color: red }")
    (static / "sub").mkdir()
    (static / "sub" / "x.js").write_text("1;")
    (tmp_path / "viewpkg" / "secret.txt").write_text("SECRET")
    (static / "link.txt").symlink_to(tmp_path / "viewpkg" / "secret.txt")

    class StaticView(View):
        plugin_id = "web-test-static"
        title = "Static test view"

        @classmethod
        def get_static_folder(cls):
            return static

        def process_data(self, input_id, input_data, output_data, ground_truth=None):
            return {}

        def get_view_template(self, data):
            return "", {}

    registry.register(StaticView)
    yield StaticView
    registry.unregister(StaticView)


def test_view_static_files_and_traversal(client, static_view):
    base = "/plugins/view/web-test-static/static/"
    resp = client.get(base + "view.css")
    assert resp.status_code == 200 and b"color: red" in resp.data
    assert client.get(base + "sub/x.js").status_code == 200
    for attack in (
        "../secret.txt",
        "%2e%2e/secret.txt",
        "%2E%2E%2Fsecret.txt",
        "sub/../../secret.txt",
        "..%2fsecret.txt",
        "%252e%252e/secret.txt",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "link.txt",
        "sub/..%5c..%5csecret.txt",
        "..\\secret.txt",
    ):
        resp = client.get(base + attack, follow_redirects=True)  # "//etc" is merged to "/etc" first (308)
        assert resp.status_code == 404, attack
        assert b"SECRET" not in resp.data
    assert client.get("/plugins/view/no-such-view/static/view.css").status_code == 404
    assert client.get("/static/../web/app.py").status_code == 404
    assert client.get("/static/%2e%2e/app.py").status_code == 404


def test_chartjs_is_vendored(client):
    resp = client.get("/static/vendor/chartjs/chart.umd.min.js")
    assert resp.status_code == 200 and b"Chart.js v4" in resp.data[:200]
    assert client.get("/static/vendor/chartjs/LICENSE.md").status_code == 200
    html = client.get("/models/new").get_data(as_text=True)
    assert "chart.umd.min.js" in html and "cdn" not in html.lower()


def test_lr_preview(client):
    data = client.get(
        "/api/lr-preview?learning_rate=0.1&lr_policy=step&lr_step_size=50&lr_gamma=0.5&points=5"
    ).get_json()
    lrs = [round(p["lr"], 6) for p in data["points"]]
    assert lrs == [0.1, 0.1, 0.05, 0.05, 0.025]
    bad = client.get("/api/lr-preview?learning_rate=abc")
    assert bad.status_code == 400 and "learning_rate" in bad.get_json()["error"]["fields"]
    bad = client.get("/api/lr-preview?lr_policy=nonsense")
    assert bad.status_code == 400


def test_dataset_abort_route_and_explore_before_done(app, client):
    scheduler = app.extensions["digits"]["scheduler"]
    job = make_job(app, "dataset", "queued", status=JobStatus.INITIALIZED, plugin_id="x")
    scheduler.submit(job)
    page = client.get(f"/datasets/{job.id}").get_data(as_text=True)
    assert "Waiting" in page and "Abort" in page
    resp = client.get(f"/datasets/{job.id}/explore")
    assert resp.status_code == 400 and "once Done" in resp.get_data(as_text=True)
    resp = client.post(f"/datasets/{job.id}/abort", data={"csrf_token": csrf_token(client)})
    assert resp.status_code == 302 and job.reload().status is JobStatus.ABORTED


def test_data_plugin_static_is_confined(client):
    from digits_core import registry

    for plugin_id in registry.data_ingestions():
        for attack in ("..%2f__init__.py", "../__init__.py", "%2e%2e/__init__.py"):
            resp = client.get(f"/plugins/data/{plugin_id}/static/{attack}", follow_redirects=True)
            assert resp.status_code == 404, (plugin_id, attack)
    assert client.get("/plugins/data/no-such-plugin/static/x.css").status_code == 404


def test_new_dataset_unknown_plugin_and_menu(client):
    from digits_core import registry

    resp = client.get("/datasets/new/no-such-plugin")
    assert resp.status_code == 404 and "no-such-plugin" in resp.get_data(as_text=True)
    html = client.get("/").get_data(as_text=True)
    for plugin_id, cls in registry.data_ingestions().items():
        assert f"/datasets/new/{plugin_id}" in html
        assert cls.get_category() in html


def test_serve_command_warns_without_auth(tmp_path, monkeypatch, capsys):
    from digits_core.cli import main, serve_cmd

    calls = []

    class Server:  # the production server, bound and run: recorded instead
        def __init__(self, app, args):
            calls.append({"host": args.host, "port": args.port, "threads": args.threads})

        def run(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(serve_cmd, "production_server", Server)
    assert main(["--jobs-dir", str(tmp_path / "jobs"), "serve", "--host", "0.0.0.0", "--port", "5999"]) == 1
    assert "--insecure-no-auth" in capsys.readouterr().err and not calls  # refused: no token, not explicit
    assert (
        main(
            ["--jobs-dir", str(tmp_path / "jobs"), "serve", "--host", "0.0.0.0", "--port", "5999", "--insecure-no-auth"]
        )
        == 0
    )
    out = capsys.readouterr()
    assert "without authentication" in out.err
    assert "http://localhost:5999/" in out.out
    assert calls[0] == {"host": "0.0.0.0", "port": 5999, "threads": serve_cmd.DEFAULT_THREADS}
    assert main(["--jobs-dir", str(tmp_path / "jobs"), "serve", "--host", "0.0.0.0", "--auth-token", "t"]) == 0
    assert "without authentication" not in capsys.readouterr().err
    assert main(["--jobs-dir", str(tmp_path / "jobs"), "serve", "--port", "70000"]) == 1


def test_register_routes_hook(tmp_path):
    from digits_core import hookimpl

    class Routes:
        @hookimpl
        def digits_register_routes(self, app):
            app.add_url_rule("/hello-plugin", "hello_plugin", lambda: "hello from a plugin")

    class Broken:
        @hookimpl
        def digits_register_routes(self, app):
            raise RuntimeError("plugin bug")

    routes, broken = Routes(), Broken()
    registry.register(routes)
    registry.register(broken)
    try:
        app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
        client = app.test_client()
        assert client.get("/hello-plugin").get_data(as_text=True) == "hello from a plugin"
        assert client.get("/").status_code == 200
    finally:
        registry.unregister(routes)
        registry.unregister(broken)


def test_user_text_is_escaped_in_plugin_templates(client):
    from digits_core import registry

    attack = '"><script>alert(1)</script>'
    store = client.application.extensions["digits"]["store"]
    for plugin_id in registry.data_ingestions():
        form = registry.get_data_ingestion(plugin_id).get_dataset_form()(meta={"csrf": False})
        text_fields = [f.name for f in form if f.type == "StringField"]
        data = {"csrf_token": csrf_token(client), "job_name": attack, **{name: attack for name in text_fields}}
        resp = client.post(f"/datasets/new/{plugin_id}", data=data)
        html = resp.get_data(as_text=True)
        # Not a valid job: the form comes back (200) with what was typed, escaped, and no job is made.
        assert resp.status_code == 200, plugin_id
        assert "<script>alert(1)</script>" not in html and '"><script>' not in html, plugin_id
        assert "&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html, plugin_id  # echoed, as text
        assert store.list() == [], plugin_id
