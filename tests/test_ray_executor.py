"""The Ray executor on a real local Ray cluster (a head and one extra node, 127.0.0.1 only).

One cluster for the module (:mod:`ray_cluster`); the test process is the Ray
driver, as ``digits serve --executor ray`` is. Jobs read a tiny NumPy dataset
through the installed ``numpy-arrays`` plugin, so every node can import it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import threading

import numpy as np
import pytest
from ray_cluster import CLUSTER_ENV, LOOPBACK, LocalRayCluster, listening_sockets, pids_in_sessions
from test_faults import wait_until  # polls a condition, with a clear message on timeout

from digits_core.jobs import Job, JobStatus

# Ray is not imported here: it reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, at import (see the cluster fixture).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason='the Ray extra is not installed (pip install "digits-core[ray]")',
    ),
]

JOB_TIMEOUT = 240


@pytest.fixture(scope="module")
def cluster():
    saved = {k: os.environ.get(k) for k in CLUSTER_ENV}
    os.environ.update(CLUSTER_ENV)  # the test process is a driver: same loopback-only settings, before Ray's import
    import ray._private.ray_constants as constants

    assert not constants.ENABLE_RAY_CLUSTER, "Ray was imported before this fixture set its environment"
    cluster = LocalRayCluster(head_cpus=1, node_cpus=1)
    try:
        yield cluster.start()
    finally:
        import ray

        ray.shutdown()
        cluster.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def jobs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ray-jobs")


@pytest.fixture(scope="module")
def scheduler(cluster, jobs_dir):
    from digits_core.executors import make_scheduler

    sched = make_scheduler("ray", jobs_dir, ray_address=cluster.address, poll_interval=0.1).start()
    yield sched
    sched.shutdown()


@pytest.fixture(scope="module")
def dataset(scheduler, jobs_dir, tmp_path_factory):
    """A Done dataset job built on the cluster: 256 16x16 images of two classes (dark / bright)."""
    from digits_core.datasets import create_dataset_job

    folder = tmp_path_factory.mktemp("arrays")
    rng = np.random.default_rng(0)
    labels = np.arange(256) % 2
    features = (rng.integers(0, 100, (256, 16, 16)) + labels[:, None, None] * 150).astype(np.uint8)
    np.save(folder / "x.npy", features)
    np.save(folder / "y.npy", labels.astype(np.int64))
    job = create_dataset_job(
        "numpy-arrays",
        {"features_file": str(folder / "x.npy"), "labels_file": str(folder / "y.npy"), "val_percent": 25},
        name="ray-arrays",
        jobs_dir=jobs_dir,
        workers=1,
    )
    scheduler.submit(job)
    return scheduler.wait(job.id, JOB_TIMEOUT)


def _model_job(jobs_dir, dataset, name, **options):
    job = Job.create("model", name, jobs_dir=jobs_dir, dataset_id=dataset.id, network="lenet")
    job.data["train_options"] = {"dataset": dataset.id, "network": "lenet", "batch_size": 16, "seed": 1, **options}
    job.save()
    return job


def _tiny_dataset_job(jobs_dir, folder, name):
    """A dataset job (not run) over 8 blank 16x16 images in ``folder``: x.npy and y.npy."""
    from digits_core.datasets import create_dataset_job

    np.save(folder / "x.npy", np.zeros((8, 16, 16), np.uint8))
    np.save(folder / "y.npy", np.arange(8) % 2)
    return create_dataset_job(
        "numpy-arrays",
        {"features_file": str(folder / "x.npy"), "labels_file": str(folder / "y.npy")},
        name=name,
        jobs_dir=jobs_dir,
        workers=1,
    )


def _node_ids(cluster):
    return {n["NodeID"] for n in cluster.alive_nodes()}


def _epochs_done(job):
    path = job.path / "model.json"
    if not path.is_file():
        return 0
    snaps = json.loads(path.read_text()).get("snapshots") or []
    return len(snaps)


def test_dataset_job_runs_as_a_ray_task(dataset, cluster):
    assert dataset.status is JobStatus.DONE, dataset.error
    placement = dataset.data["placement"]
    assert placement["executor"] == "ray" and placement["node_id"] in _node_ids(cluster)
    assert placement["node_address"] == "127.0.0.1"
    assert dataset.data["dataset"]["stages"] == {"train": 192, "val": 64}
    assert not dataset.is_alive  # the task released the job lock


def test_every_cluster_socket_listens_on_loopback_only(dataset, cluster):
    """GCS, raylets, agents, client server, workers and this driver: every TCP listener is 127.0.0.1."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    class Probe:  # a live worker process on each node
        def pid(self):
            return os.getpid()

    probes = [
        Probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        for node in _node_ids(cluster)
    ]
    workers = set(ray.get([p.pid.remote() for p in probes], timeout=120))
    assert len(workers) == 2 and listening_sockets(workers)  # each worker serves gRPC: those sockets are counted
    pids = pids_in_sessions(cluster.sessions()) | {os.getpid()}
    assert workers <= pids
    sockets = listening_sockets(pids)
    for probe in probes:
        ray.kill(probe)
    assert len(sockets) >= 6  # GCS + 2 raylets x (node manager, object manager) + agents at least
    assert cluster.port in {port for _f, _h, port in sockets}
    wide = [s for s in sockets if s[1] not in LOOPBACK]
    assert not wide, f"listening beyond loopback: {wide}"


