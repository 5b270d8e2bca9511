"""A stale Ray cluster record never hangs a local run (issue 39, finding 8).

After a ``ray start`` whose cluster died, Ray's temp folder keeps ``ray_current_cluster``, and
``ray.init()`` with no address joins that dead address and waits for good. ``digits tune`` (and the
server's sweeps) must start a cluster of their own (``address="local"``), and join one only when
asked (``--ray-address``), failing at once, naming the address, when nothing answers there. The
record is written into a Ray temp folder of the test's own (``RAY_TMPDIR``), never the real one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
def stale_ray_tmp():
    # short: Ray's session sockets live under it (unix socket paths are limited to ~107 characters)
    folder = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    (folder / "ray").mkdir()
    port = _closed_port()
    (folder / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{port}\n")
    yield folder, port
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def _digits(*args: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("DIGITS_", "RAY_ADDRESS"))}
    full.update(env, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    code = "import sys\nfrom digits_core.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=timeout
    )


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core import registry
    from digits_core.datasets import create_dataset

    root = tmp_path_factory.mktemp("stale")
    registry.register(SyntheticShapes)
    try:
        dataset = create_dataset(
            "synthetic-shapes",
            {"count": 32, "val_count": 16, "size": 16, "classes": 2},
            workers=1,
            jobs_dir=root / "jobs",
        )
    finally:
        registry.unregister(SyntheticShapes)
    return {"jobs": root / "jobs", "dataset": dataset.id}


@pytest.mark.slow
def test_digits_tune_runs_on_its_own_local_cluster_despite_a_stale_record(shapes, stale_ray_tmp):
    folder, port = stale_ray_tmp
    # Today's bound: Ray start, one trial of one epoch; a join of the dead address never returns.
    result = _digits(
        "--jobs-dir",
        str(shapes["jobs"]),
        "tune",
        "--dataset",
        shapes["dataset"],
        "--network",
        "lenet",
        "--search",
        "learning_rate=0.01",
        "--scheduler",
        "grid",
        "--max-epochs",
        "1",
        "--batch-size",
        "16",
        "--json",
        env={"RAY_TMPDIR": str(folder)},
        timeout=400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["status"] == "Done" and [row["status"] for row in summary["trials"]] == ["Done"]
    assert f"127.0.0.1:{port}" not in result.stderr  # the dead address was never tried
    assert (folder / "ray" / "ray_current_cluster").read_text().strip() == f"127.0.0.1:{port}"


def test_a_cluster_that_does_not_answer_is_named_at_once(shapes, stale_ray_tmp):
    folder, port = stale_ray_tmp
    result = _digits(
        "--jobs-dir",
        str(shapes["jobs"]),
        "tune",
        "--dataset",
        shapes["dataset"],
        "--search",
        "learning_rate=0.01",
        "--scheduler",
        "grid",
        "--max-epochs",
        "1",
        "--ray-address",
        f"127.0.0.1:{port}",
        env={"RAY_TMPDIR": str(folder)},
        timeout=120,
    )
    assert result.returncode != 0
    assert f"No Ray cluster answers at 127.0.0.1:{port}" in result.stderr


@pytest.mark.parametrize("answer", [None, b"HTTP/1.1 400 Bad Request\r\n\r\n"], ids=["silent", "not-ray"])
def test_a_listener_that_is_not_a_ray_cluster_is_named_instead_of_joined_for_good(monkeypatch, answer):
    """ray.init retried such a listener forever (the issue's listener saw 27 connections); the probe names it."""
    import threading

    from digits_core.errors import ConfigurationError
    from digits_core.executors import ray_executor

    monkeypatch.setattr(ray_executor, "GCS_PROBE_TIMEOUT_S", 1.0)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    held = []

    def serve():
        conn, _ = server.accept()
        held.append(conn)
        if answer:
            conn.recv(64)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(ConfigurationError, match=f"No Ray cluster answers at 127.0.0.1:{port}"):
            ray_executor.connect(f"127.0.0.1:{port}")
        assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
    finally:
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
