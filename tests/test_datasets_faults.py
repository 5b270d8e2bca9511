"""Fault injection on `digits dataset create` (issue 12): kill -9 at random points, SIGTERM, worker crashes.

Each run is a real `digits dataset create` process (the CLI entry point, 2 worker
processes) with a small synthetic plugin registered in the child script.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from digits_core.datasets import open_dataset

CHILD = textwrap.dedent("""
    import os, sys, time, ctypes, wtforms
    import numpy as np
    from digits_core import DataIngestion, registry
    from digits_core.cli import main

    class Form(wtforms.Form):
        n = wtforms.IntegerField("n", default=1200)
        crash_at = wtforms.IntegerField("crash at", default=-1)

    class Slow(DataIngestion):
        plugin_id = "test-slow"
        @staticmethod
        def get_dataset_form():
            return Form
        @staticmethod
        def get_dataset_template(form):
            return "", {}
        def itemize_entries(self, stage):
            n = self.n if stage == "train" else self.n // 5 if stage == "val" else 0
            return [f"item-{stage}-{i}" for i in range(n)]
        def encode_entry(self, entry):
            i = int(entry.rsplit("-", 1)[1])
            if i == self.crash_at:
                ctypes.string_at(0)  # a segfault in "native code"
            time.sleep(0.0005)
            return np.full((8, 8, 1), i % 256, np.uint8), i % 3

    registry.register(Slow)
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture
def child(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    jobs = tmp_path / "jobs"

    def start(*extra: str) -> subprocess.Popen:
        cmd = [
            sys.executable,
            str(script),
            "--jobs-dir",
            str(jobs),
            "dataset",
            "create",
            "test-slow",
            "--workers",
            "2",
            "--quiet",
            *extra,
        ]
        return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    start.jobs = jobs
    return start


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes of session ``sid``: the command and every worker it started."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        state, session = fields[0], int(fields[3])
        if session == sid and state != "Z":
            members.append(int(entry.name))
    return members


def wait_until(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def progress_done(jobs: Path) -> int:
    for path in jobs.glob("*/progress.json"):
        try:
            return json.loads(path.read_text())["done"]
        except (OSError, ValueError, KeyError):
            return 0
    return 0


def check_nothing_half_published(jobs: Path) -> None:
    for job in jobs.iterdir():
        published = job / "dataset"
        if published.exists():  # complete, or not there at all
            ds = open_dataset(published)
            assert (ds.count("train"), ds.count("val")) == (1200, 240)


def kill_group(proc: subprocess.Popen) -> None:
    """Leave nothing behind, even when the test failed (orphans keep the process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.mark.slow
def test_kill_9_at_random_points_never_half_publishes_nor_orphans_workers(child):
    jobs = child.jobs
    t0 = time.monotonic()
    proc = child()
    assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()
    duration = time.monotonic() - t0
    rng = random.Random(12)
    points = [(i + rng.random()) / 10 * duration for i in range(10)]  # spread over start-up, encoding, publish
    for delay in points:
        proc = child()
        try:
            time.sleep(delay)  # the injection point, not a synchronisation
            os.kill(proc.pid, signal.SIGKILL)  # the command only: its workers must follow it
            proc.wait(timeout=30)
            wait_until(lambda: not session_members(proc.pid), f"the workers of pid {proc.pid} to die")
        finally:
            kill_group(proc)
        check_nothing_half_published(jobs)
    # One kill certainly mid-encoding, whatever the random points hit on this machine: a big job, killed
    # once its progress shows encoded entries.
    earlier = set(jobs.iterdir())
    proc = child("--n", "40000")
    try:
        wait_until(
            lambda: any(
                json.loads(p.read_text()).get("done", 0) > 0
                for p in jobs.glob("*/progress.json")
                if p.parent not in earlier
            ),
            "the big job to encode entries",
            timeout=120,
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        wait_until(lambda: not session_members(proc.pid), f"the workers of pid {proc.pid} to die")
    finally:
        kill_group(proc)
    check_nothing_half_published(jobs)
    listing = subprocess.run(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(jobs), "dataset", "list", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    statuses = {job["status"] for job in json.loads(listing.stdout)}
    assert "Running" not in statuses and statuses <= {"Done", "Aborted"}, statuses
    assert "Aborted" in statuses  # the big job at least was killed while running
    assert not list(jobs.glob("*/.building-*")), "the next dataset command removes stale build folders"


@pytest.mark.slow
def test_sigterm_aborts_the_job_and_stops_every_worker(child):
    proc = child()
    try:
        wait_until(lambda: progress_done(child.jobs) > 0 or proc.poll() is not None, "the first records")
        assert proc.poll() is None, proc.stderr.read().decode()
        os.kill(proc.pid, signal.SIGTERM)  # as `timeout` and systemd send it: to the command only
        assert proc.wait(timeout=30) == 130
        wait_until(lambda: not session_members(proc.pid), "every worker to stop")
    finally:
        kill_group(proc)
    (job,) = [json.loads(p.read_text()) for p in child.jobs.glob("*/job.json")]
    assert job["status_history"][-1][0] == "Aborted"
    (folder,) = list(child.jobs.iterdir())
    assert not (folder / "dataset").exists() and not list(folder.glob(".building-*"))


@pytest.mark.slow
def test_a_worker_crash_names_the_entry(child):
    proc = child("--crash-at", "300")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert 'died while encoding entry "item-train-300" (stage "train") (killed by SIGSEGV)' in err.decode()
    (folder,) = list(child.jobs.iterdir())
    assert json.loads((folder / "job.json").read_text())["status_history"][-1][0] == "Error"
    assert not (folder / "dataset").exists() and not list(folder.glob(".building-*"))


def test_stale_build_folders_go_only_when_their_owner_is_dead(tmp_path):
    from digits_core.datasets.publish import remove_stale_builds
    from digits_core.jobs import Job, JobLock

    dead = Job.create("dataset", "dead", jobs_dir=tmp_path)
    live = Job.create("dataset", "live", jobs_dir=tmp_path)
    for job in (dead, live):
        (job.path / ".building-0123abcd" / "train").mkdir(parents=True)
    with JobLock(live.path):  # this process is building `live` right now
        assert remove_stale_builds(tmp_path) == 1
        assert list(live.path.glob(".building-*")) and not list(dead.path.glob(".building-*"))
    assert remove_stale_builds(tmp_path) == 1 and not list(tmp_path.glob("*/.building-*"))


def test_server_start_removes_the_build_folders_of_killed_jobs(tmp_path):
    from digits_core.jobs import Job
    from digits_core.scheduler import Scheduler

    job = Job.create("dataset", "killed", jobs_dir=tmp_path)
    (job.path / ".building-0123abcd").mkdir()
    Scheduler(tmp_path).recover()
    assert not list(job.path.glob(".building-*"))
