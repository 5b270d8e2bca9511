"""Host names, request origins and security headers (DNS rebinding, cross-site posts, framing)."""

from __future__ import annotations

import re

import pytest

from digits_core.cli import main as digits_main
from digits_core.jobs import Job, JobStatus
from digits_core.web import create_app
from digits_core.web.request_guard import allowed_hosts, split_host


@pytest.fixture
def app(tmp_path):
    return create_app(tmp_path / "jobs", start_scheduler=False, testing=True)


def csrf(client, host="localhost") -> str:
    return client.get("/api/csrf-token", headers={"Host": host}).get_json()["csrf_token"]


def test_split_and_allowed_hosts():
    assert split_host("[::1]:5000") == ("[::1]", "5000")
    assert split_host("LocalHost.:80") == ("localhost", "80")
    assert allowed_hosts("0.0.0.0", ["gpu-box.lan"]) == ["localhost", "127.0.0.1", "[::1]", "gpu-box.lan"]
    assert allowed_hosts("10.0.0.5") == ["localhost", "127.0.0.1", "[::1]", "10.0.0.5"]
    assert "[fe80::1]" in allowed_hosts("fe80::1")


@pytest.mark.parametrize("host", ["localhost:5000", "127.0.0.1:5000", "[::1]:5000", "localhost"])
def test_loopback_names_are_answered(app, host):
    assert app.test_client().get("/", headers={"Host": host}).status_code == 200


def test_rebound_host_is_refused_before_anything_else(app):
    """evil.example re-resolved to 127.0.0.1: no page, no CSRF token, no job creation."""
    client = app.test_client()
    for path in ("/", "/api/csrf-token", "/index.json", "/api/jobs"):
        resp = client.get(path, headers={"Host": "evil.example:5000"})
        assert resp.status_code == 400, path
        assert "csrf_token" not in resp.get_data(as_text=True)
    token = csrf(client)  # even with a real token obtained elsewhere
    resp = client.post(
        "/api/models",
        json={"name": "x", "custom_network": "open('/tmp/pwned','w')"},
        headers={"Host": "evil.example:5000", "X-CSRFToken": token},
    )
    assert resp.status_code == 400 and "--allowed-host" in resp.get_json()["error"]["message"]
    assert not list((app.extensions["digits"]["jobs_dir"]).iterdir())


def test_allowed_host_option(tmp_path):
    app = create_app(
        tmp_path / "jobs", start_scheduler=False, testing=True, allowed_hosts=allowed_hosts("0.0.0.0", ["gpu-box.lan"])
    )
    client = app.test_client()
    assert client.get("/", headers={"Host": "gpu-box.lan:5000"}).status_code == 200
    assert client.get("/", headers={"Host": "other.lan:5000"}).status_code == 400


def test_cross_site_posts_are_refused_by_origin_and_referer(app):
    client = app.test_client()
    job = Job.create("dataset", "d", jobs_dir=app.extensions["digits"]["jobs_dir"])
    job.set_status(JobStatus.DONE)
    token = csrf(client, "127.0.0.1:5000")
    url = f"/datasets/{job.id}/delete"
    for headers in (
        {"Origin": "http://evil.example:5000"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1:8080"},  # another local app, another port
        {"Referer": "http://evil.example/attack.html"},
    ):
        resp = client.post(url, data={"csrf_token": token}, headers={"Host": "127.0.0.1:5000", **headers})
        assert resp.status_code == 403, headers
        assert job.path.exists()
    ok = client.post(
        url,
        data={"csrf_token": token},
        headers={
            "Host": "127.0.0.1:5000",
            "Origin": "http://127.0.0.1:5000",
            "Referer": "http://127.0.0.1:5000/datasets/x",
        },
    )
    assert ok.status_code in (302, 303) and not job.path.exists()


def test_security_headers_on_every_response(app):
    client = app.test_client()
    for path in ("/", "/api/jobs", "/no-such-page", "/static/digits.css"):
        resp = client.get(path)
        assert resp.headers["X-Frame-Options"] == "DENY", path
        assert resp.headers["X-Content-Type-Options"] == "nosniff", path
        assert resp.headers["Referrer-Policy"] == "same-origin", path
        csp = resp.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self' 'nonce-" in csp
        assert "unsafe-eval" not in csp and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    assert client.get("/", headers={"Host": "evil.example"}).headers["X-Frame-Options"] == "DENY"


def test_inline_scripts_carry_the_response_nonce(app):
    """The UI's own inline scripts must run under the CSP, and only with this response's nonce."""
    Job.create("dataset", "d", jobs_dir=app.extensions["digits"]["jobs_dir"]).set_status(JobStatus.RUNNING)
    client = app.test_client()
    nonces = set()
    for path in ("/", "/datasets/new/image-classification", "/models/new"):
        resp = client.get(path)
        if resp.status_code != 200:
            continue
        html = resp.get_data(as_text=True)
        nonce = re.search(r"'nonce-([^']+)'", resp.headers["Content-Security-Policy"]).group(1)
        nonces.add(nonce)
        inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", html)
        assert inline, path
        assert all(f'nonce="{nonce}"' in attrs for attrs in inline), (path, inline)
    assert len(nonces) >= 2, "a fresh nonce per response"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_non_loopback_host_needs_a_token_or_explicit_insecure(host, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DIGITS_AUTH_TOKEN", raising=False)
    status = digits_main(["--jobs-dir", str(tmp_path), "serve", "--host", host, "--port", "1"])
    err = capsys.readouterr().err
    assert status != 0 and "--auth-token" in err and "--insecure-no-auth" in err


def test_tf_serving_predict_skips_csrf_but_still_refuses_cross_site_browsers(tmp_path):
    """TOKEN_ONLY_ENDPOINTS: a logged-in browser session needs no CSRF token for JSON predict, a cross-site page
    is still refused by the Origin/Referer check, and a non-JSON body (a form a page can post) keeps CSRF."""
    from digits_core.web.security import TOKEN_ONLY_ENDPOINTS

    assert {"tf_serving.predict", "tf_serving.predict_version"} == TOKEN_ONLY_ENDPOINTS
    token = "predict-token"
    client = create_app(tmp_path / "jobs", auth_token=token, start_scheduler=False, testing=True).test_client()
    page = client.get("/login").get_data(as_text=True)
    form_csrf = page.split('name="csrf_token" value="')[1].split('"')[0]
    assert client.post("/login", data={"csrf_token": form_csrf, "token": token, "next": "/"}).status_code == 302
    body = {"instances": [[0.0]]}
    for path in ("/v1/models/nosuch:predict", "/v1/models/nosuch/versions/1:predict"):
        same_site = client.post(path, json=body, headers={"Origin": "http://localhost"})
        assert same_site.status_code == 404, same_site.get_data(as_text=True)[:300]  # past CSRF: no such model
        for headers in (
            {"Origin": "https://evil.example"},
            {"Referer": "https://evil.example/page"},
            {"Origin": "null"},
        ):
            cross = client.post(path, json=body, headers=headers)
            assert cross.status_code == 403 and "Cross-site" in cross.get_data(as_text=True), headers
        plain = client.post(path, data='{"instances": [[0.0]]}', content_type="text/plain")
        assert plain.status_code == 400 and "CSRF" in plain.get_data(as_text=True)
