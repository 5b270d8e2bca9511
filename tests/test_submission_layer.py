"""The submission layer (issue 40): jobs are made in ``digits_core/submit/`` only, it runs without Flask, and the web
doors reach it through one typed context with no blueprint module importing another."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from import_graph import ROOT, read_graph

from digits_core.errors import FormValidationError
from digits_core.jobs import Job, JobStatus, JobStore
from digits_core.submit.models import create_model_jobs
from digits_core.web.app import create_app
from digits_core.web.context import WebContext, web_context

#: Where a job folder may be made: the job store that defines ``Job.create``, and the submission layer.
MAKERS = ("digits_core/jobs/", "digits_core/submit/")


class ListQueue:
    """A queue that keeps what it is given (the scheduler's one method the submission layer calls)."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def submit(self, job: Job) -> None:
        self.jobs.append(job)


def _blueprint_modules() -> set[str]:
    web = ROOT / "digits_core" / "web"
    return {
        f"digits_core.web.{path.stem}"
        for path in web.glob("*.py")
        if re.search(r"^bp = Blueprint\(", path.read_text(encoding="utf-8"), re.M)
    }


def test_no_blueprint_module_imports_another():
    blueprints = _blueprint_modules()
    assert {"digits_core.web.api", "digits_core.web.models_views", "digits_core.web.tune_views"} <= blueprints
    edges, _ = read_graph()
    crossing = sorted(
        {f"{e.source}:{e.line} imports {e.target}" for e in edges if e.source in blueprints and e.target in blueprints}
    )
    assert not crossing, "blueprint modules importing each other (move what they share below them):\n" + "\n".join(
        crossing
    )


def test_jobs_are_made_in_the_submission_layer_only():
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("digits_core", "compat")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not str(path.relative_to(ROOT)).startswith(MAKERS)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "Job.create(" in line and not line.lstrip().startswith(("#", ":", "``"))
    ]
    assert not found, "job folders made outside digits_core/submit/ (use digits_core.submit.records):\n" + "\n".join(
        found
    )


def test_the_web_app_state_is_one_typed_context(tmp_path: Path):
    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
    context = app.extensions["digits"]
    assert isinstance(context, WebContext)
    assert isinstance(context.store, JobStore) and context.jobs_dir == tmp_path / "jobs"
    with app.app_context():
        assert web_context() is context
    assert context["store"] is context.store and context.get("plugin_env") is None  # read as a mapping too
    with pytest.raises(KeyError):
        context["ray_address"]


@pytest.fixture
def done_dataset(tmp_path: Path) -> Job:
    ds = Job.create("dataset", "ds", jobs_dir=tmp_path, plugin_id="image-classification")
    ds.set_status(JobStatus.DONE)
    return ds


def test_the_submission_layer_queues_without_flask(tmp_path: Path, done_dataset: Job):
    queue = ListQueue()
    where = {"store": JobStore(tmp_path), "queue": queue, "jobs_dir": tmp_path}
    jobs = create_model_jobs("sweep", done_dataset.id, "lenet", {"learning_rate": [0.1, 0.01], "epochs": 1}, **where)
    assert [job.id for job in queue.jobs] == [job.id for job in jobs] and len(jobs) == 2
    assert {job.data["sweep"]["learning_rate"] for job in jobs} == {0.1, 0.01}
    assert all(job.data["train_options"]["dataset"] == done_dataset.id for job in jobs)
    assert len({job.data["group"] for job in jobs}) == 1


def test_the_submission_layer_refuses_before_anything_exists(tmp_path: Path, done_dataset: Job):
    queue = ListQueue()
    store = JobStore(tmp_path)
    where = {"store": store, "queue": queue, "jobs_dir": tmp_path}
    with pytest.raises(FormValidationError) as caught:
        create_model_jobs("m", done_dataset.id, "lenet", {"ray_address": "10.0.0.1:6379", "epochs": 0}, **where)
    assert set(caught.value.errors) == {"ray_address", "epochs"}
    assert "a setting of the server" in caught.value.errors["ray_address"][0]
    assert queue.jobs == [] and store.list("model") == []
