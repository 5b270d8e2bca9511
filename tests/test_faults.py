"""Fault injection against real processes: kill -9 and SIGTERM of training and of the server,
DNS rebinding, data roots and two writers against a real ``digits serve``.

Every kill lands at a point chosen at random (seeded, printed) among states the
test waits for (a snapshot written, a job's worker blocked on a gate); nothing
is synchronised by sleeping. Dataset-create kills live with the datasets tests.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_job_lock import OWNER  # a process owning a job (its lock) until killed

from digits_core.jobs import Job, JobStatus, JobStore, is_job_alive

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("DIGITS_FAULT_SEED", "12"))
TRAIN = [
    "--network",
    "lenet",
    "--epochs",
    "6",
    "--seed",
    "5",
    "--batch-size",
    "8",
    "--snapshot-interval",
    "1",
    "--validation-interval",
    "1",
    "--solver",
    "adam",
    "--learning-rate",
    "0.002",
    "--quiet",
]
TOKEN = "fault-token"


def wait_until(predicate, what: str, timeout: float = 240.0, proc=None):
    """Poll ``predicate`` (a bounded wait on state); fail with ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended (status {proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def digits(jobs: Path, *args: str, nice: int = 0) -> subprocess.Popen:
    """``digits ARGS`` in a child process; ``nice`` lowers its priority below the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    return subprocess.Popen(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(jobs), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        preexec_fn=(lambda: os.nice(nice)) if nice else None,
    )


def process_gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for init to reap it counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def snapshot_count(folder: Path) -> int:
    try:
        return len(json.loads((folder / "model.json").read_text())["snapshots"])
    except (OSError, ValueError, KeyError):
        return 0


def final_val(points: list[dict]) -> dict:
    last = max(p["step"] for p in points)
    return {p["name"]: p["value"] for p in points if p["step"] == last and p["name"].startswith("val_")}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core import registry
    from digits_core.datasets import create_dataset

    jobs = tmp_path_factory.mktemp("fault-jobs")
    registry.register(SyntheticShapes)
    try:
        job = create_dataset("synthetic-shapes", {"count": 96, "val_count": 32, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    return jobs, job.id


def test_training_killed_three_times_resumes_to_the_same_result(shapes):
    """kill -9 at random snapshots; each resume starts at once (no grace period) and the end matches."""
    from digits_core.engine import read_metrics, train

    jobs, dataset = shapes
    rng = random.Random(SEED)
    reference = train(
        dataset,
        "lenet",
        name="reference",
        jobs_dir=jobs,
        epochs=6,
        seed=5,
        batch_size=8,
        snapshot_interval=1,
        validation_interval=1,
        solver="adam",
        learning_rate=0.002,
    )
    existing = {j.id for j in JobStore(jobs).list(kind="model")}
    proc = digits(jobs, "train", "--dataset", dataset, "--name", "killed", *TRAIN)
    folder = wait_until(
        lambda: next((j.path for j in JobStore(jobs).list(kind="model") if j.id not in existing), None),
        "the new model job",
        proc=proc,
    )
    kills = []
    for kill in range(3):
        at = snapshot_count(folder) + rng.randint(1, 2 if kill < 2 else 1)  # a random later snapshot
        wait_until(lambda at=at: snapshot_count(folder) >= at, f"snapshot {at}", proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills.append(snapshot_count(folder))
        job = JobStore(jobs).get(folder.name)
        assert job.status is JobStatus.ABORTED and not is_job_alive(folder), (kill, job.status)
        proc = digits(jobs, "train", "--resume", folder.name)  # at once: the lock died with the process
    output = proc.communicate(timeout=300)[0]
    assert proc.returncode == 0, output
    print(f"fault seed {SEED}: killed after snapshots {kills}")
    job = JobStore(jobs).get(folder.name)
    assert job.status is JobStatus.DONE
    points = read_metrics(job)
    keys = [(p["name"], p["step"]) for p in points]
    assert len(keys) == len(set(keys)), "duplicate metric points after resume"
    epochs = [s["epoch"] for s in json.loads((folder / "model.json").read_text())["snapshots"]]
    assert epochs == sorted(set(epochs)) and epochs[-1] == 6
    ref, got = final_val(read_metrics(reference)), final_val(points)
    assert ref.keys() == got.keys() and ref
    for name in ref:
        assert got[name] == pytest.approx(ref[name], rel=1e-4, abs=1e-5), name


def _sigterm_after_snapshot(proc: subprocess.Popen, folder: Path, at: int) -> None:
    """Wait for snapshot ``at`` of ``proc``'s training, SIGTERM it: it exits non-zero, the job Aborted "SIGTERM"."""
    wait_until(lambda: snapshot_count(folder) >= at, f"snapshot {at}", proc=proc)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]  # a bounded wait: it stops at its next step
    job = Job.load(folder)
    assert job.status is JobStatus.ABORTED and "SIGTERM" in (job.error or ""), output
    assert proc.returncode != 0 and not is_job_alive(folder), output
    kept = json.loads((folder / "model.json").read_text())["snapshots"]
    assert len(kept) >= at and len(list((folder / "snapshots").glob("*.keras"))) >= at, output


@pytest.mark.parametrize("resume", [False, True], ids=["train", "train-resume"])
def test_sigterm_to_cli_training_aborts_and_keeps_a_snapshot(shapes, resume):
    jobs, dataset = shapes
    existing = {j.id for j in JobStore(jobs).list(kind="model")}
    proc = digits(jobs, "train", "--dataset", dataset, "--name", "terminated", *TRAIN)
    folder = wait_until(
        lambda: next((j.path for j in JobStore(jobs).list(kind="model") if j.id not in existing), None),
        "the new model job",
        proc=proc,
    )
    _sigterm_after_snapshot(proc, folder, 1)
    if resume:  # `digits train --resume` stops on SIGTERM too, keeping what it snapshotted (it used to linger)
        _sigterm_after_snapshot(digits(jobs, "train", "--resume", folder.name), folder, snapshot_count(folder) + 1)


def test_a_stop_signal_during_validation_ends_the_run_at_once(shapes):
    """SIGTERM while validating: the rest of the validation is not run (a stop lingered there), the job ends Aborted.

    A second signal (here while the aborted epoch is reported) stops the run where it is, still Aborted, not Running.
    """
    import keras

    from digits_core.engine import read_metrics, train

    jobs, dataset = shapes
    seen: list[int] = []

    class SignalWhileValidating(keras.callbacks.Callback):
        def on_test_batch_begin(self, batch, logs=None):
            seen.append(batch)
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, in this (the main) thread

        def on_epoch_end(self, epoch, logs=None):
            if seen:
                os.kill(os.getpid(), signal.SIGTERM)  # the second signal: a KeyboardInterrupt inside the run

    job = train(
        dataset,
        "lenet",
        name="sigterm-in-validation",
        jobs_dir=jobs,
        epochs=3,
        batch_size=8,
        validation_interval=1,
        snapshot_interval=1,
        callbacks=[SignalWhileValidating()],
    )
    assert job.status is JobStatus.ABORTED and job.error == "Aborted: received SIGTERM", job.error
    assert seen == [0]  # 4 validation batches: none ran after the signal
    assert not [p for p in read_metrics(job) if p["name"].startswith("val_")]  # no half-run validation published
    assert not is_job_alive(job.path) and JobStore(jobs).get(job.id).status is JobStatus.ABORTED


def test_a_training_stopped_because_its_server_died_says_so(tmp_path, monkeypatch):
    """The worker's parent watch notes the cause before it signals itself: the run's reason is that, not SIGTERM."""
    from digits_core import faults
    from digits_core.engine.loop import AbortSignal
    from digits_core.engine.trainer import _install_signals, _restore_signals
    from digits_core.executors.worker import server_died_cause

    abort = AbortSignal(tmp_path)
    monkeypatch.setitem(faults._STOP_CAUSE, "cause", server_died_cause(4242))
    old = _install_signals(abort)
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # what watch_parent sends once the server is gone
    finally:
        _restore_signals(old)
    assert abort.reason == server_died_cause(4242)
    assert "pid 4242" in abort.reason and "died" in abort.reason and "resume" in abort.reason


def test_sigterm_while_exporting_leaves_nothing_half_written(shapes, tmp_path):
    """``digits export`` stopped mid-build: it exits at once, no archive, no half-built export in the cache."""
    from digits_core.engine import train

    jobs, dataset = shapes
    model = train(
        dataset, "lenet", name="export-then-sigterm", jobs_dir=jobs, epochs=1, batch_size=8, validation_interval=0
    )
    before = json.loads((model.path / "job.json").read_text())
    out = tmp_path / "model.tar.gz"
    # The signal must land while the export builds (a few seconds): on a loaded machine a test process that
    # shares the CPU equally can be scheduled out for all of it, so the export runs at a lower priority.
    proc = digits(jobs, "export", "--model", model.id, "--format", "savedmodel", "--out", str(out), nice=10)
    export_dir = model.path / "export"
    wait_until(
        lambda: (
            any(p.name.startswith(".export-") and any(p.iterdir()) for p in export_dir.iterdir())
            if export_dir.is_dir()
            else False
        ),
        "the export to start building",
        proc=proc,
    )
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130 and output.strip().endswith("interrupted"), output  # as after Ctrl-C
    assert not out.exists() and not list(tmp_path.glob(".model.tar.gz.*"))  # no archive, no temporary one
    assert [p.name for p in export_dir.iterdir()] == []  # the staging folder went; nothing half-built was published
    assert json.loads((model.path / "job.json").read_text()) == before  # the model job is untouched (still Done)
    assert Job.load(model.path).status is JobStatus.DONE and not is_job_alive(model.path)


# -- a REAL digits serve ------------------------------------------------------------------


@pytest.fixture
def gate_server(live_server, sample_plugin_paths, tmp_path):
    """Start servers whose sample dataset jobs block in their worker until ``gate`` exists."""

    def start(jobs_dir, gate, **kwargs):
        return live_server(
            jobs_dir,
            pythonpath=[sample_plugin_paths["basic"]],
            env={"DIGITS_SAMPLE_GATE": str(gate)},
            auth_token=TOKEN,
            **kwargs,
        )

    return start


def blocked_job(server, gate) -> str:
    resp = server.request(
        "/api/datasets",
        method="POST",
        data={"plugin_id": "sample-numbers", "name": "blocked", "workers": 1, "form_data": {"count": 3}},
    )
    assert resp.status == 202, resp.text
    wait_until(lambda: Path(f"{gate}.waiting").exists(), "the worker to reach the gate")
    return resp.json()["id"]


def test_server_killed_twice_with_a_running_job_leaves_no_orphan(gate_server, tmp_path):
    jobs = tmp_path / "jobs"
    for round_ in range(2):
        gate = tmp_path / f"gate{round_}"
        server = gate_server(jobs, gate)
        job_id = blocked_job(server, gate)
        worker = int((jobs / job_id / "worker.pid").read_text())
        assert is_job_alive(jobs / job_id)
        assert server.kill() == -signal.SIGKILL
        # The worker notices its server is gone, stops its job and exits: the lock goes with it.
        job_dir = jobs / job_id
        wait_until(lambda job_dir=job_dir: not is_job_alive(job_dir), "the orphaned worker to release its job")
        wait_until(lambda worker=worker: process_gone(worker), "the orphaned worker to exit")
        job = Job.load(jobs / job_id)
        # What happened, not "received SIGTERM" / "by the user": the worker stopped because its server died.
        assert job.status is JobStatus.ABORTED and "server" in job.error and "died" in job.error, job.error
        assert "SIGTERM" not in job.error and "by the user" not in job.error
    restarted = gate_server(jobs, tmp_path / "gate-final")
    rows = {r["id"]: r["status"] for r in restarted.get_json("/api/jobs")}
    assert list(rows.values()) == ["Aborted", "Aborted"]
    assert restarted.stop(signal.SIGHUP) == 0, restarted.describe()


def _folder_digest(folder: Path) -> dict:
    """Every file below ``folder`` (but its lock) -> its bytes' SHA-256."""
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "job.lock"
    }


