"""Hyper-parameter sweeps on Ray Tune (issue 30): pruning, abort, budget, the comparison page and POST /api/sweeps.

Fast tests lay out a sweep's files by hand (``.sweeps/ID/sweep.json``, trial jobs with their
``metrics.jsonl``) and drive the Flask test client. The slow tests run real sweeps on Ray Tune
(Ray on 127.0.0.1, tiny data, 2-3 epochs, max_concurrent 1 so the trials' order is known) and
look at the comparison page of a real ``digits serve`` in headless Chromium.
"""

from __future__ import annotations

import json
import time

import pytest

from digits_core.jobs import Job, JobStatus, write_json_atomic
from digits_core.sweeps.space import parse_spaces, random_trials


def fake_sweep(jobs_dir, curves: dict, statuses: dict, grid_size=4, max_epochs=3):
    """A sweep record and one Done/Stopped-early model job per trial, with val_accuracy curves."""
    folder = jobs_dir / ".sweeps" / "s1"
    folder.mkdir(parents=True)
    trials = [{"learning_rate": lr} for lr in curves]
    record = {
        "id": "s1",
        "name": "demo",
        "group": "demo",
        "dataset": "d",
        "network": "lenet",
        "status": "Done",
        "settings": {
            "scheduler": "asha",
            "metric": "val_accuracy",
            "mode": "max",
            "max_epochs": max_epochs,
            "trials": len(trials),
            "grace_period": 1,
            "reduction_factor": 3.0,
            "max_concurrent": 1,
            "seed": 0,
        },
        "search": ["learning_rate=choice(" + ",".join(map(str, curves)) + ")"],
        "grid_size": grid_size,
        "trials": trials,
        "options": {},
        "spaces": {},
    }
    write_json_atomic(folder / "sweep.json", record)
    for index, (lr, curve) in enumerate(curves.items()):
        job = Job.create(
            "model",
            f"demo #{index + 1} lr={lr}",
            jobs_dir=jobs_dir,
            group="demo",
            sweep={"learning_rate": lr},
            network="lenet",
        )
        job.set_status(JobStatus.RUNNING)
        lines = [
            json.dumps({"epoch": e + 1, "step": e + 1, "name": "val_accuracy", "value": v}) for e, v in enumerate(curve)
        ]
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
    fake_sweep(jobs_dir, {0.1: [0.5, 0.7, 0.9], 0.01: [0.4], 0.001: [0.6, 0.8, 0.85]}, {0.01: JobStatus.STOPPED_EARLY})
    return jobs_dir


def test_the_json_twin_ranks_trials_by_the_metric_and_counts_the_budget_against_the_grid(client, sweep):
    data = client.get("/sweeps/s1.json").get_json()
    assert [row["values"]["learning_rate"] for row in data["trials"]] == [0.1, 0.001, 0.01]
    assert [row["best"] for row in data["trials"]] == [0.9, 0.85, 0.4]
    assert data["trials"][2]["status"] == "Stopped early" and data["trials"][2]["rung"] == 1
    assert data["budget"] == {
        "epochs_spent": 7,
        "trial_epochs": 9,
        "grid_size": 4,
        "grid_epochs": 12,
        "fraction_of_grid": round(7 / 12, 4),
    }
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


def test_promotion_names_the_trial_on_the_page_the_api_and_the_command_line(app, client, sweep, token):
    from conftest import run_digits

    rows = client.get("/sweeps/s1.json").get_json()["trials"]
    best, other = rows[0]["job_id"], rows[1]["job_id"]
    assert (
        client.post(
            "/sweeps/s1/promote", data={"csrf_token": token, "job_id": best, "name": "  best lenet  "}
        ).status_code
        == 302
    )
    store = app.extensions["digits"]["store"]
    assert store.get(best).name == "best lenet" and store.get(best).status is JobStatus.DONE
    assert "promoted: " + best + " (best lenet)" in client.get("/sweeps/s1").get_data(as_text=True)
    assert client.get("/sweeps/s1.json").get_json()["trials"][0]["name"] == "best lenet"
    refused = client.post(
        "/sweeps/s1/promote", json={"job_id": other, "name": "x" * 201}, headers={"X-CSRFToken": token}
    )
    assert refused.status_code == 400 and "1 to 200 characters" in refused.get_json()["error"]["fields"]["name"][0]
    assert client.get("/sweeps/s1.json").get_json()["promoted"] == best  # the refusal changed nothing
    done = run_digits("--jobs-dir", str(sweep), "sweep", "promote", "s1", "--job", other, "--name", "runner-up")
    assert done.returncode == 0, done.stderr
    assert f"promoted {other} (runner-up)" in done.stdout
    assert store.get(other).name == "runner-up" and store.get(best).name == "best lenet"
    assert client.get("/sweeps/s1.json").get_json()["promoted"] == other


