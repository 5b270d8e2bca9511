"""GPUs shared between training jobs: each job its own devices, never one GPU for two jobs.

The allocation runs on simulated device lists (no GPU needed); the scheduler test starts real worker
processes through a stand-in interpreter that records the environment the scheduler gave it.
"""

from __future__ import annotations

import random
import stat
import sys
import time

import pytest

from digits_core.gpus import ASSIGNED_ENV, GpuAllocator, GpuRequestError, detect_gpus, parse_request, worker_env
from digits_core.jobs import Job, JobStatus
from digits_core.scheduler import Scheduler


def test_parse_request():
    assert parse_request(None) is None and parse_request("") is None
    assert parse_request("2") == 2 and parse_request(3) == 3 and parse_request("ALL") == "all"
    assert parse_request("0, 2") == ["0", "2"]
    for bad in ("two", "-1", "0,x", True):
        with pytest.raises(GpuRequestError):
            parse_request(bad)


def test_detect_gpus_honours_cuda_visible_devices():
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "1,3"}) == ["1", "3"]
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert detect_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []


def test_requests_are_met_or_wait():
    gpus = GpuAllocator(["0", "1", "2", "3"])
    assert gpus.try_allocate("a", None) == ["0"]  # default: one GPU
    assert gpus.try_allocate("b", 2) == ["1", "2"]
    assert gpus.try_allocate("c", "0,3") is None  # GPU 0 is a's: wait
    assert gpus.try_allocate("d", "all") is None
    assert gpus.try_allocate("e", 1) == ["3"]
    gpus.release("a")
    assert gpus.try_allocate("c", "0,3") is None  # 3 is e's now
    gpus.release("e")
    assert gpus.try_allocate("c", "0,3") == ["0", "3"]
    assert gpus.holdings() == {"b": ["1", "2"], "c": ["0", "3"]}
    assert gpus.free() == []


def test_impossible_requests_are_errors_naming_the_devices():
    gpus = GpuAllocator(["0", "1"])
    with pytest.raises(GpuRequestError, match=r"3 requested, this machine has 2 \(ids: 0, 1\)"):
        gpus.try_allocate("a", 3)
    with pytest.raises(GpuRequestError, match="GPU 5 does not exist here"):
        gpus.try_allocate("a", "0,5")
    assert GpuAllocator([]).try_allocate("cpu", None) == []  # no GPU: the CPU


def test_no_gpu_is_ever_held_twice():
    rng = random.Random(7)
    gpus = GpuAllocator([str(i) for i in range(4)])
    live: set[str] = set()
    for step in range(2000):
        if live and rng.random() < 0.4:
            gpus.release(live.pop() if rng.random() < 0.5 else rng.choice(sorted(live)))
            live = set(gpus.holdings())
            continue
        request = rng.choice([None, 1, 2, 3, "all", "0,2", "1", "3,1"])
        job = f"job{step}"
        if gpus.try_allocate(job, request) is not None:
            live.add(job)
        held = [d for ids in gpus.holdings().values() for d in ids]
        assert len(held) == len(set(held)), f"a GPU held twice at step {step}: {gpus.holdings()}"


def test_worker_env():
    assert worker_env(["1", "3"], True) == {
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        "CUDA_VISIBLE_DEVICES": "1,3",
        ASSIGNED_ENV: "1,3",
    }
    assert worker_env([], False) == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}


STAND_IN = """#!{python}
# Stands in for `python -m digits_core.scheduler run JOB`: records the GPU environment, waits for the
# test's go, then ends the job Done through the real job API.
import json, os, pathlib, sys, time
from digits_core.jobs import Job, JobStatus
job = Job.load(sys.argv[-1])
(job.path / "env.json").write_text(json.dumps({{k: os.environ.get(k) for k in
    ("CUDA_VISIBLE_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH", "{assigned}")}}))
while not (job.path / "go").exists():
    time.sleep(0.05)
job.reload()
job.set_status(JobStatus.RUNNING)
job.set_status(JobStatus.DONE)
"""


def _wait_for(predicate, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_scheduler_gives_each_training_job_its_own_gpus(tmp_path):
    import json

    stand_in = tmp_path / "worker-python"
    stand_in.write_text(STAND_IN.format(python=sys.executable, assigned=ASSIGNED_ENV))
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IEXEC)
    jobs = tmp_path / "jobs"
    scheduler = Scheduler(jobs, max_training_jobs=3, poll_interval=0.05, python=str(stand_in), gpu_devices=["0", "1"])
    made = {}
    for name, gpus in (("a", None), ("b", "0,1"), ("c", 1)):
        job = Job.create("model", name, jobs_dir=jobs, train_options={"gpus": gpus})
        made[name] = scheduler.submit(job)
    scheduler.start()
    try:
        env = lambda n: json.loads((made[n].path / "env.json").read_text())  # noqa: E731
        started = lambda n: (made[n].path / "env.json").exists()  # noqa: E731
        _wait_for(lambda: started("a") and started("c"), "jobs a and c to start")
        assert env("a")["CUDA_VISIBLE_DEVICES"] == "0" and env("c")["CUDA_VISIBLE_DEVICES"] == "1"
        assert env("a")["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
        status = scheduler.status()
        assert status["gpus"]["held"] == {made["a"].id: ["0"], made["c"].id: ["1"]}
        assert status["waiting"] == [made["b"].id] and not started("b")  # both GPUs busy: b waits
        assert Job.load(made["a"].path).data["gpus_assigned"] == ["0"]
        (made["a"].path / "go").write_text("")
        _wait_for(lambda: made["a"].id not in scheduler.status()["running"], "job a to end")
        assert not started("b")  # GPU 1 is still c's
        (made["c"].path / "go").write_text("")
        _wait_for(lambda: started("b"), "job b to start")
        assert env("b")["CUDA_VISIBLE_DEVICES"] == "0,1" and env("b")[ASSIGNED_ENV] == "0,1"
        (made["b"].path / "go").write_text("")
        scheduler.wait(made["b"].id, timeout=120)
        assert all(Job.load(j.path).status == JobStatus.DONE for j in made.values())
        assert scheduler.status()["gpus"]["held"] == {}
    finally:
        scheduler.shutdown()


def test_an_impossible_request_ends_the_job_in_error(tmp_path):
    jobs = tmp_path / "jobs"
    scheduler = Scheduler(jobs, poll_interval=0.05, python=sys.executable, gpu_devices=["0"])
    job = scheduler.submit(Job.create("model", "x", jobs_dir=jobs, train_options={"gpus": 4}))
    scheduler.start()
    try:
        _wait_for(lambda: Job.load(job.path).status == JobStatus.ERROR, "the job to fail")
        assert "4 requested, this machine has 1" in Job.load(job.path).error
    finally:
        scheduler.shutdown()


def test_model_page_shows_the_jobs_gpus(tmp_path):
    from digits_core.web import create_app

    jobs = tmp_path / "jobs"
    job = Job.create("model", "gpu-job", jobs_dir=jobs, train_options={"network": "lenet"}, gpus_assigned=["1", "3"])
    app = create_app(jobs_dir=jobs, start_scheduler=False)
    page = app.test_client().get(f"/models/{job.id}").get_data(as_text=True)
    assert '<span id="job-gpus">GPU 1, 3</span>' in page
