"""The REAL ``digits serve`` process: start-up, pages and API, signals, auth from the environment, recovery.

Each test starts ``python -m digits_core serve`` as a subprocess (see
``tests/live_server.py``) with the pip-installed sample plugin on its
``PYTHONPATH``. Dataset jobs of that plugin block in their worker process
until the test creates the file named by ``DIGITS_SAMPLE_GATE``, so "a job
is running when the signal arrives" is a state the test controls, not a race.
No TensorFlow is imported by the server or these workers.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from digits_core.jobs import JobStatus, JobStore

pytestmark = pytest.mark.slow

TOKEN = "live-server-token"
WAIT_S = 120.0


def wait_until(predicate, what: str, server=None, timeout: float = WAIT_S):
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` (and the server output)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if server is not None and server.process.poll() is not None:
            raise AssertionError(f"server exited while waiting for {what}\n{server.describe()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f"\n{server.describe()}" if server else ""))
        time.sleep(0.05)


def worker_alive(pid: int, job_dir: Path) -> bool:
    """True while ``pid`` is a live (not zombie) job worker of ``job_dir``."""
    proc = Path(f"/proc/{pid}")
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        args = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, IndexError):
        return False
    return state != "Z" and b"digits_core.scheduler" in args and os.fsencode(str(job_dir)) in args


def job_row(server, job_id: str) -> dict | None:
    return next((r for r in server.get_json("/api/jobs") if r["id"] == job_id), None)


def queue_numbers_dataset(server, name: str) -> str:
    """Queue a sample-numbers dataset job through the JSON API; return its id."""
    resp = server.request(
        "/api/datasets",
        method="POST",
        data={"plugin_id": "sample-numbers", "name": name, "workers": 1, "form_data": {"count": 3}},
    )
    assert resp.status == 202, f"{resp.status}: {resp.text[:500]}\n{server.describe()}"
    return resp.json()["id"]


def start_blocked_job(server, gate: Path, name: str = "blocked") -> tuple[str, int, Path]:
    """Queue a dataset job and wait until its worker blocks on ``gate``; return (id, worker pid, job folder)."""
    job_id = queue_numbers_dataset(server, name)
    wait_until(lambda: Path(f"{gate}.waiting").exists(), "the job's worker to reach the gate", server)
    job_dir = server.jobs_dir / job_id
    assert job_row(server, job_id)["status"] == "Running"
    pid = int((job_dir / "worker.pid").read_text())
    assert worker_alive(pid, job_dir)
    return job_id, pid, job_dir


@pytest.fixture
def sample_path(sample_plugin_paths):
    return sample_plugin_paths["basic"]


@pytest.mark.parametrize(
    ("sig", "token_via_env"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["SIGTERM-token-flag", "SIGINT-token-env"],
)
def test_serve_answers_then_signal_stops_it_and_its_workers(live_server, sample_path, tmp_path, sig, token_via_env):
    gate = tmp_path / "gate"
    server = live_server(
        auth_token=TOKEN, token_via_env=token_via_env, pythonpath=[sample_path], env={"DIGITS_SAMPLE_GATE": str(gate)}
    )
    assert "DIGITS is serving" in server.output() and f":{server.port}/" in server.output()

    # The token is required (given as --auth-token, or only as $DIGITS_AUTH_TOKEN).
    for token in (False, "not-the-token"):
        assert server.get("/index.json", token=token, headers={"Accept": "application/json"}).status == 401
    login = server.get("/login", token=False)
    assert login.status == 200 and "<form" in login.text

    home = server.get("/")
    assert home.status == 200 and home.headers["content-type"].startswith("text/html")
    assert "Sample numbers" in home.text  # the New dataset menu lists the installed plugin
    assert server.get_json("/index.json") == {
        "datasets": [],
        "models": [],
        "unreadable": [],
        "groups": [],
        "query": "",
        "total": 0,
    }
    assert "sample-numbers" in {r.get("id") for r in server.get_json("/api/plugins")}

    job_id, pid, job_dir = start_blocked_job(server, gate)
    assert server.get_json("/api/scheduler")["running"]

    assert server.stop(sig) == 0, server.describe()
    assert not worker_alive(pid, job_dir), "the job's worker outlived the server"
    job = JobStore(server.jobs_dir).get(job_id)
    assert job.status is JobStatus.ABORTED, (job.status, job.error)


def test_restart_recovers_the_jobs_a_killed_server_left(live_server, sample_path, tmp_path):
    """kill -9 leaves a Running job (with its worker) and a Waiting job; the next server sorts out both."""
    jobs_dir = tmp_path / "jobs"
    gate = tmp_path / "gate-first-server"  # never opened: the first worker blocks until it is stopped
    first = live_server(
        jobs_dir,
        pythonpath=[sample_path],
        env={"DIGITS_SAMPLE_GATE": str(gate)},
        extra_args=["--max-dataset-jobs", "1"],
        auth_token=TOKEN,
    )
    running_id, pid, job_dir = start_blocked_job(first, gate, "left running")
    waiting_id = queue_numbers_dataset(first, "left waiting")
    assert job_row(first, waiting_id)["status"] == "Waiting"
    assert first.kill() == -signal.SIGKILL
    # The worker dies with its server (it watches its parent): no orphan keeps writing the job.
    wait_until(lambda: not worker_alive(pid, job_dir), "the orphan worker to stop by itself")

    hook_log = tmp_path / "hooks.jsonl"
    second = live_server(
        jobs_dir,
        pythonpath=[sample_path],
        auth_token=TOKEN,  # no gate: jobs run through
        env={"DIGITS_SAMPLE_HOOK_LOG": str(hook_log)},
    )
    row = wait_until(
        lambda: (r := job_row(second, running_id)) and r["status"] != "Running" and r,
        "the left-running job to leave Running",
        second,
    )
    assert row["status"] == "Aborted", row
    row = wait_until(
        lambda: (r := job_row(second, waiting_id)) and r["status"] in ("Done", "Error") and r,
        "the left-waiting job to run",
        second,
    )
    assert row["status"] == "Done", (row, (jobs_dir / waiting_id / "worker.log").read_text())
    data = second.get_json(f"/datasets/{waiting_id}.json")
    assert data["info"]["stages"]["train"]["count"] > 0
    # The installed plugin's hooks ran in the job's worker process, not in the server.
    calls = [json.loads(line) for line in hook_log.read_text().splitlines()]
    created = [c for c in calls if c["hook"] == "digits_dataset_created"]
    assert [c["args"]["dataset"]["job_path"] for c in created] == [str(jobs_dir / waiting_id)]
    assert created[0]["pid"] != second.process.pid
    assert "digits_register_routes" in {c["hook"] for c in calls if c["pid"] == second.process.pid}
    assert second.stop() == 0, second.describe()