def test_any_picked_models_compare_on_any_metric(client, sweep):
    rows = client.get("/sweeps/s1.json").get_json()["trials"]
    ids = ",".join(row["job_id"] for row in rows[1:])
    data = client.get(f"/compare.json?jobs={ids}&metric=val_accuracy&mode=min").get_json()
    assert [row["best"] for row in data["trials"]] == [0.4, 0.6]  # min: the lowest value of each curve, ranked
    assert client.get(f"/compare?jobs={ids}").status_code == 200
    assert client.get("/compare.json?jobs=nope").status_code == 404


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({"dataset": "d", "search": ["learning_rate=loguniform(-1,1)"]}, "learning_rate", "must be above 0"),
        ({"dataset": "d", "search": {"frobnication": "choice(1,2)"}}, "frobnication", "unknown training option"),
        ({"dataset": "d", "search": ["solver=choice(sgd,lbfgs)"]}, "solver", "is not a choice of solver"),
        ({"dataset": "d", "search": ["learning_rate=0.1,0.2"], "scheduler": "hyperband"}, "scheduler", "choose one"),
        ({"dataset": "d", "search": ["learning_rate=0.1"], "colour": "red"}, "colour", "unknown key"),
        ({"dataset": "d", "search": ["network=choice(lenet,/etc/net.py)"]}, "network", "not accepted over the web"),
        ({"dataset": "d", "network": "/tmp/x.py", "search": ["learning_rate=0.1"]}, "network", "not accepted"),
    ],
)
def test_post_api_sweeps_refuses_a_bad_request_on_its_field_and_creates_nothing(
    client, token, app, body, field, message
):
    answer = client.post("/api/sweeps", json=body, headers={"X-CSRFToken": token})
    assert answer.status_code == 400
    assert message in answer.get_json()["error"]["fields"][field][0]
    assert not (app.extensions["digits"]["jobs_dir"] / ".sweeps").exists()


# -- real sweeps on Ray Tune ---------------------------------------------------------------------

#: Seeded (seed 1) on the shapes: Adam 0.01 has 0.575 val accuracy after one epoch; SGD at 5.0 kills the
#: network at once (0.325, chance), so ASHA's first rung must cut it.
GOOD, DEAD = {"solver": "adam", "learning_rate": 0.01}, {"solver": "sgd", "learning_rate": 5.0}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny shapes dataset and Ray on 127.0.0.1 for the module's sweeps (shut down after its last test)."""
    import os

    from synthetic_plugins import SyntheticShapes

    from digits_core import registry
    from digits_core.datasets import create_dataset

    root = tmp_path_factory.mktemp("tune")
    jobs = root / "jobs"
    registry.register(SyntheticShapes)
    try:
        dataset = create_dataset(
            "synthetic-shapes", {"count": 96, "val_count": 40, "size": 16, "classes": 3}, workers=1, jobs_dir=jobs
        )
    finally:
        registry.unregister(SyntheticShapes)
    from digits_core.sweeps.trials import _release_ray, _start_ray

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _start_ray(None)  # one Ray for the module's sweeps (each sweep is one more user of it)
    yield {"root": root, "jobs": jobs, "dataset": dataset.id}
    _release_ray()


def _seed_for(spaces, trials, wanted):
    """A seed whose random trials start with ``wanted`` (so the order, hence ASHA's decisions, is known)."""
    return next(seed for seed in range(1000) if random_trials(spaces, trials, seed)[: len(wanted)] == wanted)