def served_row(server, job_id: str) -> dict:
    """The server's ``/api/jobs`` row of one job."""
    return next(r for r in server.get_json("/api/jobs") if r["id"] == job_id)


def test_a_served_worker_killed_by_sigkill_ends_its_job_error_naming_the_signal(gate_server, tmp_path):
    """kill -9 of a job's worker: the job ends Error "was killed by SIGKILL"; nothing else changes; serving goes on."""
    from digits_core.jobs.lock import job_lock_owner

    jobs, gate = tmp_path / "jobs", tmp_path / "gate"
    gate.touch()  # the earlier job passes the gate
    server = gate_server(jobs, gate)
    earlier = server.request(
        "/api/datasets",
        method="POST",
        data={"plugin_id": "sample-numbers", "name": "earlier", "workers": 1, "form_data": {"count": 3}},
    )
    assert earlier.status == 202, earlier.text
    earlier_id = earlier.json()["id"]
    wait_until(lambda: served_row(server, earlier_id)["status"] == "Done", "the earlier job to finish")
    wait_until(lambda: not is_job_alive(jobs / earlier_id), "the earlier job's worker to let go")
    before = _folder_digest(jobs / earlier_id)
    gate.unlink()
    Path(f"{gate}.waiting").unlink()
    job_id = blocked_job(server, gate)
    owner = wait_until(lambda: job_lock_owner(jobs / job_id), "the worker to own its job")
    worker = int(owner["pid"])
    assert worker == int((jobs / job_id / "worker.pid").read_text()) and worker != server.process.pid
    os.kill(worker, signal.SIGKILL)
    row = wait_until(
        lambda: (lambda r: r if r["status"] not in ("Waiting", "Running") else None)(served_row(server, job_id)),
        "the killed job to end",
    )
    assert row["status"] == "Error" and "was killed by SIGKILL" in (row["error"] or ""), row
    job = Job.load(jobs / job_id)
    assert job.status is JobStatus.ERROR and "was killed by SIGKILL" in job.error and not is_job_alive(jobs / job_id)
    assert process_gone(worker)
    # Nothing of the earlier job changed; the server still answers, and still runs jobs.
    assert _folder_digest(jobs / earlier_id) == before
    assert served_row(server, earlier_id)["status"] == "Done"
    assert server.get("/").status == 200 and server.process.poll() is None
    gate.touch()
    after = server.request(
        "/api/datasets",
        method="POST",
        data={"plugin_id": "sample-numbers", "name": "after", "workers": 1, "form_data": {"count": 3}},
    )
    assert after.status == 202, after.text
    wait_until(lambda: served_row(server, after.json()["id"])["status"] == "Done", "a later job to finish")
    assert server.stop() == 0, server.describe()


