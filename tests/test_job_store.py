"""The job store's writer API: the transition table, locked updates that lose nothing, listeners."""

import subprocess
import sys
import textwrap

import pytest

from digits_core.jobs import (
    TRANSITIONS,
    IllegalTransitionError,
    Job,
    JobStatus,
    JobStore,
    add_status_listener,
)

# Each process adds its own keys one at a time: a read-modify-write without the record lock
# drops keys the other process wrote between this one's read and its write.
RACER = textwrap.dedent("""
    import sys
    from digits_core.jobs import Job

    job = Job.load(sys.argv[1])
    prefix, count = sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # start together
    for i in range(count):
        job.update(**{f"{prefix}{i}": i})
""")


def _race(script: str, target: str, roles: tuple[str, ...], count: int) -> None:
    """Run ``script TARGET ROLE COUNT`` in one process per role, released together; each must succeed."""
    procs = [
        subprocess.Popen([sys.executable, "-c", script, target, role, str(count)], stdin=subprocess.PIPE, text=True)
        for role in roles
    ]
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0


def test_two_processes_updating_one_job_lose_nothing(tmp_path):
    job = Job.create("dataset", "d", jobs_dir=tmp_path, plugin_id="p")
    count = 150
    _race(RACER, str(job.path), ("a", "b"), count)
    record = job.reload().data
    lost = [f"{p}{i}" for p in "ab" for i in range(count) if f"{p}{i}" not in record]
    assert not lost, f"{len(lost)} updates lost"
    assert record["plugin_id"] == "p" and job.status is JobStatus.INITIALIZED


def test_update_keeps_what_another_writer_saved(tmp_path):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    other = Job.load(job.path)
    other.update(group="g1")
    job.update(network="lenet")  # job's in-memory copy predates other's write
    record = Job.load(job.path).data
    assert record["group"] == "g1" and record["network"] == "lenet"
    job.forget("group")
    assert "group" not in Job.load(job.path).data and job.network == "lenet"


@pytest.mark.parametrize("terminal", [JobStatus.DONE, JobStatus.ERROR, JobStatus.ABORTED])
def test_a_terminal_state_is_left_only_by_resume(tmp_path, terminal):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    job.set_status(JobStatus.RUNNING)
    job.finish(terminal, error="x" if terminal is not JobStatus.DONE else None)
    for status in JobStatus:
        with pytest.raises(IllegalTransitionError, match=f"from {terminal.value} to {status.value}.*resumed"):
            job.set_status(status)
    assert job.reload().status is terminal and len(job.status_history) == 3  # nothing written
    job.resume(resume_epochs=3)
    assert job.status is JobStatus.WAITING and job.data["resume_epochs"] == 3


def test_the_check_uses_the_status_on_disk(tmp_path):
    """A process holding a stale copy cannot overwrite a status another process finished."""
    job = Job.create("model", "m", jobs_dir=tmp_path)
    stale = Job.load(job.path)
    job.set_status(JobStatus.ABORTED, error="Aborted by the user.")
    with pytest.raises(IllegalTransitionError):
        stale.set_status(JobStatus.DONE)
    assert JobStore(tmp_path).get(job.id).error == "Aborted by the user."


def test_illegal_moves_and_finish_and_resume_refusals(tmp_path):
    job = Job.create("model", "m", jobs_dir=tmp_path)
    with pytest.raises(IllegalTransitionError, match="finish"):
        job.finish(JobStatus.RUNNING)
    with pytest.raises(IllegalTransitionError, match="only a finished job"):
        job.resume()
    job.set_status(JobStatus.RUNNING)
    with pytest.raises(IllegalTransitionError, match="from Running to Waiting"):
        job.set_status(JobStatus.WAITING)
    job.finish(JobStatus.DONE, network="lenet")
    assert job.reload().network == "lenet" and not job.is_alive  # the owner lock went with the finish
    assert all(not TRANSITIONS[s] for s in JobStatus if s.is_finished)


def test_listeners_hear_saved_changes_once(tmp_path):
    heard = []

    def listener(job, old, new):
        heard.append((job.id, old, new, Job.load(job.path).status.value))  # saved before the call

    add_status_listener(listener)
    add_status_listener(listener)  # once per listener
    job = Job.create("dataset", "d", jobs_dir=tmp_path)
    job.set_status(JobStatus.WAITING)
    job.set_status(JobStatus.WAITING)  # no change: not heard
    ids = [h for h in heard if h[0] == job.id]
    assert ids == [(job.id, "Initialized", "Waiting", "Waiting")]