def test_training_job_runs_as_a_ray_task_with_live_metrics(scheduler, dataset, jobs_dir, cluster):
    job = _model_job(jobs_dir, dataset, "ray-train", epochs=2)
    scheduler.submit(job)
    job = scheduler.wait(job.id, JOB_TIMEOUT)
    assert job.status is JobStatus.DONE, job.error
    assert job.data["placement"]["node_id"] in _node_ids(cluster) and job.data["placement"]["gpus"] == []
    info = json.loads((job.path / "model.json").read_text())
    assert [s["file"] for s in info["snapshots"]] == ["epoch-001.keras", "epoch-002.keras"]
    metrics = [json.loads(line) for line in (job.path / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics if m["name"] == "val_accuracy"] == [1.0, 2.0]
    assert "Done" not in (job.path / "worker.log").read_text()  # the log is the job's output, not ours
    assert scheduler.status()["executor"]["nodes"] == 2


def test_abort_across_the_cluster_then_resume(scheduler, dataset, jobs_dir):
    job = _model_job(jobs_dir, dataset, "ray-abort", epochs=500)
    scheduler.submit(job)
    wait_until(lambda: _epochs_done(job) >= 1, "a first snapshot")
    assert job.reload().status is JobStatus.RUNNING and job.is_alive
    scheduler.abort(job.id)
    job = scheduler.wait(job.id, JOB_TIMEOUT)
    assert job.status is JobStatus.ABORTED and not job.is_alive
    done = _epochs_done(job)
    assert 1 <= done < 500
    scheduler.resume(job, epochs=done + 1)
    job = scheduler.wait(job.id, JOB_TIMEOUT)
    assert job.status is JobStatus.DONE, job.error
    assert _epochs_done(job) == done + 1


def test_abort_of_a_dataset_job_stops_its_ray_task(scheduler, jobs_dir, tmp_path):
    """A dataset job blocked in a system call (opening a FIFO nobody writes) is still stopped: Aborted."""
    job = _tiny_dataset_job(jobs_dir, tmp_path, "ray-blocked")
    (tmp_path / "x.npy").unlink()
    os.mkfifo(tmp_path / "x.npy")  # the worker's open() waits for a writer that never comes
    scheduler.submit(job)
    wait_until(lambda: job.reload().status is JobStatus.RUNNING and job.is_alive, "the dataset job to start")
    scheduler.abort(job.id)
    job = scheduler.wait(job.id, 60)
    assert job.status is JobStatus.ABORTED and not job.is_alive
    assert job.error == "Aborted by the user."


def test_a_job_another_process_owns_is_not_run_by_its_ray_task(scheduler, jobs_dir, tmp_path):
    """The per-job OS lock holds across executors: the task finds the job owned and leaves it untouched."""
    job = _tiny_dataset_job(jobs_dir, tmp_path, "ray-owned")
    lock = job.acquire_lock()  # this process owns the job, as a `digits dataset create` in a shell would
    try:
        scheduler.submit(job)
        job = scheduler.wait(job.id, JOB_TIMEOUT)
    finally:
        lock.release()
    assert job.status is JobStatus.WAITING and "placement" not in job.data and "dataset" not in job.data
    assert "is running in another process" in (job.path / "worker.log").read_text()


def _served_jobs_dir(dataset, tmp_path):
    """A jobs folder of its own for a ``digits serve`` (one scheduler per folder: the module's scheduler holds
    ``jobs_dir``), holding a copy of the module's dataset job."""
    served = tmp_path / "served-jobs"
    shutil.copytree(dataset.path, served / dataset.path.name)
    return served


def test_digits_serve_executor_ray_runs_a_2x2_sweep_in_parallel_across_the_cluster(dataset, cluster, tmp_path):
    """A real ``digits serve --executor ray`` (address from DIGITS_RAY_ADDRESS); POST /api/models with 2 learning
    rates x 2 batch sizes: four grouped jobs, two at a time, on both nodes."""
    from live_server import running_server

    jobs_dir = _served_jobs_dir(dataset, tmp_path)

    env = {**CLUSTER_ENV, "LD_PRELOAD": cluster.env["LD_PRELOAD"], "DIGITS_RAY_ADDRESS": cluster.address}
    with running_server(jobs_dir, auth_token="ray-token", env=env, extra_args=["--executor", "ray"]) as server:
        status = server.get_json("/api/scheduler")
        assert status["executor"]["name"] == "ray" and status["executor"]["nodes"] == 2
        resp = server.request(
            "/api/models",
            method="POST",
            data={
                "name": "ray-sweep",
                "dataset": dataset.id,
                "network": "lenet",
                "options": {"epochs": 1, "seed": 1, "learning_rate": "0.05,0.01", "batch_size": "16,32"},
            },
        )
        assert resp.status in (200, 201, 202), resp.text
        rows = resp.json()["jobs"]
        assert len(rows) == 4 and {r["group"] for r in rows} == {"ray-sweep"}
        jobs = [Job.load(jobs_dir / r["id"]) for r in rows]
        wait_until(lambda: all(j.reload().status.is_finished for j in jobs), "the sweep's four jobs")
    assert [j.status for j in jobs] == [JobStatus.DONE] * 4, [j.error for j in jobs]
    assert [(j.data["sweep"]["learning_rate"], j.data["sweep"]["batch_size"]) for j in jobs] == [
        (0.05, 16),
        (0.05, 32),
        (0.01, 16),
        (0.01, 32),
    ]
    for job in jobs:
        info = json.loads((job.path / "model.json").read_text())
        assert info["batch_size"] == job.data["sweep"]["batch_size"]
        assert info["options"]["learning_rate"] == job.data["sweep"]["learning_rate"]
    # One CPU per node and one per training task: jobs ran on both nodes, and some ran at the same time.
    assert {j.data["placement"]["node_id"] for j in jobs} == _node_ids(cluster)
    spans = []
    for job in jobs:
        times = {status: t for status, t in job.status_history}
        spans.append((times["Running"], times["Done"]))
    assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1 :])


