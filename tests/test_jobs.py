"""Job folders, job.json and the jobs folder resolution."""

from __future__ import annotations

import json
import re

import pytest

from digits_core import Job, JobNotFoundError, JobStatus
from digits_core.config import resolve_jobs_dir
from digits_core.errors import ConfigurationError
from digits_core.jobs import JobStore


def test_jobs_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("DIGITS_JOBS_DIR", str(tmp_path / "from-env"))
    assert resolve_jobs_dir() == tmp_path / "from-env"
    assert resolve_jobs_dir(tmp_path / "explicit") == tmp_path / "explicit"
    monkeypatch.delenv("DIGITS_JOBS_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_jobs_dir() == tmp_path / "home" / ".digits" / "jobs"
    assert (tmp_path / "home" / ".digits" / "jobs").is_dir()


def test_jobs_dir_that_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigurationError, match="exists but is not a folder"):
        resolve_jobs_dir(tmp_path / "file")


def test_job_folder_name_and_status_history(jobs_dir):
    job = Job.create("dataset", "mnist", plugin_id="image-classification", form_data={"width": 28})
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", job.id)
    assert job.path == jobs_dir / job.id
    assert job.status is JobStatus.INITIALIZED
    job.set_status("Running")
    job.set_status(JobStatus.ERROR, error="folder /x does not exist")
    saved = json.loads((job.path / "job.json").read_text())
    assert [s for s, _ in saved["status_history"]] == ["Initialized", "Running", "Error"]
    assert saved["error"] == "folder /x does not exist" and saved["form_data"] == {"width": 28}
    assert Job.load(job.path).status is JobStatus.ERROR and JobStatus.ERROR.is_finished
    assert not list(job.path.glob(".job.json.*")), "temporary files must not be left behind"


def test_store_lists_gets_and_deletes(jobs_dir):
    first = Job.create("dataset", "a")
    second = Job.create("model", "b", dataset_id=first.id)
    (jobs_dir / ".partial-build").mkdir()  # not a job: ignored
    store = JobStore()
    assert {j.id for j in store.list()} == {first.id, second.id}
    assert [j.id for j in store.list("model")] == [second.id]
    assert store.get(second.id).data["dataset_id"] == first.id
    with pytest.raises(JobNotFoundError, match="is a model job, not a dataset job"):
        store.get(second.id, kind="dataset")
    with pytest.raises(JobNotFoundError, match="does not exist"):
        store.get("20000101-000000-ffff")
    with pytest.raises(JobNotFoundError):
        store.get("../etc")
    store.delete(first.id)
    assert not first.path.exists() and [j.id for j in store.list()] == [second.id]


def test_status_change_calls_the_hook(jobs_dir):
    import types

    from digits_core import hookimpl, registry

    seen = []
    module = types.ModuleType("status_hooks")
    module.digits_job_status_changed = hookimpl(
        lambda job, old_status, new_status: seen.append((job.id, old_status, new_status))
    )
    registry.register(module)
    try:
        job = Job.create("dataset", "x")
        job.set_status("Running")
        job.set_status("Done")
    finally:
        registry.unregister(module)
    assert seen == [(job.id, "Initialized", "Running"), (job.id, "Running", "Done")]