@pytest.fixture(scope="module")
def asha_sweep(world):
    from digits_core.sweeps.tune import tune

    search = ["solver=choice(adam,sgd)", "learning_rate=choice(0.01,5.0)"]
    seed = _seed_for(parse_spaces(search), 3, [GOOD, DEAD, GOOD])
    from digits_core.submit.records import job_owner

    owner = job_owner.set("ada")  # started as in a signed-in web request (the accounts gate sets the owner)
    handle = tune(
        world["dataset"],
        "lenet",
        "shapes",
        search=search,
        scheduler="asha",
        trials=3,
        max_epochs=2,
        grace_period=1,
        reduction_factor=2,
        max_concurrent=1,
        search_seed=seed,
        jobs_dir=world["jobs"],
        lr_policy="fixed",
        batch_size=16,
        seed=1,
    )
    job_owner.reset(owner)
    return handle, handle.wait(timeout=600)


@pytest.mark.slow
def test_a_sweeps_trials_belong_to_the_user_who_started_it(world, asha_sweep):
    """Trials are made on Ray workers, outside the request: the sweep's record carries its owner to them (issue 47)."""
    from digits_core.sweeps.tune import read_sweep

    handle, summary = asha_sweep
    assert read_sweep(handle.sweep_id, world["jobs"])["owned_by"] == "ada"
    owners = {Job.load(world["jobs"] / t["job_id"]).data.get("owned_by") for t in summary["trials"]}
    assert owners == {"ada"} and len(summary["trials"]) == 3


@pytest.mark.slow
def test_asha_cuts_the_hopeless_trial_at_its_rung_as_stopped_early_and_keeps_its_files(world, asha_sweep):
    from digits_core.engine.jobio import read_model_info
    from digits_core.jobs import JobStore

    handle, summary = asha_sweep
    assert summary["status"] == "Done" and not summary["pending"]
    by_index = {row["index"]: row for row in summary["trials"]}
    assert [by_index[i]["values"] for i in range(3)] == [GOOD, DEAD, GOOD]
    dead = by_index[1]
    assert dead["status"] == "Stopped early" and dead["rung"] == 1 and dead["epochs"] == 1
    assert dead["status_note"].startswith("pruned at ASHA's rung of epoch 1: val_accuracy")
    assert by_index[0]["status"] == "Done" and by_index[0]["epochs"] == 2
    job = JobStore(world["jobs"]).get(dead["job_id"])
    info = read_model_info(job.path)
    assert info["status"] == "Stopped early" and info["snapshots"] and info["last_epoch"] == 1
    assert job.group == "shapes" and job.data["sweep"] == DEAD
    assert summary["trials"][0]["values"] == GOOD  # ranked by val_accuracy, best first
    assert summary["budget"]["epochs_spent"] < summary["budget"]["trial_epochs"] == 6
    assert summary["budget"]["grid_epochs"] == 8  # 2 × 2 choices × 2 epochs


@pytest.mark.slow
def test_aborting_a_sweep_stops_the_running_trial_keeps_the_finished_one_and_a_resume_completes_it(world):
    from digits_core.engine.jobio import read_metrics, read_model_info
    from digits_core.jobs import JobStore
    from digits_core.sweeps.tune import read_sweep, resume_sweep, tune

    # grid order: patience 1 (ends Done at epoch 2: nothing counts as better), 24 (runs to 25), then 2
    handle = tune(
        world["dataset"],
        "lenet",
        "abortme",
        search=["early_stopping_patience=1,24,2"],
        scheduler="grid",
        max_epochs=25,
        max_concurrent=1,
        jobs_dir=world["jobs"],
        solver="sgd",
        learning_rate=0.05,
        batch_size=32,
        early_stopping_metric="val_loss",
        early_stopping_min_delta=1000.0,
        metric="val_loss",
    )
    store = JobStore(world["jobs"])
    deadline = time.monotonic() + 300
    while True:
        started = read_sweep(handle.sweep_id, world["jobs"])["trials_started"]
        if 1 in started and len([p for p in read_metrics(store.get(started[1]).path) if p["name"] == "val_loss"]) >= 2:
            break
        assert time.monotonic() < deadline and handle.running, "the second trial never got going"
        time.sleep(0.2)
    first = store.get(started[0])
    first_files = sorted(p.name for p in first.path.rglob("*"))
    handle.abort()
    summary = handle.wait(timeout=300)
    assert summary["status"] == "Aborted" and summary["pending"] == [{"early_stopping_patience": 2}]
    aborted = store.get(started[1])
    assert aborted.status is JobStatus.ABORTED and aborted.data.get("status_note") is None
    stopped_at = read_model_info(aborted.path)["last_epoch"]
    assert 2 <= stopped_at < 25
    again = store.get(started[0])
    assert again.status is JobStatus.DONE and again.data["status_note"].startswith("stopped early at epoch 2")
    assert sorted(p.name for p in again.path.rglob("*")) == first_files

    # resume: the aborted trial continues in its own job from its snapshot, the one never started runs now
    summary = resume_sweep(handle.sweep_id, world["jobs"]).wait(timeout=300)
    assert summary["status"] == "Done" and not summary["pending"]
    resumed = store.get(started[1])
    assert resumed.status is JobStatus.DONE and read_model_info(resumed.path)["last_epoch"] == 25
    assert [s for s, _ in resumed.status_history].count("Running") == 2
    started = read_sweep(handle.sweep_id, world["jobs"])["trials_started"]
    assert store.get(started[2]).status is JobStatus.DONE
    assert sorted(p.name for p in store.get(started[0]).path.rglob("*")) == first_files


