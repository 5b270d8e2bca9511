"""The comparison page (issue 43 item 6): differing options as columns, a metric chooser, parallel-coordinates
axes with their values (log for rates and log-uniform spaces, categories for choices), "compare ticked".

Fast tests write model jobs by hand (``job.json`` with training options, ``metrics.jsonl``) and read
``/compare`` and ``/compare.json`` through Flask's test client; the slow one ticks two models on the home
page of a real ``digits serve`` in headless Chromium and follows "Compare ticked models".
"""

from __future__ import annotations

import json
import re

import pytest

from digits_core.jobs import Job, JobStatus
from digits_core.sweeps.axes import differing_options, parallel_axes

RUNS = {  # name: (training options, val_accuracy curve, val_loss curve)
    "adam fast": (
        {"network": "lenet", "epochs": 3, "learning_rate": 0.01, "solver": "adam"},
        [0.5, 0.7, 0.8],
        [1.0, 0.6, 0.5],
    ),
    "sgd slow": (
        {"network": "lenet", "epochs": 3, "learning_rate": 0.0001, "solver": "sgd"},
        [0.3, 0.4, 0.5],
        [1.2, 1.1, 0.3],
    ),
    "sgd mid": (
        {"network": "lenet", "epochs": 3, "learning_rate": 0.001, "solver": "sgd"},
        [0.4, 0.6, 0.7],
        [1.1, 0.8, 0.7],
    ),
}


def make_runs(jobs) -> dict[str, str]:
    """The three runs of :data:`RUNS` as finished model jobs; name -> id."""
    ids = {}
    for name, (options, accuracy, loss) in RUNS.items():
        job = Job.create("model", name, jobs_dir=jobs, train_options=options, network=options["network"])
        job.set_status(JobStatus.RUNNING)
        job.set_status(JobStatus.DONE)
        points = [
            {"epoch": e + 1, "step": e, "name": metric, "value": value}
            for metric, curve in (("val_accuracy", accuracy), ("val_loss", loss), ("loss", loss), ("lr", [0.1] * 3))
            for e, value in enumerate(curve)
        ]
        (job.path / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
        (job.path / "model.json").write_text(json.dumps({"task": "classification", "network": "lenet"}))
        ids[name] = job.id
    return ids


@pytest.fixture
def client(tmp_path):
    from digits_core.web import create_app

    return create_app(tmp_path / "jobs", start_scheduler=False, testing=True).test_client()


def test_axes_scale_rates_in_log_choices_as_categories_and_carry_labelled_ticks():
    assert differing_options([{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 1}]) == ["b"]
    rows = [
        {"values": {"learning_rate": lr, "solver": s}, "best": b}
        for lr, s, b in [(0.01, "adam", 0.8), (0.0001, "sgd", 0.5)]
    ]
    rate, solver, metric = parallel_axes(rows, ["learning_rate", "solver"], "val_accuracy")
    assert rate["scale"] == "log" and rate["positions"] == [1.0, 0.0]
    assert [t["label"] for t in rate["ticks"]] == ["0.0001", "0.001", "0.01"] and rate["ticks"][1]["at"] == 0.5
    assert solver["scale"] == "category" and [t["label"] for t in solver["ticks"]] == ["adam", "sgd"]
    assert metric["scale"] == "linear" and [t["label"] for t in metric["ticks"]] == ["0.5", "0.65", "0.8"]
    (space,) = parallel_axes(rows, ["learning_rate"], "m", {"learning_rate": "choice"})[:1]
    assert space["scale"] == "category"  # a searched choice stays a choice, numbers or not


def test_compare_shows_the_differing_options_as_columns_and_ranks_by_the_chosen_metric(client, tmp_path):
    ids = make_runs(tmp_path / "jobs")
    picked = ",".join(ids.values())
    data = client.get(f"/compare.json?jobs={picked}").get_json()
    assert data["options"] == ["learning_rate", "solver"]  # epochs and network are the same: no columns
    assert [row["name"] for row in data["trials"]] == ["adam fast", "sgd mid", "sgd slow"]
    assert data["trials"][0]["values"] == {"learning_rate": 0.01, "solver": "adam"}
    assert data["metrics"][:2] == ["val_accuracy", "val_loss"] and "lr" not in data["metrics"]
    assert [a["name"] for a in data["axes"]] == ["learning_rate", "solver", "val_accuracy"]

    html = client.get(f"/compare?jobs={picked}").get_data(as_text=True)
    heads = re.findall(r'<th class="option-col" data-option="([^"]+)"', html)
    assert heads == ["learning_rate", "solver"]
    cells = re.findall(r'<td class="option-value" data-option="learning_rate">([^<]*)</td>', html)
    assert cells == ["0.01", "0.001", "0.0001"]
    chooser = re.search(r'<select[^>]*id="metric-choice".*?</select>', html, re.S).group(0)
    assert re.findall(r'<option value="([^"]+)"', chooser)[:2] == ["val_accuracy", "val_loss"]

    by_loss = client.get(f"/compare.json?jobs={picked}&metric=val_loss").get_json()
    assert by_loss["mode"] == "min" and [row["best"] for row in by_loss["trials"]] == [0.3, 0.5, 0.7]


@pytest.mark.slow
@pytest.mark.browser
def test_compare_ticked_models_from_the_home_page(chromium, live_server, tmp_path):
    from axe_support import axe_violations

    jobs = tmp_path / "jobs"
    ids = make_runs(jobs)
    server = live_server(jobs)
    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + "/")
    link = page.locator("#compare-ticked")
    assert link.get_attribute("aria-disabled") == "true"
    page.check(f'#models-table .job-select[value="{ids["adam fast"]}"]')
    page.check(f'#models-table .job-select[value="{ids["sgd slow"]}"]')
    assert link.get_attribute("aria-disabled") == "false" and link.inner_text() == "Compare ticked models (2)"
    from browser_support import assert_fits_a_phone

    assert_fits_a_phone(page, "home page with Compare ticked models")
    link.click()
    page.wait_for_selector("body[data-sweep-charts=ready]")
    assert sorted(page.url.split("jobs=")[1].replace("%2C", ",").split(",")) == sorted(
        [ids["adam fast"], ids["sgd slow"]]
    )
    assert page.locator("th.option-col").all_inner_texts() == ["learning_rate", "solver"]
    axes = page.eval_on_selector_all(
        "#parallel-axes dt", "terms => terms.map(t => [t.textContent, t.nextElementSibling.textContent])"
    )
    assert axes == [
        ["learning_rate (log scale)", "0.0001 · 0.001 · 0.01"],
        ["solver (choices)", "adam · sgd"],
        ["val_accuracy", "0.5 · 0.65 · 0.8"],
    ], axes
    drawn = page.evaluate(
        "() => Chart.getChart(document.getElementById('chart-parallel')).data.datasets.map(d => d.data)"
    )
    assert sorted(drawn) == [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]  # every axis has its value, none empty

    page.select_option("#metric-choice", "val_loss")
    page.click("#metric-apply")
    page.wait_for_selector("body[data-sweep-charts=ready]")
    assert "metric=val_loss" in page.url and page.locator("#trials thead th").nth(4).inner_text() == "val_loss"
    assert not axe_violations(page, "compare page")
    assert not errors, errors