def test_tune_trials_run_as_model_jobs_on_both_nodes(dataset, jobs_dir, cluster):
    """``digits_core.sweeps.tune.tune`` on the cluster (issue 30): two trials of one CPU each on a 1 + 1 CPU cluster."""
    from digits_core.sweeps.tune import tune

    handle = tune(
        dataset.id,
        "lenet",
        "ray-tune",
        search=["learning_rate=0.05,0.01"],
        scheduler="grid",
        max_epochs=1,
        max_concurrent=2,
        metric="val_loss",
        jobs_dir=jobs_dir,
        ray_address=cluster.address,
        batch_size=16,
        seed=1,
    )
    summary = handle.wait(timeout=JOB_TIMEOUT)
    assert summary["status"] == "Done" and [row["status"] for row in summary["trials"]] == ["Done", "Done"]
    assert {row["node"] for row in summary["trials"]} == _node_ids(cluster)
    assert sorted(row["values"]["learning_rate"] for row in summary["trials"]) == [0.01, 0.05]


def test_a_killed_ray_server_leaves_no_running_task_and_a_restart_marks_its_job_aborted(dataset, cluster, tmp_path):
    """kill -9 of `digits serve --executor ray`: Ray stops the driver's tasks (the job lock is released), the next
    server marks the job Aborted, and it resumes on the cluster from its snapshot."""
    from live_server import running_server

    jobs_dir = _served_jobs_dir(dataset, tmp_path)

    env = {**CLUSTER_ENV, "LD_PRELOAD": cluster.env["LD_PRELOAD"]}
    args = ["--executor", "ray", "--ray-address", cluster.address]
    with running_server(jobs_dir, auth_token="ray-token", env=env, extra_args=args) as server:
        resp = server.request(
            "/api/models",
            method="POST",
            data={
                "name": "ray-server-dies",
                "dataset": dataset.id,
                "network": "lenet",
                "options": {"epochs": 500, "seed": 1, "batch_size": 16},
            },
        )
        assert resp.status in (200, 201, 202), resp.text
        job = Job.load(jobs_dir / resp.json()["id"])
        wait_until(lambda: _epochs_done(job) >= 1, "a first snapshot")
        server.kill()
        wait_until(lambda: not job.is_alive, "Ray to stop the dead driver's task")
    assert job.reload().status is JobStatus.RUNNING  # nobody wrote anything: the task was killed
    with running_server(jobs_dir, auth_token="ray-token", env=env, extra_args=args) as server:
        row = next(r for r in server.get_json("/api/jobs") if r["id"] == job.id)
        assert row["status"] == "Aborted"
        done = _epochs_done(job)
        assert server.request(f"/api/jobs/{job.id}/resume", method="POST", data={}).status == 202
        wait_until(lambda: _epochs_done(job) > done, "the resumed job's next snapshot")
        info = json.loads((job.path / "model.json").read_text())
        assert info["resumed_from"].startswith(f"epoch-{done:03d}")
        assert server.request(f"/api/jobs/{job.id}/abort", method="POST", data={}).status == 200
        wait_until(lambda: job.reload().status is JobStatus.ABORTED and not job.is_alive, "the abort")


