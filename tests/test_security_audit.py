"""A reproducible security audit against a real `digits serve`: every probe is refused.

One server runs as an operator would run it (``--auth-token``, a data root,
``$DIGITS_DICOMWEB_PASSWORD`` set, one port of a local listener allowed with
``--allow-url``), and the probes of the last two audits are thrown at it:
Host, Origin, CSRF, token, path fields, paths inside files, SSRF,
credential forwarding, sizes, login, a second server and resume. Every
probe is counted; the counts are printed (``-s``) and quoted in the
docs/security.md (Audit). Nothing but 127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from digits_core.jobs import Job, JobStatus

pytestmark = pytest.mark.slow

TOKEN = "audit-token-0123456789"
OPERATOR_PASSWORD = "operator-pacs-password"
SECRET = "root:x:0:0:AUDIT-SECRET"

FOREIGN_HOSTS = [
    "evil.example",
    "127.0.0.1.evil.example",
    "localhost.evil.example",
    "127.0.0.2",
    "[::2]",
    "0.0.0.0",
    "10.0.0.1",
    "example.com",
    "localhost:80@evil.example",
    "xn--localhost-xyz",
    "127.1",
    "2130706433",
    "0x7f000001",
    "LOCALHOST.EVIL",
    "attacker.localhost.example",
    "192.168.1.10",
    "[::ffff:127.0.0.2]",
    "evil.example:80",
    "loca1host",
    "%6c%6f%63%61%6c%68%6f%73%74",
]
CROSS_ORIGINS = [
    "https://evil.example",
    "http://evil.example",
    "null",
    "http://127.0.0.1:1",
    "http://localhost:9",
    "http://127.0.0.1.evil.example",
    "https://localhost",
    "http://[::1]:1",
    "http://10.0.0.1",
    "file://",
    "chrome-extension://abc",
]
TOKENLESS_ROUTES = [
    "/",
    "/index.json",
    "/api/plugins",
    "/api/scheduler",
    "/api/csrf-token",
    "/datasets/new/image-folder",
    "/models/new",
    "/plugins",
    "/api/jobs/none",
    "/datasets/none",
    "/models/none",
]
OPEN_REDIRECTS = [
    "/%09/evil.example",
    "//evil.example",
    "\\\\evil.example",
    "/\\evil.example",
    "https://evil.example",
    "https:evil.example",
    "javascript:alert(1)",
    "/%2F/evil.example",
    "//%09evil.example",
    "/\t/evil.example",
]


class Listener:
    """An HTTP listener on 127.0.0.1 recording every request (path and Authorization header)."""

    def __init__(self):
        self.requests: list[tuple[str, str | None]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                owner.requests.append((self.path, self.headers.get("Authorization")))
                body = b"[]"
                self.send_response(200)
                self.send_header("Content-Type", "application/dicom+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def world(tmp_path, live_server):
    root = tmp_path / "data"
    images = root / "images"
    images.mkdir(parents=True)
    for i in range(4):
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8)).save(images / f"{i}.png")
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "shadow").write_text(SECRET + "\n")
    Image.fromarray(np.full((8, 8), 255, np.uint8)).save(outside / "secret.png")
    (images / "link.png").symlink_to(outside / "secret.png")
    allowed, forbidden = Listener(), Listener()
    jobs = tmp_path / "jobs"
    done = Job.create("model", "finished", jobs_dir=jobs)  # a Done model with a snapshot, for the resume probe
    (done.path / "snapshots").mkdir()
    (done.path / "snapshots" / "epoch-001.keras").write_bytes(b"x")
    done.set_status(JobStatus.DONE)
    server = live_server(
        jobs,
        auth_token=TOKEN,
        cwd=tmp_path,
        extra_args=["--data-root", str(root), "--allow-url", f"127.0.0.1:{allowed.port}"],
        env={"DIGITS_DICOMWEB_PASSWORD": OPERATOR_PASSWORD},
    )
    yield {
        "server": server,
        "root": root,
        "images": images,
        "outside": outside,
        "allowed": allowed,
        "forbidden": forbidden,
        "jobs": jobs,
        "done": done,
        "tmp": tmp_path,
    }
    allowed.close()
    forbidden.close()


def raw(server, path, *, method="GET", headers=None, data=None):
    """A request with exactly these headers (no token unless given)."""
    req = urllib.request.Request(server.url + path, data=data, method=method, headers=dict(headers or {}))
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def post_dataset(server, plugin_id, form_data, name="audit"):
    return server.request(
        "/api/datasets", method="POST", data={"plugin_id": plugin_id, "name": name, "form_data": form_data}
    )


def wait_finished(server, job_id, timeout=180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.load(server.jobs_dir / job_id)
        if job.status.is_finished:
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish\n{server.describe()}")


def test_every_probe_is_refused(world):
    server, counts = world["server"], Counter()
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    # Host (DNS rebinding): a foreign Host name gets 400 whatever it asks.
    for host in FOREIGN_HOSTS:
        status, _, _ = raw(server, "/index.json", headers={"Host": host, **bearer})
        assert status == 400, host
        counts["foreign Host names refused"] += 1

    # Origin: a cross-site page's state-changing request gets 403.
    for origin in CROSS_ORIGINS:
        status, _, _ = raw(
            server,
            "/api/datasets",
            method="POST",
            data=b"{}",
            headers={"Origin": origin, "Content-Type": "application/json", **bearer},
        )
        assert status == 403, origin
        counts["cross-site Origins refused"] += 1
        # TF Serving's predict skips CSRF (its clients send none), never the Origin check.
        status, _, _ = raw(
            server,
            "/v1/models/none:predict",
            method="POST",
            data=b'{"instances": []}',
            headers={"Origin": origin, "Content-Type": "application/json", **bearer},
        )
        assert status == 403, origin
        counts["cross-site Origins refused"] += 1

    # Token: nothing without it (pages redirect to /login, JSON is 401).
    for route in TOKENLESS_ROUTES:
        status, _, _ = raw(server, route, headers={"Accept": "application/json"})
        assert status == 401, route
        counts["token-less requests refused"] += 1

    # CSRF: a logged-in browser session without (or with a forged) CSRF token cannot change anything.
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(), NoRedirect)
    page = opener.open(server.url + "/login", timeout=60).read().decode()
    csrf = page.split('name="csrf_token" value="')[1].split('"')[0]
    try:
        opener.open(
            urllib.request.Request(
                server.url + "/login",
                method="POST",
                data=urllib.parse.urlencode({"csrf_token": csrf, "token": TOKEN, "next": "/"}).encode(),
            ),
            timeout=60,
        )
    except urllib.error.HTTPError as exc:
        assert exc.code == 302
    for forged in (None, "forged", csrf[:-2] + "xx"):
        headers = {"Content-Type": "application/json"} | ({"X-CSRFToken": forged} if forged else {})
        try:
            opener.open(
                urllib.request.Request(server.url + "/api/datasets", method="POST", data=b"{}", headers=headers),
                timeout=60,
            )
            raise AssertionError("a request without a valid CSRF token was accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 400, exc.code
        counts["missing or forged CSRF tokens refused"] += 1

    # Path fields outside the data roots.
    for field, value in (
        ("image_folder", str(world["outside"])),
        ("targets_file", str(world["outside"] / "shadow")),
        ("image_folder", f"{world['root']}/../private"),
        ("targets_file", "/etc/passwd"),
    ):
        resp = post_dataset(
            server,
            "image-regression",
            {"image_folder": str(world["images"]), "targets_file": str(world["root"] / "t.csv"), field: value},
        )
        assert resp.status == 400 and SECRET not in resp.text, resp.text[:300]
        counts["out-of-root path fields refused"] += 1

    # Paths inside files: a targets CSV under the root whose rows lead outside it.
    rows = [
        str(world["outside"] / "secret.png"),
        "../../private/secret.png",
        "link.png",
        str(world["outside"] / "shadow"),
        str(world["outside"] / "nonexistent.png"),
    ]
    for n, row in enumerate(rows):
        targets = world["root"] / f"t{n}.csv"
        targets.write_text(f"path,y\n0.png,1\n1.png,2\n2.png,3\n{row},4\n")
        resp = post_dataset(
            server,
            "image-regression",
            {"image_folder": str(world["images"]), "targets_file": str(targets), "width": 8, "height": 8},
            name=f"rows-{n}",
        )
        assert resp.status in (202, 400), resp.text[:300]
        error = resp.text if resp.status == 400 else (wait_finished(server, resp.json()["id"]).error or "")
        assert "outside the server's data roots" in error and SECRET not in error and row not in error, error
        counts["out-of-root paths inside files refused"] += 1

    # SSRF: typed DICOMweb URLs to loopback/private addresses, refused on the field before any request.
    port = world["forbidden"].port
    for url in (
        f"http://127.0.0.1:{port}/dicom-web",
        f"http://2130706433:{port}/dicom-web",
        f"http://0x7f.1:{port}/dicom-web",
        f"http://localhost:{port}/dicom-web",
        f"http://[::ffff:127.0.0.1]:{port}/dicom-web",
        f"http://127.0.0.1:{server.port}/dicom-web",
        "http://169.254.169.254/latest",
        "http://10.0.0.1/dicom-web",
        "http://192.168.0.1/dicom-web",
    ):
        resp = post_dataset(server, "dicomweb-segmentation", {"server_url": url})
        assert resp.status == 400 and "server_url" in resp.text, resp.text[:300]
        counts["loopback/private typed URLs refused"] += 1
    assert world["forbidden"].requests == []

    # Credentials: a typed URL the operator allowed never gets the operator's password.
    allowed = f"http://127.0.0.1:{world['allowed'].port}/dicom-web"
    resp = post_dataset(
        server, "dicomweb-segmentation", {"server_url": allowed, "username": "digits"}, name="typed-url"
    )
    assert resp.status == 202, resp.text[:300]
    wait_finished(server, resp.json()["id"])
    assert world["allowed"].requests, "the allowed listener got no request"
    assert all(OPERATOR_PASSWORD not in str(auth) for _, auth in world["allowed"].requests)
    assert all(
        auth is None or base64.b64decode(auth.split()[1]).decode() == "digits:" for _, auth in world["allowed"].requests
    )
    counts["requests to a typed URL without the operator's credentials"] += len(world["allowed"].requests)

    # Sizes.
    huge = ",".join(f"0.{i:07d}" for i in range(1, 150_000))
    resp = server.request(
        "/api/models",
        method="POST",
        data={"name": "s", "dataset": "x", "network": "lenet", "options": {"learning_rate": huge}},
    )
    assert resp.status == 400
    counts["oversized inputs refused"] += 1
    resp = server.request(
        "/api/models",
        method="POST",
        data=b'{"a": "' + b"x" * (3 << 20) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert resp.status == 413
    counts["oversized inputs refused"] += 1
    # A 1.5 MiB multipart body to a route that takes no file: the form limit, not the upload limit.
    status, _, _ = raw(
        server,
        f"/datasets/{world['done'].id}/notes",
        method="POST",
        data=b"x" * (3 << 19),
        headers={"Content-Type": "multipart/form-data; boundary=b", **bearer},
    )
    assert status == 413
    counts["oversized inputs refused"] += 1

    # Cross-site GET of a model download builds nothing.
    status, _, _ = raw(
        server, f"/models/{world['done'].id}/download", headers={"Sec-Fetch-Site": "cross-site", **bearer}
    )
    assert status == 403 and not (world["done"].path / "export").exists()
    counts["cross-site export builds refused"] += 1

    # Resume only from Aborted/Error.
    resp = server.request(f"/api/jobs/{world['done'].id}/resume", method="POST", data={})
    assert resp.status in (400, 409) and "Aborted or Error" in resp.text, resp.text[:300]
    counts["resume of a Done job refused"] += 1

    # Login: open redirects, throttling, logout.
    for target in OPEN_REDIRECTS:
        login = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(), NoRedirect)
        form = login.open(server.url + "/login", timeout=60).read().decode()
        token = form.split('name="csrf_token" value="')[1].split('"')[0]
        try:
            login.open(
                urllib.request.Request(
                    server.url + "/login",
                    method="POST",
                    data=urllib.parse.urlencode({"csrf_token": token, "token": TOKEN, "next": target}).encode(),
                ),
                timeout=60,
            )
        except urllib.error.HTTPError as exc:
            assert exc.code == 302 and exc.headers["Location"] == "/", (target, exc.headers["Location"])
        counts["open-redirect next values refused"] += 1
    old_cookie_jar = opener  # the CSRF probe's logged-in session
    button = old_cookie_jar.open(server.url + "/logout", timeout=60).read().decode()  # GET: only the button
    logout = urllib.parse.urlencode({"csrf_token": button.split('name="csrf_token" value="')[1].split('"')[0]})
    try:
        old_cookie_jar.open(urllib.request.Request(server.url + "/logout", data=logout.encode()), timeout=60)
    except urllib.error.HTTPError:
        pass
    try:
        old_cookie_jar.open(
            urllib.request.Request(server.url + "/index.json", headers={"Accept": "application/json"}), timeout=60
        )
        raise AssertionError("the session still works after logout")
    except urllib.error.HTTPError as exc:
        assert exc.code == 401
    counts["sessions ended by logout"] += 1
    statuses = [
        raw(server, "/index.json", headers={"Authorization": "Bearer wrong", "Accept": "application/json"})[0]
        for _ in range(8)
    ]
    assert statuses[:5] == [401] * 5 and 429 in statuses[5:], statuses
    counts["wrong tokens throttled (429 after 5)"] += 1

    # A second server on the same jobs folder refuses before touching a job.
    before = (world["done"].path / "job.json").read_bytes()
    second = subprocess.run(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(world["jobs"]), "serve", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=world["tmp"],
    )
    assert second.returncode != 0 and "Another DIGITS server already schedules" in second.stderr
    assert (world["done"].path / "job.json").read_bytes() == before
    counts["second servers on one jobs folder refused"] += 1

    print("\nsecurity audit:", json.dumps(dict(counts), indent=1))
    assert SECRET not in server.output()