def test_rebinding_origin_and_data_roots_on_a_real_server(live_server, tmp_path):
    (tmp_path / "outside").mkdir()
    root = tmp_path / "root"
    (root / "c0").mkdir(parents=True)
    server = live_server(tmp_path / "jobs", extra_args=["--data-root", str(root)])
    for path in ("/", "/api/csrf-token", "/index.json"):
        resp = server.get(path, headers={"Host": f"evil.example:{server.port}"})
        assert resp.status == 400, (path, resp.status)
        assert resp.headers["x-frame-options"] == "DENY"
    csrf_page = server.get("/api/csrf-token")
    token = csrf_page.json()["csrf_token"]
    cookie = csrf_page.headers.get("set-cookie", "").split(";", 1)[0]
    attack = {"name": "x", "dataset": "none", "custom_network": "open('/tmp/pwned', 'w')"}
    evil = server.request(
        "/api/models",
        method="POST",
        data=attack,
        headers={"Host": f"evil.example:{server.port}", "X-CSRFToken": token, "Cookie": cookie},
    )
    assert evil.status == 400
    cross = server.request(
        "/api/models",
        method="POST",
        data=attack,
        headers={"Origin": "http://evil.example", "X-CSRFToken": token, "Cookie": cookie},
    )
    assert cross.status == 403
    outside = server.request(
        "/api/datasets",
        method="POST",
        data={
            "plugin_id": "image-classification",
            "name": "d",
            "form_data": {"folder": str(tmp_path / "outside"), "width": 8, "height": 8},
        },
        headers={"X-CSRFToken": token, "Cookie": cookie},
    )
    assert outside.status == 400 and "folder" in outside.text and str(root) in outside.text, outside.text
    assert server.get_json("/api/jobs") == []
    headers = server.get("/").headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def test_two_writers_a_server_never_takes_over_a_live_job(live_server, tmp_path):
    """`digits train` from a shell owns a job; the server must neither abort nor resume it."""
    jobs = tmp_path / "jobs"
    job = Job.create("model", "shell run", jobs_dir=jobs, dataset_id="none")
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-001.keras").write_bytes(b"")  # something to resume from (engine naming)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(job.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout.readline().strip() == "owned"
        server = live_server(jobs)
        assert server.get_json("/api/jobs")[0]["status"] == "Running"  # not marked Aborted at start-up
        token = server.get("/api/csrf-token")
        headers = {
            "X-CSRFToken": token.json()["csrf_token"],
            "Cookie": token.headers.get("set-cookie", "").split(";", 1)[0],
        }
        resume = server.request(f"/api/jobs/{job.id}/resume", method="POST", data={}, headers=headers)
        assert resume.status == 400 and f"pid {owner.pid}" in resume.text, resume.text
        delete = server.request(f"/api/jobs/{job.id}", method="DELETE", headers=headers)
        assert delete.status == 400 and job.path.is_dir(), delete.text
        abort = server.request(f"/api/jobs/{job.id}/abort", method="POST", data={}, headers=headers)
        assert abort.status == 200 and (job.path / "abort").exists()  # asked the owner to stop
        owner.kill()
        owner.wait()
        rows = server.get_json("/api/jobs")
        assert rows[0]["status"] == "Aborted"  # the owner died: no 120 s grace period
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


