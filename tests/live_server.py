"""A REAL ``digits serve`` subprocess for tests.

The server runs as users run it: ``python -m digits_core --jobs-dir DIR
serve --port PORT`` in its own interpreter, on 127.0.0.1 and a free port,
with its own scheduler and inference worker. Nothing is patched.

Use the ``live_server`` fixture (registered in ``tests/conftest.py``), a
factory that starts as many servers as a test needs and stops them all
afterwards::

    def test_home(live_server):
        server = live_server()                       # temp jobs folder
        assert server.get("/").status == 200
        server = live_server(auth_token="s3cret", token_via_env=True)

or, outside pytest, :func:`start_server` / :func:`running_server`.

Every test that starts a server must be marked ``@pytest.mark.slow``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: Seconds a server may take to answer its first request (a loaded 2-core box
#: imports Flask, WTForms and every plugin first).
START_TIMEOUT = 120.0
#: Seconds a server may take to exit after SIGTERM/SIGINT before it is killed.
STOP_TIMEOUT = 60.0


@dataclass
class Response:
    """One HTTP answer: ``status``, ``headers`` (lower-case names) and ``body`` (bytes)."""

    status: int
    headers: dict
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)


@dataclass
class LiveServer:
    """A running ``digits serve`` process.

    Attributes:
        url: Base URL, ``http://127.0.0.1:PORT`` (no trailing slash).
        port: The TCP port.
        jobs_dir: The jobs folder it serves.
        process: The ``subprocess.Popen`` of the server.
        auth_token: The token it requires (``None``: none); :meth:`request`
            sends it unless told otherwise.
        log_path: File receiving the server's stdout and stderr.
    """

    url: str
    port: int
    jobs_dir: Path
    process: subprocess.Popen
    auth_token: str | None
    log_path: Path
    command: list = field(default_factory=list)

    # -- HTTP -----------------------------------------------------------------

    def request(
        self, path: str, *, method: str = "GET", data=None, headers=None, token=True, timeout: float = 60.0
    ) -> Response:
        """Send one request; HTTP errors are returned, not raised.

        Args:
            path: Path below the base URL, e.g. ``"/index.json"``.
            method: HTTP method.
            data: ``bytes`` body, or a ``dict``/``list`` sent as JSON.
            headers: Extra headers.
            token: ``True`` sends the server's auth token (if any) as
                ``Authorization: Bearer``; ``False`` sends none; a string
                sends that token instead.
            timeout: Socket timeout in seconds.
        """
        headers = dict(headers or {})
        if isinstance(data, (dict, list)):
            data = json.dumps(data).encode()
            headers.setdefault("Content-Type", "application/json")
        chosen = self.auth_token if token is True else (token or None)
        if chosen:
            headers.setdefault("Authorization", f"Bearer {chosen}")
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return Response(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read())
        except urllib.error.HTTPError as exc:
            return Response(exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read())

    def get(self, path: str, **kwargs) -> Response:
        """``GET path`` (see :meth:`request`)."""
        return self.request(path, **kwargs)

    def get_json(self, path: str, **kwargs):
        """``GET path`` with ``Accept: application/json``; asserts 200 and returns the parsed body."""
        headers = {"Accept": "application/json", **kwargs.pop("headers", {})}
        resp = self.request(path, headers=headers, **kwargs)
        assert resp.status == 200, f"GET {path} answered {resp.status}: {resp.text[:500]}\n{self.describe()}"
        return resp.json()

    # -- process --------------------------------------------------------------

    def output(self) -> str:
        """Everything the server printed so far (stdout and stderr together)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def describe(self) -> str:
        """A block for assertion messages: command, exit status and output."""
        return (
            f"--- digits serve ({' '.join(self.command)}), exit status {self.process.poll()} ---\n"
            f"{self.output()[-6000:]}\n--- end of server output ---"
        )

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Poll the port until the server answers any HTTP request, or fail.

        Fails at once (with the server's output) when the process exits.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"digits serve exited before answering.\n{self.describe()}")
            try:
                with contextlib.closing(socket.create_connection(("127.0.0.1", self.port), timeout=1.0)):
                    pass
                self.request("/index.json", token=True, timeout=10.0)
                return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"digits serve did not answer within {timeout:.0f} s.\n{self.describe()}")
            time.sleep(0.1)  # polling interval of a bounded wait on state, not synchronisation

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Send ``sig`` and wait for the exit; kill it after ``timeout`` s.

        Returns:
            The exit status (negative: killed by that signal).

        Raises:
            AssertionError: The server ignored ``sig`` and had to be killed.
        """
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(
                    f"digits serve did not stop within {timeout:.0f} s of signal "
                    f"{signal.Signals(sig).name}; killed.\n{self.describe()}"
                ) from None
        return self.process.returncode

    def kill(self) -> int:
        """SIGKILL the server (no clean-up runs: as if it crashed) and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(30)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(extra: dict | None = None) -> dict:
    """This process's environment without ``DIGITS_*`` variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def start_server(
    jobs_dir=None,
    *,
    auth_token: str | None = None,
    token_via_env: bool = False,
    extra_args=(),
    env: dict | None = None,
    pythonpath=(),
    log_dir=None,
    cwd=None,
    command=None,
    wait: bool = True,
    timeout: float = START_TIMEOUT,
) -> LiveServer:
    """Start ``digits serve`` on 127.0.0.1 and a free port.

    Args:
        jobs_dir: Jobs folder (default: a new temporary folder).
        auth_token: Token the server requires.
        token_via_env: Pass ``auth_token`` as ``DIGITS_AUTH_TOKEN`` instead of
            ``--auth-token``.
        extra_args: More ``digits serve`` arguments (e.g. ``["--max-training-jobs", "1"]``).
        env: Extra environment variables (``DIGITS_*`` of this process are not inherited).
        pythonpath: Folders put first on ``PYTHONPATH`` (e.g. a pip ``--target`` install of
            a plugin); the server's job and inference workers inherit it.
        log_dir: Where the output file goes (default: next to the jobs folder).
        cwd: The server's working folder (default: the jobs folder's parent), which is one of
            its default data roots: inputs a test writes there may be given to the API.
        command: ``command(port) -> argv`` to run instead of ``digits serve`` (e.g. a
            script that ends by serving, like ``scripts/demo.py``); ``jobs_dir``,
            ``auth_token`` and ``extra_args`` are then the caller's business.
        wait: Wait until the server answers HTTP.
        timeout: Seconds allowed for that.

    Returns:
        The :class:`LiveServer`; call :meth:`LiveServer.stop` when done.
    """
    jobs_dir = Path(jobs_dir) if jobs_dir is not None else Path(tempfile.mkdtemp(prefix="digits-live-")) / "jobs"
    log_dir = Path(log_dir) if log_dir is not None else jobs_dir.parent
    log_dir.mkdir(parents=True, exist_ok=True)
    jobs_dir.parent.mkdir(parents=True, exist_ok=True)
    extra_env = dict(env or {})
    args = list(extra_args)
    if pythonpath:
        extra_env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), os.environ.get("PYTHONPATH", "")])
    if auth_token and token_via_env:
        extra_env["DIGITS_AUTH_TOKEN"] = auth_token
    elif auth_token:
        args += ["--auth-token", auth_token]
    for attempt in range(3):  # another process may take the free port before the server binds it
        port = free_port()
        argv = (
            command(port)
            if command is not None
            else [
                sys.executable,
                "-m",
                "digits_core",
                "--jobs-dir",
                str(jobs_dir),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                *args,
            ]
        )
        log_path = log_dir / f"digits-serve-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=server_env(extra_env),
                cwd=cwd or jobs_dir.parent,
            )
        server = LiveServer(f"http://127.0.0.1:{port}", port, jobs_dir, process, auth_token, log_path, argv)
        if not wait:
            return server
        try:
            server.wait_ready(timeout)
            return server
        except AssertionError:
            if attempt < 2 and "already in use" in server.output():
                continue
            raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def running_server(jobs_dir=None, **kwargs):
    """Context manager around :func:`start_server`: SIGTERM on exit, SIGKILL if that does not stop it."""
    server = start_server(jobs_dir, **kwargs)
    try:
        yield server
    finally:
        _ensure_stopped(server)


def _ensure_stopped(server: LiveServer) -> None:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture
def live_server(tmp_path):
    """Factory starting real ``digits serve`` processes; all are stopped at teardown.

    Call it with the keyword arguments of :func:`start_server`; the jobs
    folder defaults to ``tmp_path / "jobs"`` (a new folder per extra server).
    Mark tests using it ``@pytest.mark.slow``.
    """
    servers: list[LiveServer] = []

    def start(jobs_dir=None, **kwargs) -> LiveServer:
        if jobs_dir is None:
            jobs_dir = tmp_path / ("jobs" if not servers else f"jobs{len(servers)}")
        kwargs.setdefault("log_dir", tmp_path)
        server = start_server(jobs_dir, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        _ensure_stopped(server)