def _final(job):
    info = json.loads((job.path / "model.json").read_text())
    return info, {
        k: v
        for k, v in (info.get("final_metrics") or {}).items()  # the model's numbers, not timings
        if k in ("loss", "accuracy") or k.startswith("val_")
    }


def test_ray_train_two_workers_match_the_local_two_worker_run(dataset, jobs_dir, cluster):
    """``digits train --workers 2`` (Ray Train writes TF_CONFIG) gives the same model as two local workers."""
    import subprocess
    import sys

    common = [
        "--dataset",
        dataset.id,
        "--network",
        "lenet",
        "--epochs",
        "1",
        "--batch-size",
        "32",
        "--seed",
        "3",
        "--quiet",
        "--json",
    ]
    before = set(listening_sockets(pids_in_sessions(cluster.sessions())))
    seen: set = set()
    done = threading.Event()

    def watch():  # every listener of the cluster while Ray Train runs (TensorFlow's gRPC servers included)
        while not done.wait(0.1):
            seen.update(listening_sockets(pids_in_sessions(cluster.sessions())))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "digits_core",
                "--jobs-dir",
                str(jobs_dir),
                "train",
                "--name",
                "ray-train-2",
                "--workers",
                "2",
                *common,
            ],
            env={**cluster.env, "DIGITS_RAY_ADDRESS": cluster.address},
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT,
        )
    finally:
        done.set()
        watcher.join(30)
    assert run.returncode == 0, run.stderr[-3000:]
    assert seen - before, "no listener of the Ray Train workers was seen"
    assert not [s for s in seen if s[1] not in LOOPBACK], f"listening beyond loopback: {seen}"
    ray_job = Job.load(jobs_dir / json.loads(run.stdout)["job_id"])
    assert ray_job.status is JobStatus.DONE, ray_job.error
    # The same run by hand: two local processes with a TF_CONFIG of two loopback workers (bind shim: loopback only).
    workers = {"worker": [f"127.0.0.1:{cluster.new_port()}" for _ in range(2)]}  # two distinct ports
    procs = []
    for index in range(2):
        env = {**cluster.env, "TF_CONFIG": json.dumps({"cluster": workers, "task": {"type": "worker", "index": index}})}
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "digits_core",
                    "--jobs-dir",
                    str(jobs_dir),
                    "train",
                    "--name",
                    "local-2",
                    *common,
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = [proc.communicate(timeout=JOB_TIMEOUT) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _out, err in outputs]
    local_job = Job.load(jobs_dir / json.loads(outputs[0][0])["job_id"])

    ray_info, ray_final = _final(ray_job)
    local_info, local_final = _final(local_job)
    for info in (ray_info, local_info):
        assert info["distributed"]["strategy"] == "MultiWorkerMirroredStrategy"
        assert info["distributed"]["num_workers"] == 2 and info["steps_per_epoch"] == 6  # 192 images / 32
    assert set(ray_final) == set(local_final) and {"loss", "val_loss", "val_accuracy"} <= set(ray_final)
    for key, value in local_final.items():
        assert ray_final[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert ray_final["val_accuracy"] > 0.9  # bright vs dark: a real result, not two equal failures


def test_a_node_killed_mid_job_ends_it_in_error_and_it_resumes(scheduler, dataset, jobs_dir, cluster):
    """The extra node dies (kill -9 of all its processes) while it trains: Error naming Ray's failure; resume."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    head_id = next(n["NodeID"] for n in cluster.alive_nodes() if n["NodeManagerAddress"] == "127.0.0.1")

    @ray.remote(num_cpus=1)
    class Placeholder:  # holds the head's only CPU so the job must go to the extra node
        def ready(self):
            return True

    holder = Placeholder.options(scheduling_strategy=NodeAffinitySchedulingStrategy(head_id, soft=False)).remote()
    ray.get(holder.ready.remote(), timeout=60)
    try:
        job = _model_job(jobs_dir, dataset, "ray-node-dies", epochs=500)
        scheduler.submit(job)
        wait_until(lambda: _epochs_done(job) >= 1, "a first snapshot")
        assert job.reload().data["placement"]["node_id"] != head_id
        cluster.kill_node()
        job = scheduler.wait(job.id, JOB_TIMEOUT)
    finally:
        ray.kill(holder)
    assert job.status is JobStatus.ERROR
    assert "Ray task running this job failed" in job.error and "can be resumed" in job.error
    done = _epochs_done(job)
    scheduler.resume(job, epochs=done + 1)  # on the head, now the only node
    job = scheduler.wait(job.id, JOB_TIMEOUT)
    assert job.status is JobStatus.DONE, job.error
    assert job.data["placement"]["node_id"] == head_id and _epochs_done(job) == done + 1
    cluster.add_node()  # leave the cluster as the module found it


def _image_folder(root):
    """48 random 8x8 PNGs in two class folders, plus one file that is no image."""
    from PIL import Image

    rng = np.random.default_rng(1)
    for i in range(48):
        folder = root / f"c{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(folder / f"{i:03d}.png")
    (root / "c1" / "broken.png").write_bytes(b"not an image")


def _contents(job):
    """Everything a dataset build decides: records per stage, mean, histograms, encodings, errors."""
    from digits_core.datasets import open_dataset

    ds = open_dataset(job.path)
    try:
        return {
            "records": {s: [bytes(r) for r in ds.read_records(s, 0, None)] for s in ds.stages},
            "mean": ds.mean().tolist(),
            "histograms": {s: ds.label_histogram(s) for s in ds.stages},
            "encodings": {s: ds.feature_encodings(s) for s in ds.stages},
            "errors": ds.errors(),
            "skipped": job.data["dataset"]["skipped"],
        }
    finally:
        ds.close()


def test_dataset_encoding_fans_out_over_the_cluster_and_equals_a_local_build(scheduler, cluster, jobs_dir, tmp_path):
    """Chunks encoded by Ray tasks (from a job's Ray task, and from `digits dataset create --ray-address`):
    record for record the local build, the bad entry reported alike, chunks on both nodes."""
    import subprocess
    import sys

    from digits_core.datasets import create_dataset, create_dataset_job

    _image_folder(tmp_path / "images")
    form = {"folder": str(tmp_path / "images"), "width": 8, "height": 8, "val_percent": 25}
    local = create_dataset("image-classification", form, name="fan-out-local", jobs_dir=jobs_dir, workers=1)
    expected = _contents(local)
    assert expected["skipped"] == 1 and "broken.png" in expected["errors"][0]["entry"]
    assert sum(map(len, expected["records"].values())) == 48

    queued = create_dataset_job("image-classification", form, name="fan-out-task", jobs_dir=jobs_dir, workers=1)
    scheduler.submit(queued)
    queued = scheduler.wait(queued.id, JOB_TIMEOUT)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(jobs_dir),
            "dataset",
            "create",
            "image-classification",
            "--ray-address",
            cluster.address,
            "--name",
            "fan-out-cli",
            "--json",
            "--folder",
            form["folder"],
            "--width",
            "8",
            "--height",
            "8",
            "--val-percent",
            "25",
        ],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    driver = Job.load(jobs_dir / json.loads(run.stdout)["job"]["id"])
    nodes = _node_ids(cluster)
    for job in (queued, driver):
        assert job.status is JobStatus.DONE, job.error
        assert _contents(job) == expected
        encoding = job.reload().data["placement"]["encoding"]
        assert encoding["executor"] == "ray" and set(encoding["nodes"]) == nodes  # chunks dealt to both nodes
        assert encoding["tasks"] == sum(encoding["nodes"].values()) >= 4  # 2 CPUs: chunks of 7 entries


def _holders(cluster, path):
    """Cluster processes with ``path`` open."""
    holders = set()
    for pid in pids_in_sessions(cluster.sessions()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    holders.add(pid)
            except OSError:
                pass
    return holders


def test_abort_of_a_fanned_out_dataset_job_stops_its_encoding_tasks(scheduler, cluster, jobs_dir, tmp_path):
    """An entry that never finishes reading (a FIFO with a silent writer) holds a chunk's Ray task: abort ends the
    job Aborted and stops that task (no cluster process keeps the FIFO open)."""
    from digits_core.datasets import create_dataset_job

    _image_folder(tmp_path / "images")
    fifo = tmp_path / "images" / "c0" / "stuck.png"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that never writes: a reader's open() returns, its read() waits
    try:
        job = create_dataset_job(
            "image-classification",
            {"folder": str(tmp_path / "images"), "width": 8, "height": 8},
            name="fan-out-abort",
            jobs_dir=jobs_dir,
        )
        scheduler.submit(job)
        wait_until(lambda: _holders(cluster, fifo), "a Ray task to read the stuck entry")
        scheduler.abort(job.id)
        job = scheduler.wait(job.id, 60)
        assert job.status is JobStatus.ABORTED and not job.is_alive
        assert "placement" in job.data and not (job.path / "dataset").exists()
        wait_until(lambda: not _holders(cluster, fifo), "the encoding task to be stopped")
    finally:
        os.close(writer)