# -- SIGTERM to a real digits serve while its worker trains or exports ----------------------------

SERVED_EPOCHS = 300  # far more than can run between the first snapshot and the signal: the stop must cut it short


def _served_copy_of(shapes, tmp_path: Path) -> tuple[Path, str]:
    """A jobs folder of this test's own holding a copy of the module's dataset (its server owns no other job)."""
    import shutil

    source, dataset = shapes
    jobs = tmp_path / "jobs"
    shutil.copytree(source / dataset, jobs / dataset, ignore=shutil.ignore_patterns("job.lock"))
    return jobs, dataset


def _snapshot_digest(folder: Path) -> dict:
    """The snapshots ``model.json`` lists -> their files' SHA-256 (what a resume would start from)."""
    import hashlib

    snaps = json.loads((folder / "model.json").read_text())["snapshots"]
    files = [folder / "snapshots" / s[key] for s in snaps for key in ("file", "state")]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_sigterm_to_serve_while_its_worker_trains_stops_both_and_aborts_the_job(live_server, shapes, tmp_path):
    """The server stops with its training worker; the job ends Aborted "SIGTERM" long before its last epoch."""
    from digits_core.engine import read_metrics
    from digits_core.jobs.lock import job_lock_owner

    jobs, dataset = _served_copy_of(shapes, tmp_path)
    server = live_server(jobs, auth_token=TOKEN)
    resp = server.request(
        "/api/models",
        method="POST",
        data={
            "name": "served then sigterm",
            "dataset": dataset,
            "network": "lenet",
            "options": {"epochs": SERVED_EPOCHS, "batch_size": 8, "seed": 5, "snapshot_interval": 1},
        },
    )
    assert resp.status in (200, 201, 202), resp.text
    folder = jobs / resp.json()["id"]
    wait_until(lambda: snapshot_count(folder) >= 1, "the served training's first snapshot", proc=server.process)
    assert served_row(server, folder.name)["status"] == "Running"
    worker = int(job_lock_owner(folder)["pid"])
    assert worker != server.process.pid and not process_gone(worker)
    snapshots, metrics = _snapshot_digest(folder), (folder / "metrics.jsonl").read_text().splitlines()
    assert metrics, "no metric point before the signal"

    assert server.stop(signal.SIGTERM, timeout=120) == 0, server.describe()
    wait_until(lambda: process_gone(worker), "the training worker to exit", timeout=120)
    assert not is_job_alive(folder)
    job = Job.load(folder)
    assert job.status is JobStatus.ABORTED and "SIGTERM" in (job.error or ""), (job.status, job.error)
    # What was written before the signal is intact; the run ended far below its last epoch.
    assert {k: v for k, v in _snapshot_digest(folder).items() if k in snapshots} == snapshots
    assert (folder / "metrics.jsonl").read_text().splitlines()[: len(metrics)] == metrics
    assert max(p["epoch"] for p in read_metrics(job)) < SERVED_EPOCHS / 2
    assert not list((folder / "snapshots").glob(".tmp-*"))  # no half-written snapshot


