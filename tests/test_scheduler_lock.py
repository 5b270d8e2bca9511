"""One scheduler per jobs folder; resume only from Aborted/Error.

A second server on the same jobs folder once took a Waiting job of the
first, started a worker for it and marked it Aborted when it exited. Now it
refuses to start, naming the first, before it touches any job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from digits_core.errors import JobStateError
from digits_core.executors import scheduler_lock
from digits_core.jobs import Job, JobStatus
from digits_core.scheduler import Scheduler

TAKE_LOCK = "import sys; from digits_core.executors import scheduler_lock as s; s.acquire(sys.argv[1]); print('held')"


def _waiting_job(jobs):
    job = Job.create("dataset", "theirs", jobs_dir=jobs)
    job.set_status(JobStatus.WAITING)
    return job


def test_a_second_process_cannot_schedule_the_same_folder(tmp_path):
    jobs = tmp_path / "jobs"
    first = Scheduler(jobs, poll_interval=0.05).start()
    try:
        job = _waiting_job(jobs)
        second = subprocess.run(
            [sys.executable, "-c", TAKE_LOCK, str(jobs)], capture_output=True, text=True, timeout=60
        )
        assert second.returncode != 0 and "held" not in second.stdout
        assert "Another DIGITS server already schedules the jobs" in second.stderr
        assert f"process {os.getpid()}" in second.stderr  # names the first
        holder = json.loads((jobs / scheduler_lock.LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
        assert Scheduler(jobs).start().shutdown() is None  # within one process the lock is shared
    finally:
        first.shutdown()
    assert job.path.exists()
    # Once the first is gone (its lock dies with it), another process may take over.
    taken = subprocess.run([sys.executable, "-c", TAKE_LOCK, str(jobs)], capture_output=True, text=True, timeout=60)
    assert taken.returncode == 0 and "held" in taken.stdout


def test_the_second_server_refuses_before_it_touches_any_job(tmp_path):
    """`digits serve` on a folder another process schedules: exits with the reason, the Waiting job untouched."""
    jobs = tmp_path / "jobs"
    key = scheduler_lock.acquire(jobs)
    try:
        job = _waiting_job(jobs)
        before = (job.path / "job.json").read_bytes()
        env = {**os.environ, "DIGITS_JOBS_DIR": str(jobs)}
        result = subprocess.run(
            [sys.executable, "-m", "digits_core", "--jobs-dir", str(jobs), "serve", "--port", "1"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )
        assert result.returncode != 0
        assert "Another DIGITS server already schedules the jobs" in result.stderr, result.stderr[-2000:]
        assert (job.path / "job.json").read_bytes() == before
        assert job.reload().status is JobStatus.WAITING
    finally:
        scheduler_lock.release(key)


def test_resume_is_only_for_aborted_or_error_jobs(tmp_path):
    scheduler = Scheduler(tmp_path / "jobs")
    job = Job.create("model", "m", jobs_dir=tmp_path / "jobs")
    job.set_status(JobStatus.DONE)
    with pytest.raises(JobStateError, match="only an Aborted or Error job can be resumed"):
        scheduler.resume(job)
    assert job.reload().status is JobStatus.DONE
