"""A real ``mlflow server`` for tests: SQLite backend, local artifact root, on 127.0.0.1 (a free port)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

MLFLOW = Path(sys.executable).with_name("mlflow")


@contextlib.contextmanager
def mlflow_server(folder: Path) -> Iterator[Callable[[], str]]:
    """Start ``mlflow server`` at once; yield a function that waits until it answers and returns its URI;
    stop it (its process group) after."""
    from live_server import free_port

    port = free_port()
    log = open(folder / "server.log", "wb")
    process = subprocess.Popen(
        [
            str(MLFLOW),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{folder / 'mlflow.db'}",
            "--artifacts-destination",
            str(folder / "artifacts"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=folder,
        # the server's background job runner (GenAI tasks, a dozen worker processes) is nothing a test uses
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    uri = f"http://127.0.0.1:{port}"

    def ready() -> str:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return uri
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}")
            time.sleep(0.3)

    try:
        yield ready  # waited for only when the test needs it: the server starts while the data is built
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(20)
        try:  # the uvicorn worker, should it outlive the server's main process
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        log.close()