def test_unsaved_edits_of_data_are_kept_by_the_next_locked_write(tmp_path):
    """Older code sets ``job.data[key]`` and lets the next status save it: that keeps working."""
    job = Job.create("model", "m", jobs_dir=tmp_path, group="g")
    Job.load(job.path).update(network="lenet")  # another writer
    job.data["task"] = "classification"
    del job.data["group"]
    job.set_status(JobStatus.RUNNING)
    record = Job.load(job.path).data
    assert record["task"] == "classification" and record["network"] == "lenet" and "group" not in record
    job.finish(JobStatus.DONE)
    assert Job.load(job.path).data["task"] == "classification"


# A trainer listing snapshots and appending metrics while another process updates model.json and
# records best metrics: model.json's intents re-read under the record lock, metrics.jsonl gets whole lines.
MODEL_RACER = textwrap.dedent("""
    import sys
    from digits_core.jobs import Job

    job = Job.load(sys.argv[1])
    role, count = sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # start together
    for i in range(count):
        if role == "trainer":
            job.add_snapshot(i, i * 10, f"epoch-{i:03d}.keras", f"epoch-{i:03d}.state.npz")
        else:
            job.update_model(**{f"k{i}": i})
        job.record_metric(i, i * 10, {f"{role}_loss": i / 2, f"{role}_acc": float("nan")})
""")


def test_two_processes_writing_one_model_job_lose_nothing(tmp_path):
    from digits_core.engine.jobio import read_metrics
    from digits_core.jobs.model import read_model_record, record_best, write_model_record

    job = Job.create("model", "m", jobs_dir=tmp_path)
    write_model_record(job.path, {"job_id": job.id, "snapshots": [], "best_metric": None})
    count = 80
    _race(MODEL_RACER, str(job.path), ("trainer", "other"), count)
    record = read_model_record(job.path)
    assert [s["file"] for s in record["snapshots"]] == [f"epoch-{i:03d}.keras" for i in range(count)]
    assert record["last_epoch"] == count - 1 and record["snapshots"][-1]["step"] == (count - 1) * 10
    assert not [i for i in range(count) if record.get(f"k{i}") != i], "model.json updates lost"  # type: ignore[misc]
    points = read_metrics(job)
    assert len(points) == 4 * count and {p["name"] for p in points} == {
        "trainer_loss",
        "trainer_acc",
        "other_loss",
        "other_acc",
    }
    assert all(p["value"] is None for p in points if p["name"].endswith("_acc"))
    job.add_snapshot(3, 30, "epoch-003.keras", "epoch-003.state.npz")  # re-snapshotting an epoch replaces it
    assert [s["file"] for s in job.model_record()["snapshots"]].count("epoch-003.keras") == 1
    assert record_best(job.path, 2, 0.5, "val_loss", lambda new, best: new < best)
    assert not record_best(job.path, 3, 0.7, "val_loss", lambda new, best: new < best)
    best = job.model_record()
    assert (best["best_epoch"], best["best_metric"], best["best_metric_name"]) == (2, 0.5, "val_loss")


SWEEP_RACER = textwrap.dedent("""
    import sys
    from digits_core.sweeps.record import update_sweep_record

    folder, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.stdin.readline()  # start together
    for i in range(count):
        update_sweep_record(folder, **{f"{prefix}{i}": i})
""")


def test_two_processes_updating_one_sweep_record_lose_nothing(tmp_path):
    """The tuning driver's status updates and a promotion from the web page, at once: sweep.json keeps both."""
    from digits_core.sweeps.record import read_sweep_record, update_sweep_record, write_sweep_record

    folder = tmp_path / ".sweeps" / "s1"
    folder.mkdir(parents=True)
    points = [{"learning_rate": 0.1}, {"learning_rate": 0.01}]  # the sampled trials, as tune() writes them
    settings = {"scheduler": "asha", "metric": "val_loss", "mode": "min", "max_epochs": 1}
    whole = {"name": "s", "group": "s", "dataset": "d", "network": "lenet", "settings": settings, "search": []}
    write_sweep_record(folder, {"id": "s1", "status": "Running", "trials": points, **whole})
    count = 60
    _race(SWEEP_RACER, str(folder), ("a", "b"), count)
    update_sweep_record(folder, promoted="job-1")
    record = read_sweep_record(folder)
    lost = [f"{p}{i}" for p in "ab" for i in range(count) if record.get(f"{p}{i}") != i]  # type: ignore[misc]
    assert not lost, f"{len(lost)} updates lost"
    assert (record["id"], record["status"], record["trials"], record["promoted"]) == ("s1", "Running", points, "job-1")
