"""The container image, built and run for real: in ``make test`` (and ``make test-container``).

The module's fixture runs ``scripts/build-container.sh``, which builds the image of the working tree
from the Dockerfile with podman on a Debian base made by mmdebstrap (no image registry; about 3
minutes from nothing on a quiet 2-core machine); the test runs it as docs/web-ui.md says
(``/data`` and ``/jobs`` mounted from the host, ``DIGITS_AUTH_TOKEN`` set, port 5000 published on
127.0.0.1) and checks, against the running container: the image's health check passes, the token
login works (and nothing is served without it), a dataset is built from the mounted ``/data``, a
LeNet is trained through the API inside the container, the job folder is readable on the host
afterwards, and the server runs, and writes, as uid 1000.

Skipped unless ``DIGITS_CONTAINER_TEST=1`` (set by ``make test`` and ``make test-container``, so a bare
``pytest`` does not spend minutes building), and where podman cannot run containers (not root, no
podman, runc or mmdebstrap): the skip says which.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.cookiejar import CookieJar
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("DIGITS_IMAGE", "localhost/digits-core:test")
PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
TOKEN = "container-test-token"
BUILD_TIMEOUT_S = 1500  # a hung build must not eat the rest of CI's 40 minutes


def _why_not() -> str | None:
    if os.environ.get("DIGITS_CONTAINER_TEST") != "1":
        return (
            "the container test runs with make test / make test-container (DIGITS_CONTAINER_TEST=1): "
            "it builds the image first, minutes"
        )
    missing = [tool for tool in ("podman", "runc", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/ensure-podman.sh installs them as root with apt-get)"
    if os.geteuid() != 0:
        return "the container test runs podman as root (rootless podman maps uid 1000 of the container elsewhere)"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _class_folders(root: Path) -> None:
    rng = np.random.default_rng(0)
    for c in range(3):
        (root / str(c)).mkdir(parents=True)
        for i in range(8):
            img = rng.normal(40, 10, (28, 28))
            img[4 + 6 * c : 10 + 6 * c, 4:24] = 220
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(root / str(c) / f"{i}.png")


class Client:
    """HTTP to the container: a cookie jar for the login session, or the token as a Bearer header."""

    def __init__(self, url: str):
        self.url = url
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))

    def call(self, path: str, data: dict | bytes | None = None, *, bearer: bool = False, form: bool = False):
        headers = {"Accept": "application/json"} if not form else {}
        body = None
        if isinstance(data, dict) and form:
            body, headers["Content-Type"] = urllib.parse.urlencode(data).encode(), "application/x-www-form-urlencoded"
        elif data is not None:
            body, headers["Content-Type"] = json.dumps(data).encode(), "application/json"
        if bearer:
            headers["Authorization"] = f"Bearer {TOKEN}"
        request = urllib.request.Request(self.url + path, data=body, headers=headers)
        try:
            with self.opener.open(request, timeout=60) as answer:
                return answer.status, answer.read().decode("utf-8", "replace"), answer.geturl()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace"), exc.geturl()

    def wait_done(self, path: str, timeout: float = 900) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body, _ = self.call(path, bearer=True)
            job = json.loads(body)["job"] if status == 200 else {}
            if job.get("status") in ("Done", "Error", "Aborted"):
                return job
            time.sleep(2)
        raise AssertionError(f"{path} did not finish within {timeout:.0f} s")


@pytest.fixture(scope="module")
def image() -> str:
    """The image of this working tree, built by scripts/build-container.sh (its phase times printed)."""
    build = subprocess.run(
        ["sh", str(ROOT / "scripts" / "build-container.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "DIGITS_IMAGE": IMAGE},
    )
    print("\n".join(line for line in build.stderr.splitlines() if "build-container:" in line))
    assert build.returncode == 0, f"scripts/build-container.sh failed:\n{build.stderr[-6000:]}"
    return IMAGE


@pytest.fixture(scope="module")
def container(image, tmp_path_factory):
    root = tmp_path_factory.mktemp("container")
    data, jobs = root / "data", root / "jobs"
    _class_folders(data / "digits")
    jobs.mkdir()
    os.chown(jobs, 1000, 1000)  # the image's user owns the jobs volume, as the run in docs/web-ui.md says
    for path in (root, data, *data.rglob("*")):
        path.chmod(path.stat().st_mode | 0o755 if path.is_dir() else 0o644)
    name, port = f"digits-test-{uuid.uuid4().hex[:8]}", _free_port()
    started = time.monotonic()
    run = subprocess.run(
        [
            *PODMAN,
            "run",
            "-d",
            "--name",
            name,
            "--ulimit",
            "nofile=4096:4096",
            "--ulimit",
            "nproc=4096:4096",
            "-p",
            f"127.0.0.1:{port}:5000",
            "-v",
            f"{data}:/data",
            "-v",
            f"{jobs}:/jobs",
            "-e",
            f"DIGITS_AUTH_TOKEN={TOKEN}",
            image,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    try:
        yield {"name": name, "url": f"http://127.0.0.1:{port}", "data": data, "jobs": jobs, "started": started}
    finally:
        logs = subprocess.run([*PODMAN, "logs", "--tail", "40", name], capture_output=True, text=True)
        print(logs.stdout[-4000:], logs.stderr[-4000:])
        subprocess.run([*PODMAN, "rm", "-f", "-t", "10", name], capture_output=True, timeout=120)


def _healthy(name: str, timeout: float = 180) -> float:
    deadline, start = time.monotonic() + timeout, time.monotonic()
    while time.monotonic() < deadline:
        if subprocess.run([*PODMAN, "healthcheck", "run", name], capture_output=True).returncode == 0:
            return time.monotonic() - start
        time.sleep(1)
    raise AssertionError(f"the image's health check did not pass within {timeout:.0f} s")


def test_container_serves_trains_and_leaves_the_jobs_on_the_host(container):
    name = container["name"]
    inspect = json.loads(subprocess.run([*PODMAN, "inspect", name], capture_output=True, text=True).stdout)[0]
    assert inspect["Config"]["User"] == "1000"
    assert inspect["Config"]["Healthcheck"]["Test"][:2] == ["CMD", "python3"]  # the Dockerfile's HEALTHCHECK
    print(f"healthy after {_healthy(name):.1f} s")
    client = Client(container["url"])

    # Token: nothing without it, a wrong one refused, the right one logs the browser session in.
    status, _, _ = client.call("/api/plugins")
    assert status == 401
    status, page, _ = client.call("/login", form=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    status, _, _ = client.call("/login", {"token": "wrong", "csrf_token": csrf}, form=True)
    assert status == 401
    status, _, landed = client.call("/login", {"token": TOKEN, "csrf_token": csrf}, form=True)
    assert status == 200 and not landed.endswith("/login")
    status, body, _ = client.call("/api/plugins")  # the session cookie alone now
    assert status == 200 and "image-classification" in body

    # A dataset from the mounted /data, a LeNet trained through the API, in the container.
    status, body, _ = client.call(
        "/api/datasets",
        {
            "plugin_id": "image-classification",
            "name": "container digits",
            "form_data": {"folder": "/data/digits", "image_type": "grayscale", "width": 28, "height": 28},
        },
        bearer=True,
    )
    assert status in (200, 201, 202), body
    dataset = json.loads(body)["id"]
    assert client.wait_done(f"/datasets/{dataset}.json")["status"] == "Done"
    status, body, _ = client.call(
        "/api/models",
        {
            "name": "container lenet",
            "dataset": dataset,
            "network": "lenet",
            "options": {"epochs": 1, "batch_size": 8, "seed": 1},
        },
        bearer=True,
    )
    assert status in (200, 201, 202), body
    model = json.loads(body)["id"]
    job = client.wait_done(f"/models/{model}.json")
    assert job["status"] == "Done", job

    # The host sees the job folders, readable, written by uid 1000.
    folder = container["jobs"] / model
    info = json.loads((folder / "model.json").read_text())
    assert info["dataset_id"] == dataset and info["network"] == "lenet"
    assert json.loads((folder / "job.json").read_text())["status_history"][-1][0] == "Done"
    snapshots = sorted((folder / "snapshots").glob("*.keras"))
    assert snapshots and snapshots[-1].stat().st_size > 0
    assert {p.stat().st_uid for p in [folder, *folder.rglob("*")]} == {1000}
    assert json.loads((container["jobs"] / dataset / "dataset" / "dataset.json").read_text())["stages"]
    user = subprocess.run([*PODMAN, "exec", name, "id", "-u"], capture_output=True, text=True)
    assert user.stdout.strip() == "1000"
    top = subprocess.run([*PODMAN, "top", name, "user", "args"], capture_output=True, text=True).stdout
    server_line = next(line for line in top.splitlines() if "digits serve" in line)
    assert server_line.split()[0] in ("1000", "digits"), top
    print(f"container run, dataset and training: {time.monotonic() - container['started']:.0f} s")