@pytest.mark.slow
@pytest.mark.browser
def test_the_comparison_page_in_a_browser_ranks_draws_and_promotes(world, asha_sweep, chromium):
    from live_server import running_server

    handle, summary = asha_sweep
    with running_server(world["jobs"], log_dir=world["root"], cwd=world["root"]) as server:
        page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{server.url}/sweeps/{handle.sweep_id}")
        page.wait_for_selector("body[data-sweep-charts=ready]")
        rows = page.locator("#trials tbody tr")
        assert rows.count() == 3
        assert rows.nth(0).get_attribute("data-job") == summary["trials"][0]["job_id"]
        assert rows.nth(2).get_attribute("data-status") == "Stopped early"
        assert "rung 1:" in rows.nth(2).inner_text()
        assert page.locator("#budget-spent").inner_text() == f"{summary['budget']['epochs_spent']:g}"
        assert page.evaluate("Chart.getChart('chart-curves').data.datasets.length") == 3
        assert page.evaluate("Chart.getChart('chart-parallel').data.labels") == [
            "learning_rate",
            "solver",
            "val_accuracy",
        ]
        from browser_support import assert_fits_a_phone

        assert_fits_a_phone(page, "a sweep's comparison page", screenshot="sweep-375")
        page.click("#promote-best")
        page.wait_for_selector("#promoted")
        assert summary["trials"][0]["job_id"] in page.locator("#promoted").inner_text()
        twin = json.loads(page.goto(f"{server.url}/sweeps/{handle.sweep_id}.json").text())
        assert twin["promoted"] == summary["trials"][0]["job_id"]
        assert not errors, errors


@pytest.mark.slow
def test_the_new_model_form_starts_a_search_and_lands_on_its_comparison_page(world):
    """The Search panel's Create runs the same sweep as POST /api/sweeps: a real one-trial grid on Ray Tune."""
    from test_web_models import form_values

    from digits_core.web import create_app

    app = create_app(world["jobs"], start_scheduler=False, testing=True, data_roots=[world["root"]])
    client = app.test_client()
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    dataset = app.extensions["digits"]["store"].get(world["dataset"], kind="dataset")
    values = form_values(
        token,
        dataset,
        model_name="form search",
        batch_size="16",
        lr_policy="fixed",
        search="learning_rate=0.01",
        search_scheduler="grid",
        search_max_epochs="1",
        search_max_concurrent="1",
    )
    answer = client.post("/models/new", data=values)
    assert answer.status_code == 302, answer.get_data(as_text=True)[:2000]
    sweep_id = answer.headers["Location"].rsplit("/", 1)[1]
    summary = app.extensions["digits"]["sweeps"][sweep_id].wait(timeout=300)
    from digits_core.sweeps.tune import read_sweep

    (trial,) = summary["trials"]
    assert trial["status"] == "Done" and trial["values"] == {"learning_rate": 0.01} and trial["epochs"] == 1
    record = read_sweep(sweep_id, world["jobs"])
    assert record["name"] == "form search" and record["settings"]["scheduler"] == "grid"
    assert record["options"]["batch_size"] == 16 and "learning_rate" not in record["options"]  # the search's
    assert client.get(f"/sweeps/{sweep_id}").status_code == 200
