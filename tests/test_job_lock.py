"""One owner per job: the OS lock in the job folder decides whether a job is alive.

The owner here is a real second process (no TensorFlow): it marks a job
Running, which takes the job lock, then waits. ``kill -9`` of that process
must make the job resumable and show it Aborted at once, with no grace period.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import pytest

from digits_core import Job, JobStatus
from digits_core.jobs import JobLock, JobLockedError, JobStore, is_job_alive, job_lock_owner
from digits_core.scheduler import EXIT_JOB_LOCKED, Scheduler, run_job

OWNER = """
import sys
from digits_core.jobs import Job
job = Job.load(sys.argv[1])
job.set_status("Running")
print("owned", flush=True)
sys.stdin.read()  # hold the job until killed or stdin closes
job.set_status("Done")
"""


@pytest.fixture(autouse=True)
def _short_lock_wait(monkeypatch):
    monkeypatch.setattr("digits_core.jobs.lock.LOCK_PROBE_WAIT_S", 0.2)


@pytest.fixture
def owner_process():
    """Start a process that owns a job (status Running, lock held) until killed."""
    procs = []

    def start(job: Job) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", OWNER, str(job.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "owned"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_lock_follows_the_owner_process_and_dies_with_it(tmp_path, owner_process):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    assert not is_job_alive(job.path)
    proc = owner_process(job)
    assert is_job_alive(job.path) and job.is_alive
    owner = job_lock_owner(job.path)
    assert owner["pid"] == proc.pid and owner["host"] == socket.gethostname() and owner["started"] > 0
    # A second writer is refused, naming the owner.
    with pytest.raises(JobLockedError, match=f"pid {proc.pid}"):
        Job.load(job.path).set_status(JobStatus.RUNNING)
    with pytest.raises(JobLockedError):
        JobLock(job.path).acquire(wait=0.2)
    # Listing never marks a live owner's job Aborted.
    assert JobStore(tmp_path).get(job.id).status is JobStatus.RUNNING
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # No grace period: the kernel released the lock with the process.
    assert not is_job_alive(job.path) and job_lock_owner(job.path) is None
    listed = JobStore(tmp_path).list()[0]
    assert listed.status is JobStatus.ABORTED and "ended without finishing" in listed.error
    with JobLock(job.path):  # and the job can be taken over at once
        assert is_job_alive(job.path)


def test_clean_finish_releases_the_lock(tmp_path, owner_process):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    proc = owner_process(job)
    proc.stdin.close()
    assert proc.wait() == 0
    assert not is_job_alive(job.path) and job.reload().status is JobStatus.DONE
    assert (job.path / "job.lock").read_text() == ""  # no stale owner left in the file


def test_in_process_owner_and_reentrancy(tmp_path):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    with job.acquire_lock():
        job.set_status(JobStatus.RUNNING)  # re-entrant: the same process may mark it Running
        with JobLock(job.path):
            pass
        assert is_job_alive(job.path)
        assert JobStore(tmp_path).get(job.id).status is JobStatus.RUNNING
        job.set_status(JobStatus.DONE)
        assert is_job_alive(job.path), "the outer hold still owns the job"
    assert not is_job_alive(job.path)
    job.resume(JobStatus.RUNNING)  # a finished job works again only through an explicit resume
    assert is_job_alive(job.path)
    job.set_status(JobStatus.ABORTED)
    assert not is_job_alive(job.path)


def test_running_without_an_owner_is_shown_aborted(tmp_path):
    """A job.json left Running by a process that died (or an older version) reads as Aborted."""
    job = Job.create("dataset", "d", jobs_dir=tmp_path)
    job.data["status_history"].append(["Running", 0])
    job.save()
    assert JobStore(tmp_path).list(reap=False)[0].status is JobStatus.RUNNING
    assert JobStore(tmp_path).get(job.id).status is JobStatus.ABORTED


CREATOR = """
import sys
from digits_core.jobs import Job
job = Job.create("dataset", "cli job", jobs_dir=sys.argv[1], hold=True)
print(job.id, flush=True)
sys.stdin.read()  # killed before its run starts
"""


def test_a_job_owned_from_creation_and_killed_before_running_is_shown_aborted(tmp_path):
    """`digits dataset create` killed between creating its job and starting it: Aborted, not Initialized forever."""
    queued = Job.create("dataset", "queued by the web UI", jobs_dir=tmp_path)  # no owner until a worker runs it
    proc = subprocess.Popen(
        [sys.executable, "-c", CREATOR, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        job_id = proc.stdout.readline().strip()
        assert JobStore(tmp_path).get(job_id).status is JobStatus.INITIALIZED  # its creator lives
        assert is_job_alive(tmp_path / job_id)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    statuses = {job.id: job.status for job in JobStore(tmp_path).list()}
    assert statuses == {job_id: JobStatus.ABORTED, queued.id: JobStatus.INITIALIZED}


def test_scheduler_leaves_a_live_owner_alone_and_worker_refuses_it(tmp_path, owner_process):
    """Two writers: `digits train` from a shell owns the job; a server start and Resume must not touch it."""
    live = Job.create("model", "cli run", jobs_dir=tmp_path)
    dead = Job.create("model", "killed run", jobs_dir=tmp_path)
    proc = owner_process(live)
    dead_proc = owner_process(dead)
    dead_proc.kill()
    dead_proc.wait()
    scheduler = Scheduler(tmp_path)
    result = scheduler.recover()
    assert result["alive"] == [live.id] and result["aborted"] == [dead.id]
    assert live.reload().status is JobStatus.RUNNING and dead.reload().status is JobStatus.ABORTED
    with pytest.raises(JobLockedError):
        scheduler.resume(live)
    # A worker started on it anyway writes nothing and says so by its exit status.
    before = json.loads((live.path / "job.json").read_text())
    assert run_job(live.path) == EXIT_JOB_LOCKED
    assert json.loads((live.path / "job.json").read_text()) == before
    assert proc.poll() is None


def test_worker_stops_when_its_server_dies(tmp_path):
    """kill -9 of the server: its worker notices the new parent and stops (no orphan)."""
    code = (
        "import os, signal, sys, time\n"
        "from digits_core.scheduler import watch_parent\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('stopping', flush=True), sys.exit(0)))\n"
        "watch_parent(int(sys.argv[1]), interval=0.05, grace=5)\n"
        "print('watching', flush=True)\n"
        "time.sleep(60)\n"
    )
    # A middle process plays the server: it starts the worker, prints the worker's pid, and is killed.
    middle = (
        "import os, subprocess, sys, time\n"
        "w = subprocess.Popen([sys.executable, '-c', sys.argv[1], str(os.getpid())], stdout=sys.stdout)\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    server = subprocess.Popen([sys.executable, "-c", middle, code], stdout=subprocess.PIPE, text=True)
    worker_pid = int(server.stdout.readline())
    assert server.stdout.readline().strip() == "watching"
    server.send_signal(signal.SIGKILL)
    server.wait()
    assert server.stdout.readline().strip() == "stopping"  # blocks until the orphan reacts
    # EOF on the pipe: the worker, its last writer, has exited.
    assert server.stdout.read() == ""
    assert worker_pid > 0


@pytest.mark.slow
def test_cli_lists_show_a_dead_owners_job_as_aborted(tmp_path, owner_process, digits_cli):
    dataset = Job.create("dataset", "d", jobs_dir=tmp_path)
    model = Job.create("model", "m", jobs_dir=tmp_path)
    owners = [owner_process(dataset), owner_process(model)]
    listed = json.loads(digits_cli("--jobs-dir", str(tmp_path), "dataset", "list", "--json").stdout)
    assert listed[0]["status"] == "Running"
    for proc in owners:
        proc.kill()
        proc.wait()
    for kind in ("dataset", "model"):
        result = digits_cli("--jobs-dir", str(tmp_path), kind, "list", "--json")
        assert json.loads(result.stdout)[0]["status"] == "Aborted", result.stdout
