"""Hyper-parameter sweeps on Ray Tune (issue 30): pruning, abort, budget, the comparison page and POST /api/sweeps.

Fast tests lay out a sweep's files by hand (``.sweeps/ID/sweep.json``, trial jobs with their
``metrics.jsonl``) and drive the Flask test client. The slow tests run real sweeps on Ray Tune
(Ray on 127.0.0.1, tiny data, 2-3 epochs, max_concurrent 1 so the trials' order is known) and
look at the comparison page of a real ``digits serve`` in headless Chromium.
"""

from __future__ import annotations

import json

import pytest

from digits_core.jobs import Job, JobStatus, write_json_atomic


def fake_sweep(jobs_dir, curves: dict, statuses: dict, grid_size=4, max_epochs=3):
    """A sweep record and one Done/Stopped-early model job per trial, with val_accuracy curves."""
    folder = jobs_dir / ".sweeps" / "s1"
    folder.mkdir(parents=True)
    trials = [{"learning_rate": lr} for lr in curves]
    record = {"id": "s1", "name": "demo", "group": "demo", "dataset": "d", "network": "lenet", "status": "Done",
              "settings": {"scheduler": "asha", "metric": "val_accuracy", "mode": "max", "max_epochs": max_epochs,
                           "trials": len(trials), "grace_period": 1, "reduction_factor": 3.0,
                           "max_concurrent": 1, "seed": 0},
              "search": ["learning_rate=choice(" + ",".join(map(str, curves)) + ")"], "grid_size": grid_size,
              "trials": trials, "options": {}, "spaces": {}}
    write_json_atomic(folder / "sweep.json", record)
    for index, (lr, curve) in enumerate(curves.items()):
        job = Job.create("model", f"demo #{index + 1} lr={lr}", jobs_dir=jobs_dir, group="demo",
                         sweep={"learning_rate": lr}, network="lenet")
        job.set_status(JobStatus.RUNNING)
        lines = [json.dumps({"epoch": e + 1, "step": e + 1, "name": "val_accuracy", "value": v})
                 for e, v in enumerate(curve)]
        (job.path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        status = statuses.get(lr, JobStatus.DONE)
        if status is JobStatus.STOPPED_EARLY:
            write_json_atomic(job.path / "prune", {"rung": 1, "reason": "below the cutoff"})
            job.finish(status, status_note="pruned at ASHA's rung of epoch 1: below the cutoff")
        else:
            job.finish(status)
        write_json_atomic(folder / f"trial-{index}.json", {"index": index, "job_id": job.id, "values": trials[index]})
    return record


@pytest.fixture
def sweep(app):
    jobs_dir = app.extensions["digits"]["jobs_dir"]
    fake_sweep(jobs_dir, {0.1: [0.5, 0.7, 0.9], 0.01: [0.4], 0.001: [0.6, 0.8, 0.85]},
               {0.01: JobStatus.STOPPED_EARLY})
    return jobs_dir


def test_the_json_twin_ranks_trials_by_the_metric_and_counts_the_budget_against_the_grid(client, sweep):
    data = client.get("/sweeps/s1.json").get_json()
    assert [row["values"]["learning_rate"] for row in data["trials"]] == [0.1, 0.001, 0.01]
    assert [row["best"] for row in data["trials"]] == [0.9, 0.85, 0.4]
    assert data["trials"][2]["status"] == "Stopped early" and data["trials"][2]["rung"] == 1
    assert data["budget"] == {"epochs_spent": 7, "trial_epochs": 9, "grid_size": 4, "grid_epochs": 12,
                              "fraction_of_grid": round(7 / 12, 4)}
    assert data["best"]["values"] == {"learning_rate": 0.1}
    assert data["trials"][0]["curve"] == [[1, 0.5], [2, 0.7], [3, 0.9]]


def test_the_page_shows_the_ranked_table_the_budget_and_promotes_the_best_with_one_click(client, sweep, token):
    page = client.get("/sweeps/s1").get_data(as_text=True)
    assert page.index("lr=0.1") < page.index("lr=0.001") < page.index("lr=0.01")
    assert "7 epochs spent" in " ".join(page.split()).replace("</span>", "").replace('<span id="budget-spent">', "")
    assert "Stopped early" in page and "rung 1:" in page and 'id="promote-best"' in page
    best = client.get("/sweeps/s1.json").get_json()["best"]["job_id"]
    answer = client.post("/sweeps/s1/promote", data={"csrf_token": token, "job_id": best})
    assert answer.status_code == 302
    assert client.get("/sweeps/s1.json").get_json()["promoted"] == best
    assert 'id="promote-best"' not in client.get("/sweeps/s1").get_data(as_text=True)


def test_any_picked_models_compare_on_any_metric(client, sweep):
    rows = client.get("/sweeps/s1.json").get_json()["trials"]
    ids = ",".join(row["job_id"] for row in rows[1:])
    data = client.get(f"/compare.json?jobs={ids}&metric=val_accuracy&mode=min").get_json()
    assert [row["best"] for row in data["trials"]] == [0.4, 0.6]  # min: the lowest value of each curve, ranked
    assert client.get(f"/compare?jobs={ids}").status_code == 200
    assert client.get("/compare.json?jobs=nope").status_code == 404


@pytest.mark.parametrize("body, field, message", [
    ({"dataset": "d", "search": ["learning_rate=loguniform(-1,1)"]}, "learning_rate", "must be above 0"),
    ({"dataset": "d", "search": {"frobnication": "choice(1,2)"}}, "frobnication", "unknown training option"),
    ({"dataset": "d", "search": ["solver=choice(sgd,lbfgs)"]}, "solver", "is not a choice of solver"),
    ({"dataset": "d", "search": ["learning_rate=0.1,0.2"], "scheduler": "hyperband"}, "scheduler", "choose one"),
    ({"dataset": "d", "search": ["learning_rate=0.1"], "colour": "red"}, "colour", "unknown key"),
])
def test_post_api_sweeps_refuses_a_bad_request_on_its_field_and_creates_nothing(client, token, app, body, field,
                                                                                message):
    answer = client.post("/api/sweeps", json=body, headers={"X-CSRFToken": token})
    assert answer.status_code == 400
    assert message in answer.get_json()["error"]["fields"][field][0]
    assert not (app.extensions["digits"]["jobs_dir"] / ".sweeps").exists()
