"""Sweeps side by side and sweeps whose server died (issue 39, finding 4).

Two sweeps posted at the same moment share one Ray of the server process (the second used to end
``AssertionError: Perhaps you called ray.init twice by accident?``, and the first to finish shut Ray
down under the other). A sweep's record that says Running while no process holds the sweep folder's
lock (its server was killed with ``kill -9``) reads Aborted, naming the process, on the next page or
listing. The real sweeps run on Ray on 127.0.0.1 (tiny data, 2 trials of 1 epoch each: slow).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from digits_core.jobs import JobStatus


def test_a_sweep_whose_process_was_killed_reads_aborted_and_names_that_process(app, client):
    from test_tune import fake_sweep

    from digits_core.jobs.lock import JobLockedError
    from digits_core.sweeps.tune import resume_sweep

    jobs = app.extensions["digits"]["jobs_dir"]
    fake_sweep(jobs, {0.1: [0.5], 0.01: [0.4]}, {0.01: JobStatus.ABORTED})
    folder = jobs / ".sweeps" / "s1"
    # A real driver process: it takes the sweep's lock and marks it Running, as digits_core.sweeps.tune.tune does.
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from digits_core.jobs.lock import JobLock\n"
            "from digits_core.sweeps.record import update_sweep_record\n"
            f"JobLock({str(folder)!r}).acquire()\n"
            f"update_sweep_record({str(folder)!r}, status='Running')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert driver.stdout.readline().strip() == "ready"
        assert client.get("/sweeps/s1.json").get_json()["status"] == "Running"  # alive: left alone
        with pytest.raises(JobLockedError, match=f"pid {driver.pid}"):
            resume_sweep("s1", jobs)  # its trial is Aborted, but the sweep still has its live driver
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    summary = client.get("/sweeps/s1.json").get_json()
    assert summary["status"] == "Aborted"
    assert f"pid {driver.pid}" in summary["error"] and "resume" in summary["error"]
    assert client.get("/sweeps/s1.json").get_json()["status"] == "Aborted"  # written once, stays so


def test_a_running_sweep_of_this_process_is_not_reaped(app, client):
    from test_tune import fake_sweep

    from digits_core.jobs.lock import JobLock
    from digits_core.sweeps.record import update_sweep_record

    jobs = app.extensions["digits"]["jobs_dir"]
    fake_sweep(jobs, {0.1: [0.5]}, {})
    folder = jobs / ".sweeps" / "s1"
    with JobLock(folder):
        update_sweep_record(folder, status="Running")
        assert client.get("/sweeps/s1.json").get_json()["status"] == "Running"
    assert client.get("/sweeps/s1.json").get_json()["status"] == "Aborted"  # its process let go while Running


@pytest.mark.slow
def test_ray_started_from_a_sweeps_thread_outlives_that_thread():
    """Ray's GCS server dies with the *thread* that started it (``PR_SET_PDEATHSIG``), not with the process.

    A sweep runs in a thread of the server; when the sweep that started Ray ended first, the sweeps beside it
    lost Ray's GCS and, 60 s later, Ray ended the whole process with status 1 (the server, or CI's test run).
    Here the starting thread ends before anything uses Ray: a task must still run, and the last user stops Ray.
    """
    script = textwrap.dedent(
        """
        import threading
        import time

        from digits_core.sweeps.trials import _release_ray, _start_ray

        sweep = threading.Thread(target=_start_ray, args=(None,), name="tune-first")
        sweep.start()
        sweep.join()  # that sweep's thread is gone; Ray must not be
        time.sleep(2)
        import ray

        @ray.remote
        def answer():
            return 42

        print("answer", ray.get(answer.remote(), timeout=45), flush=True)
        _release_ray()
        print("initialized", ray.is_initialized(), flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "answer 42" in done.stdout and "initialized False" in done.stdout, done.stdout


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core import registry
    from digits_core.datasets import create_dataset

    root = tmp_path_factory.mktemp("side-by-side")
    registry.register(SyntheticShapes)
    try:
        dataset = create_dataset(
            "synthetic-shapes",
            {"count": 48, "val_count": 16, "size": 16, "classes": 3},
            workers=1,
            jobs_dir=root / "jobs",
        )
    finally:
        registry.unregister(SyntheticShapes)
    return {"root": root, "jobs": root / "jobs", "dataset": dataset.id}


@pytest.mark.slow
def test_two_sweeps_posted_at_once_both_finish_on_one_ray_which_stops_after_the_last(shapes):
    import ray

    from digits_core.web import create_app

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    assert not ray.is_initialized()
    app = create_app(shapes["jobs"], start_scheduler=False, testing=True, data_roots=[shapes["root"]])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    answers: dict[str, object] = {}

    def post(name: str, rates: str) -> None:
        answers[name] = client.post(
            "/api/sweeps",
            json={
                "dataset": shapes["dataset"],
                "network": "lenet",
                "name": name,
                "search": [f"learning_rate={rates}"],
                "scheduler": "grid",
                "max_epochs": 1,
                "max_concurrent": 1,
                "options": {"batch_size": 16, "lr_policy": "fixed"},
            },
            headers={"X-CSRFToken": token},
        )

    posts = [
        threading.Thread(target=post, args=("first", "0.01,0.02")),
        threading.Thread(target=post, args=("second", "0.03,0.04")),
    ]
    for thread in posts:
        thread.start()
    for thread in posts:
        thread.join()
    ids = []
    for name in ("first", "second"):
        answer = answers[name]
        assert answer.status_code == 202, answer.get_data(as_text=True)
        ids.append(answer.get_json()["id"])
    handles = app.extensions["digits"]["sweeps"]
    for sweep_id in ids:
        summary = handles[sweep_id].wait(timeout=500)
        assert summary["status"] == "Done", summary.get("error")
        assert len(summary["trials"]) == 2 and {row["status"] for row in summary["trials"]} == {"Done"}
    store = app.extensions["digits"]["store"]
    assert sum(job.status is JobStatus.DONE for job in store.list("model")) == 4
    assert not ray.is_initialized()  # the last sweep to finish shut down the Ray the server started
