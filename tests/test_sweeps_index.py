"""The sweeps index (issue 43): ``/sweeps`` and ``/sweeps.json`` list every sweep, the home page and each trial link to
it, the sweep page carries its live-refresh hook and Abort / Resume buttons, and ``digits sweep list`` prints the same
fields. The sweep's files are laid out by hand as in ``tests/test_tune.py`` (no Ray here)."""

from __future__ import annotations

import json
import re

import pytest
from test_tune import fake_sweep

from digits_core.cli import main as digits_main
from digits_core.jobs import JobStatus, JobStore
from digits_core.sweeps.record import update_sweep_record
from digits_core.web.app import create_app

CURVES = {0.1: [0.5, 0.7, 0.9], 0.01: [0.4], 0.001: [0.6, 0.8, 0.85]}


@pytest.fixture
def jobs_dir(tmp_path):
    fake_sweep(tmp_path, CURVES, {0.01: JobStatus.STOPPED_EARLY})
    return tmp_path


@pytest.fixture
def client(jobs_dir):
    return create_app(jobs_dir, start_scheduler=False, testing=True).test_client()


def _best_job(jobs_dir) -> str:
    return next(j.id for j in JobStore(jobs_dir).list("model") if j.data["sweep"]["learning_rate"] == 0.1)


def test_the_index_lists_every_sweep_with_status_trials_and_best(client, jobs_dir):
    data = client.get("/sweeps.json").get_json()
    assert data["unreadable"] == []
    [row] = data["sweeps"]
    assert (row["id"], row["name"], row["status"]) == ("s1", "demo", "Done")
    assert (row["trials_done"], row["trials_total"]) == (3, 3)
    assert (row["metric"], row["best"], row["best_job"]) == ("val_accuracy", 0.9, _best_job(jobs_dir))
    assert row["url"] == "/sweeps/s1"
    page = client.get("/sweeps").get_data(as_text=True)
    line = re.search(r'<tr data-sweep="s1".*?</tr>', page, re.S).group(0)
    assert 'href="/sweeps/s1"' in line and ">demo<" in line and "Done" in line
    assert "3 / 3" in line and "val_accuracy 0.9" in line


def test_the_index_counts_trials_not_started_and_says_when_there_are_none(tmp_path):
    client = create_app(tmp_path, start_scheduler=False, testing=True).test_client()
    answer = client.get("/sweeps")
    assert answer.status_code == 200 and "No sweeps yet" in answer.get_data(as_text=True)
    assert client.get("/sweeps.json").get_json() == {"sweeps": [], "unreadable": []}
    record = fake_sweep(tmp_path, {0.1: [0.5]}, {})
    update_sweep_record(tmp_path / ".sweeps" / "s1", trials=[*record["trials"], {"learning_rate": 0.5}])
    [row] = client.get("/sweeps.json").get_json()["sweeps"]
    assert (row["trials_done"], row["trials_total"]) == (1, 2)


def test_the_home_page_and_every_trial_link_to_the_sweep(client, jobs_dir):
    home = client.get("/").get_data(as_text=True)
    assert 'href="/sweeps"' in home  # the navigation
    assert re.search(r'data-group="demo".*?href="/sweeps/s1"', home, re.S)  # the sweep's group
    for job in JobStore(jobs_dir).list("model"):
        page = client.get(f"/models/{job.id}").get_data(as_text=True)
        assert re.search(r'href="/sweeps/s1" id="job-sweep"', page), job.name


def test_the_sweep_page_refreshes_itself_and_has_abort_or_resume(client, jobs_dir):
    folder = jobs_dir / ".sweeps" / "s1"
    page = client.get("/sweeps/s1").get_data(as_text=True)
    assert 'data-json="/sweeps/s1.json"' in page and "sweep_live.js" in page
    assert "3 of 3 trials done" in page and "sweep-abort" not in page and "sweep-resume" not in page  # Done
    update_sweep_record(folder, status="Aborted")
    page = client.get("/sweeps/s1").get_data(as_text=True)
    form = re.search(r'<form method="post" action="/api/sweeps/s1/resume".*?</form>', page, re.S).group(0)
    assert 'name="csrf_token"' in form and 'id="sweep-resume"' in form
    # Running: the Abort form posts the page's CSRF token to the API (no sweep process here: Running reads
    # Aborted unless something holds its lock, so the record is read as the page renders it)
    from digits_core.jobs.lock import JobLock

    with JobLock(folder):
        update_sweep_record(folder, status="Running")
        page = client.get("/sweeps/s1").get_data(as_text=True)
        form = re.search(r'<form method="post" action="/api/sweeps/s1/abort".*?</form>', page, re.S).group(0)
        token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
        answer = client.post("/api/sweeps/s1/abort", data={"csrf_token": token})
        assert answer.status_code == 200, answer.get_data(as_text=True)
        assert client.post("/api/sweeps/s1/abort").status_code in (400, 403)  # no token: refused


def test_digits_sweep_list_prints_the_same_fields(jobs_dir, capsys):
    assert digits_main(["--jobs-dir", str(jobs_dir), "sweep", "list"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("s1"))
    assert "demo" in line and "Done" in line and "3/3" in line and "val_accuracy 0.9" in line
    assert _best_job(jobs_dir) in line
    assert digits_main(["--jobs-dir", str(jobs_dir), "sweep", "list", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert (row["trials_done"], row["trials_total"], row["best"]) == (3, 3, 0.9)


@pytest.mark.slow
@pytest.mark.browser
def test_the_sweep_page_follows_a_running_sweep_without_a_reload(tmp_path, chromium, live_server):
    """A page opened while the sweep runs with 1 trial shows 3 trials and Done once the files say so, by itself."""
    from digits_core.jobs.lock import JobLock

    fake_sweep(tmp_path / "jobs", CURVES, {0.01: JobStatus.STOPPED_EARLY})
    folder = tmp_path / "jobs" / ".sweeps" / "s1"
    later = {p.name: p.read_bytes() for p in folder.glob("trial-*.json") if p.name != "trial-0.json"}
    for name in later:
        (folder / name).unlink()
    server = live_server(tmp_path / "jobs")
    with JobLock(folder):  # this process "runs" the sweep: the server reads it Running
        update_sweep_record(folder, status="Running")
        page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{server.url}/sweeps/s1")
        assert page.locator("#trials tbody tr").count() == 1
        assert page.locator("#sweep-status").inner_text() == "Running" and page.locator("#sweep-abort").count() == 1
        for name, data in later.items():
            (folder / name).write_bytes(data)
        update_sweep_record(folder, status="Done")
    page.locator("#trials tbody tr:nth-child(3)").wait_for(timeout=15000)  # no eval: the page's CSP forbids it
    page.locator("#sweep-status", has_text="Done").wait_for(timeout=15000)
    assert "3 of 3 trials done" in page.locator("#sweep-trials-count").inner_text()
    assert page.locator("#sweep-abort").count() == 0
    assert not errors, errors
