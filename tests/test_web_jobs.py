"""Web UI + scheduler with real worker processes: dataset jobs end to end (no TensorFlow)."""

from __future__ import annotations

import os
import time

import pytest

from digits_core import registry
from digits_core.jobs import Job, JobStatus
from digits_core.scheduler import ProcessWorker, Scheduler
from digits_core.web import create_app


@pytest.fixture
def sample_plugin(sample_plugin_paths, monkeypatch):
    """The pip-installed sample plugin, visible here and in worker processes."""
    path = str(sample_plugin_paths["basic"])
    monkeypatch.syspath_prepend(path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
    registry.reload()
    assert "sample-numbers" in registry.data_ingestions()
    yield
    monkeypatch.undo()
    registry.reload()


@pytest.fixture
def app(tmp_path, sample_plugin):
    app = create_app(tmp_path / "jobs", testing=True, max_dataset_jobs=2)
    app.extensions["digits"]["scheduler"].poll_interval = 0.1
    yield app
    app.extensions["digits"]["scheduler"].shutdown()


def token(client):
    return client.get("/api/csrf-token").get_json()["csrf_token"]


def wait_done(app, job_id, timeout=60):
    return app.extensions["digits"]["scheduler"].wait(job_id, timeout)


def test_new_dataset_page_creates_job_in_worker(app):
    client = app.test_client()
    page = client.get("/datasets/new/sample-numbers")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and 'name="count"' in html and 'name="job_name"' in html
    assert "Sample numbers" in client.get("/").get_data(as_text=True)  # New dataset menu
    resp = client.post(
        "/datasets/new/sample-numbers",
        data={"csrf_token": token(client), "count": "6", "job_name": "nums <i>", "job_workers": "1"},
    )
    assert resp.status_code == 302
    job_id = resp.headers["Location"].rsplit("/", 1)[1]
    job = wait_done(app, job_id)
    assert job.status is JobStatus.DONE, (job.error, (job.path / "worker.log").read_text())
    assert job.data["form_data"] == {"count": 6}
    html = client.get(f"/datasets/{job_id}").get_data(as_text=True)
    assert "nums &lt;i&gt;" in html and "Done" in html and "even" in html and "odd" in html
    data = client.get(f"/datasets/{job_id}.json").get_json()
    assert (
        data["info"]["stages"]["train"]["count"] + data["info"]["stages"].get("val", {}).get("count", 0) == 6
        or data["info"]["stages"]["train"]["count"] == 6
    )
    assert data["progress"]["status"] == "Done"
    gallery = client.get(f"/datasets/{job_id}/explore?stage=train&per_page=4&format=json").get_json()
    assert gallery["count"] >= 4 and len(gallery["items"]) == 4
    assert gallery["items"][0]["image"].startswith("data:image/png;base64,")
    assert gallery["items"][0]["label"] in ("even", "odd")
    assert client.get(f"/datasets/{job_id}/explore?stage=nope").status_code == 400
    explore_html = client.get(f"/datasets/{job_id}/explore").get_data(as_text=True)
    assert explore_html.count('class="sample"') >= 4
    # Clone: the form comes back pre-filled.
    clone = client.get(f"/datasets/new/sample-numbers?clone={job_id}").get_data(as_text=True)
    assert 'value="6"' in clone and "nums &lt;i&gt; (clone)" in clone


def test_dataset_form_errors_next_to_fields(app):
    client = app.test_client()
    resp = client.post(
        "/datasets/new/sample-numbers",
        data={"csrf_token": token(client), "count": "0", "job_name": "", "job_max_errors": "lots"},
    )
    assert resp.status_code == 200  # the form again, with its errors (a 400 page logs a console error)
    html = resp.get_data(as_text=True)
    assert 'data-for="job_max_errors"' in html  # our field, rendered by our macro
    assert 'data-for="job_name"' not in html  # an empty name means the plugin id, as on the command line
    assert "Number must be between 1 and 1000" in html  # the plugin's field error (summary + placed by JS)
    assert '"count"' in html  # data-errors JSON for the JS placement
    assert app.extensions["digits"]["store"].list() == []


def test_api_create_dataset_and_errors(app):
    client = app.test_client()
    headers = {"X-CSRFToken": token(client)}
    bad = client.post(
        "/api/datasets", json={"plugin_id": "sample-numbers", "name": "n", "form_data": {"count": "x"}}, headers=headers
    )
    assert bad.status_code == 400 and "count" in bad.get_json()["error"]["fields"]
    resp = client.post(
        "/api/datasets",
        json={"plugin_id": "sample-numbers", "name": "api", "workers": 1, "form_data": {"count": 3}},
        headers=headers,
    )
    assert resp.status_code == 202
    job = wait_done(app, resp.get_json()["id"])
    assert job.status is JobStatus.DONE
    assert client.get("/api/scheduler").get_json()["max_dataset_jobs"] == 2


def test_scheduler_limits_abort_and_recovery(tmp_path, sample_plugin):
    jobs = tmp_path / "jobs"
    # A job left Running by a dead server becomes Aborted; a Waiting one is queued again.
    stale = Job.create("model", "stale", jobs_dir=jobs)
    stale.data["status_history"].append(["Running", time.time()])  # its owner (the job lock's holder) is gone
    stale.save()
    waiting = Job.create("dataset", "w", jobs_dir=jobs, plugin_id="sample-numbers", form_data={"count": 2})
    waiting.set_status(JobStatus.WAITING)
    scheduler = Scheduler(jobs, max_dataset_jobs=1, poll_interval=0.1)
    result = scheduler.recover()
    assert result == {"aborted": [stale.id], "queued": [waiting.id], "alive": []}
    assert stale.reload().status is JobStatus.ABORTED and "ended without finishing" in stale.error
    # Limit 1: the second dataset job waits while the first runs; aborting a waiting job removes it.
    second = Job.create("dataset", "second", jobs_dir=jobs, plugin_id="sample-numbers", form_data={"count": 2})
    third = Job.create("dataset", "third", jobs_dir=jobs, plugin_id="sample-numbers", form_data={"count": 2})
    scheduler.submit(second)
    scheduler.submit(third)
    scheduler.abort(third.id)
    assert third.reload().status is JobStatus.ABORTED
    scheduler._tick()
    status = scheduler.status()
    assert list(status["running"]) == [waiting.id] and status["waiting"] == [second.id]
    scheduler.start()
    try:
        assert scheduler.wait(second.id, 60).status is JobStatus.DONE
        assert waiting.reload().status is JobStatus.DONE
    finally:
        scheduler.shutdown()
    with pytest.raises(Exception):
        scheduler.abort(second.id)  # Done: nothing to abort


def test_worker_crash_marks_error(tmp_path):
    jobs = tmp_path / "jobs"
    job = Job.create("dataset", "broken", jobs_dir=jobs, plugin_id="no-such-plugin", form_data={})
    scheduler = Scheduler(jobs, poll_interval=0.1).start()
    try:
        scheduler.submit(job)
        job = scheduler.wait(job.id, 60)
    finally:
        scheduler.shutdown()
    assert job.status is JobStatus.ERROR and "no-such-plugin" in job.error


def test_resubmit_while_previous_worker_exits(tmp_path):
    """Resume right after an abort: the job waits for its old worker to exit, then runs again."""
    import subprocess
    import sys

    jobs = tmp_path / "jobs"
    job = Job.create("model", "m", jobs_dir=jobs)
    job.set_status(JobStatus.ABORTED)  # the worker already wrote Aborted but is still exiting
    scheduler = Scheduler(jobs, poll_interval=0.1)
    # A process that exits when the test closes its stdin: "still exiting" lasts exactly as long as needed.
    exiting = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    scheduler._running[job.id] = (ProcessWorker(exiting), "model")
    scheduler._abort_requested.add(job.id)
    scheduler.resume(job)
    assert job.reload().status is JobStatus.WAITING and scheduler.status()["waiting"] == []
    assert exiting.poll() is None  # the old worker really was still running when the job was resumed
    exiting.stdin.close()
    exiting.wait(30)
    with scheduler._lock:
        for job_id, (proc, _kind) in list(scheduler._running.items()):
            scheduler._finish(job_id, proc)
    assert scheduler.status()["waiting"] == [job.id]
    assert job.reload().status is JobStatus.WAITING and job.data["resume"] is True


def test_a_crashed_worker_is_an_error_with_its_exit_code(tmp_path):
    """kill -9 of the worker (OOM killer): Error naming the exit status and the log, not a silent Aborted."""
    import signal
    import subprocess
    import sys

    jobs = tmp_path / "jobs"
    job = Job.create("dataset", "d", jobs_dir=jobs)
    job.data["status_history"].append(["Running", time.time()])  # as the worker wrote it before it died
    job.save()
    scheduler = Scheduler(jobs, poll_interval=0.1)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    scheduler._running[job.id] = (ProcessWorker(worker), "dataset")
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    with scheduler._lock:
        scheduler._finish(job.id, ProcessWorker(worker))
    job.reload()
    assert job.status is JobStatus.ERROR and "exit code -9" in job.error and "worker.log" in job.error
