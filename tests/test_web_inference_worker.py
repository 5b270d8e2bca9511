"""The web app's long-lived inference worker: warm model cache, restarts, timeouts, crashes.

Real processes and a real (tiny) LeNet trained here by ``digits_core.engine.train``
on a 3-class 8×8 image folder; inference goes through the Flask test client
(``POST /api/models/ID/infer``), which hands it to the app's worker process.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow

SPOTS = {"a": (0, 0), "b": (3, 3), "c": (5, 5)}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_core.web import create_app

    root = tmp_path_factory.mktemp("worker")
    rng = np.random.default_rng(0)
    for name, (r, c) in SPOTS.items():
        (root / "images" / name).mkdir(parents=True)
        for i in range(8):
            image = rng.integers(0, 40, (8, 8)).astype(np.uint8)
            image[r : r + 3, c : c + 3] = 220
            Image.fromarray(image).save(root / "images" / name / f"{i}.png")
    jobs = root / "jobs"
    ds = create_dataset(
        "image-classification",
        {"folder": str(root / "images"), "image_type": "grayscale", "width": 8, "height": 8},
        workers=1,
        jobs_dir=jobs,
    )
    model = train(ds.id, "lenet", name="tiny", epochs=1, batch_size=8, jobs_dir=jobs)
    app = create_app(jobs, start_scheduler=False, testing=True, inference_timeout=120, data_roots=[root])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    worker = app.extensions["digits"]["inference_worker"]
    try:
        yield app, client, token, model, str(root / "images" / "b" / "0.png"), worker
    finally:
        worker.close()


def _infer(served):
    app, client, token, model, image, _ = served
    start = time.perf_counter()
    resp = client.post(f"/api/models/{model.id}/infer", json={"inputs": [image]}, headers={"X-CSRFToken": token})
    return resp, time.perf_counter() - start


def _wait_gone(worker, pid, seconds=10.0):
    deadline = time.monotonic() + seconds
    while worker.pid == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.pid != pid


def test_worker_protocol_errors_and_restart_without_tensorflow():
    """An unknown request kind fails in the worker (no model, no TensorFlow), the worker lives on."""
    from digits_core.errors import DigitsError
    from digits_core.web.inference_worker import InferenceWorker

    worker = InferenceWorker(timeout=30)
    try:
        with pytest.raises(DigitsError, match="Internal error in the bogus worker: KeyError"):
            worker.call("bogus", {})
        pid = worker.pid
        with pytest.raises(DigitsError, match="bogus"):
            worker.call("bogus", {})
        assert worker.pid == pid and worker.starts == 1
        os.kill(pid, signal.SIGKILL)
        _wait_gone(worker, pid)
        with pytest.raises(DigitsError, match="bogus"):
            worker.call("bogus", {})
        assert worker.pid not in (None, pid) and worker.starts == 2
    finally:
        worker.close()
    assert worker.pid is None


def test_consecutive_requests_share_one_warm_worker(served):
    worker = served[-1]
    assert worker.pid is None  # started lazily, by the first inference request
    first, cold = _infer(served)
    second, warm = _infer(served)
    assert first.status_code == 200, first.get_json()
    assert second.status_code == 200, second.get_json()
    one, two = first.get_json()["worker"], second.get_json()["worker"]
    print(
        f"\ninference latency through the Flask app: 1st {cold:.3f} s (worker {one['seconds']:.3f} s, "
        f"loaded model), 2nd {warm:.3f} s (worker {two['seconds']:.3f} s, cached), ratio {cold / warm:.1f}x"
    )
    assert one["pid"] == two["pid"] == worker.pid
    assert one["loaded_model"] is True and two["loaded_model"] is False
    assert one["model_loads"] == two["model_loads"] == 1 and two["requests"] == 2
    assert (
        first.get_json()["results"]["samples"][0]["top"][0]["label"]
        == second.get_json()["results"]["samples"][0]["top"][0]["label"]
    )
    assert warm < cold


def test_killed_worker_is_restarted_transparently(served):
    worker = served[-1]
    resp, _ = _infer(served)
    pid = resp.get_json()["worker"]["pid"]
    os.kill(pid, signal.SIGKILL)
    _wait_gone(worker, pid)
    again, _ = _infer(served)
    assert again.status_code == 200, again.get_json()
    info = again.get_json()["worker"]
    assert info["pid"] != pid and info["requests"] == 1 and info["loaded_model"] is True


#: A network file whose import (when the worker loads the model) blocks until the test creates ``gate``:
#: the worker is provably stuck mid-request, whatever the machine's speed.
GATED_NETWORK = """
import os
import pathlib
import time

_here = pathlib.Path(__file__).resolve().parent
(_here / "gate.waiting").write_text(str(os.getpid()))
while not (_here / "gate").exists():
    time.sleep(0.02)


def build_model(input_shape, num_outputs, **params):
    raise NotImplementedError
"""


def _wait_for_pid_file(path, seconds=120.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.02)
    raise AssertionError(f"{path} never appeared: the worker did not reach the gate")


def test_timeout_and_crash_fail_only_that_request(served):
    import json

    app, model, worker = served[0], served[3], served[-1]
    info_file, network, waiting = model.path / "model.json", model.path / "network.py", model.path / "gate.waiting"
    saved = info_file.read_text()
    info_file.write_text(json.dumps({**json.loads(saved), "network_source": "file"}))
    network.write_text(GATED_NETWORK)
    try:
        # The next request starts a fresh worker, which loads the model and blocks in the gate: it can never
        # finish, so the 1 s timeout fires on any machine (a cold TensorFlow import is no longer needed).
        worker.close()
        app.config["DIGITS_INFERENCE_TIMEOUT"] = 1.0
        try:
            slow, _seconds = _infer(served)
        finally:
            app.config["DIGITS_INFERENCE_TIMEOUT"] = 120.0
        message = slow.get_json()["error"]["message"]
        assert slow.status_code == 400 and "did not finish within 1 s" in message and "fresh one" in message
        assert worker.pid is None  # the stuck worker was killed, not waited for
        waiting.unlink(missing_ok=True)  # (a slow machine times out in the TensorFlow import, before the gate)

        def kill_when_stuck():  # a worker that dies mid-request (like a crashing custom network)
            os.kill(_wait_for_pid_file(waiting), signal.SIGKILL)

        killer = threading.Thread(target=kill_when_stuck)
        killer.start()
        crashed, _ = _infer(served)
        killer.join()
        message = crashed.get_json()["error"]["message"]
        assert crashed.status_code == 400 and "stopped while running" in message and "SIGKILL" in message
    finally:
        info_file.write_text(saved)
        network.unlink(missing_ok=True)

    ok, _ = _infer(served)
    assert ok.status_code == 200, ok.get_json()
    assert ok.get_json()["worker"]["requests"] == 1