def _export_workers(server_pid: int) -> list[int]:
    """The pids of ``digits_core.web.worker_calls export`` processes the server ``server_pid`` started."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if int(stat[1]) == server_pid and b"digits_core.web.worker_calls" in args and b"export" in args:
            found.append(int(proc.name))
    return found


def test_sigterm_to_serve_while_its_worker_exports_stops_both_leaving_nothing_half_written(
    live_server, shapes, tmp_path
):
    """The model page's Export caught mid-build: server and export worker exit; no staging folder, no archive."""
    import threading

    from digits_core.engine import train

    jobs, dataset = _served_copy_of(shapes, tmp_path)
    model = train(dataset, "lenet", name="served export", jobs_dir=jobs, epochs=1, batch_size=8, validation_interval=0)
    before = json.loads((model.path / "job.json").read_text())
    server = live_server(jobs, auth_token=TOKEN)
    answers: list = []

    def post_export():  # blocks until the export ends; here the server goes away first
        try:
            answers.append(
                server.request(
                    f"/models/{model.id}/export",
                    method="POST",
                    data=b"format=savedmodel",
                    headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
                    timeout=600,
                )
            )
        except OSError as exc:  # the connection closed with the server
            answers.append(exc)

    poster = threading.Thread(target=post_export, daemon=True)
    poster.start()
    export_dir = model.path / "export"
    wait_until(
        lambda: (
            export_dir.is_dir()
            and any(p.name.startswith(".export-") and any(p.iterdir()) for p in export_dir.iterdir())
        ),
        "the served export to start building",
        proc=server.process,
    )
    workers = _export_workers(server.process.pid)
    assert len(workers) == 1, workers

    assert server.stop(signal.SIGTERM, timeout=120) == 0, server.describe()
    wait_until(lambda: process_gone(workers[0]), "the export worker to exit", timeout=120)
    poster.join(120)
    assert answers, "the export request never ended"
    left = sorted(p.name for p in export_dir.iterdir())
    if isinstance(answers[0], OSError) or answers[0].status != 200:  # stopped mid-way: no export came back
        assert left == [], left  # no staging folder, no archive, nothing published (not even after the server)
    else:  # on a busy machine the build can end between the staging check and the signal: then it is whole
        assert left and not any(name.startswith(".export-") for name in left), left
        assert answers[0].json()["parity"]["passed"] is True, answers[0].text
    assert json.loads((model.path / "job.json").read_text()) == before  # the model job is untouched (still Done)
    assert Job.load(model.path).status is JobStatus.DONE and not is_job_alive(model.path)
