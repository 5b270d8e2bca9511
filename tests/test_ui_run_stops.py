"""The model page states why a run stopped, and its charts read right (issue 43, items 3 and 6).

Early stops (epoch, metric, best epoch, restored weights) and ASHA cuts (rung, cutoff) are stated in the
status line and the status history; epochs are whole numbers where they are whole. The charts: the
early-stopping bookkeeping is no metric panel, one colour per run in every panel, log-scale labels
rounded, a constant series drawn flat, the learning rate never smoothed, legends outside the plot.

Fast tests render the page with Flask's test client. The browser test serves hand-written job folders
(``model.json``, ``metrics.jsonl``: what the engine writes, without training) from a real ``digits serve``
in headless Chromium.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from digits_core.jobs import Job, JobStatus

EARLY = {
    "metric": "val_loss",
    "mode": "min",
    "patience": 2,
    "min_delta": 0.0,
    "stopped_epoch": 5.0,
    "best_epoch": 3.0,
    "best_value": 0.4321,
    "restored_best": True,
    "note": "stopped early at epoch 5 (best val_loss 0.4321 at epoch 3); best weights restored",
}
ASHA_NOTE = (
    "pruned at ASHA's rung of epoch 3: val_accuracy 0.41 at epoch 3 is below the best 1/3 of the trials "
    "that reached this rung (cutoff 0.62)"
)


def _points(epochs: int, wobble: float = 0.0) -> list[dict]:
    """metrics.jsonl points of a run: loss/accuracy per epoch, a constant lr, the early-stop bookkeeping."""
    points = []
    for e in range(1, epochs + 1):
        # a step learning-rate schedule; top5 is constant up to rounding noise (1 and 1 + 1e-12)
        steps = (("lr", 0.1 if e <= epochs // 2 else 0.01), ("top5", 1.0 + (e % 2) * 1e-12))
        for name, value in (("loss", 1.0 / e + wobble), ("accuracy", 0.5 + e / 20), *steps):
            points.append({"epoch": e - 0.5, "step": e * 10 - 5, "name": name, "value": value, "time": 1000.0 + e})
        # the validations fall on fractional epochs (a validation interval of 4/7 of an epoch)
        v = e * 4 / 7 + 4.0
        points.append({"epoch": v, "step": e * 10, "name": "val_loss", "value": 0.9 / e + wobble, "time": 1000.0 + e})
    last = epochs * 4 / 7 + 4.0
    for name, value in (("early_stopped", 1.0), ("early_stopping_best_epoch", 3.0), ("early_stopping_best", 0.4)):
        points.append({"epoch": last, "step": epochs * 10, "name": name, "value": value, "time": 2000.0})
    return points


def make_run(
    jobs: Path,
    dataset_id: str,
    name: str,
    *,
    epochs: int = 40,
    last_epoch: float = 5.0,
    early: dict | None = None,
    note: str | None = None,
    status: JobStatus = JobStatus.DONE,
    wobble: float = 0.0,
) -> Job:
    """A finished model job as the engine leaves it (no snapshots needed for the page's status)."""
    job = Job.create(
        "model",
        name,
        jobs_dir=jobs,
        dataset_id=dataset_id,
        train_options={"network": "lenet", "epochs": epochs},
    )
    job.set_status(JobStatus.RUNNING)
    if note:
        job.finish(status, status_note=note)
    else:
        job.set_status(status)
    record: dict = {"task": "classification", "network": "lenet", "status": status.value}
    if early:
        record.update(stopped_early=True, early_stopping=early)
    (job.path / "model.json").write_text(json.dumps(record))
    points = [p for p in _points(int(last_epoch), wobble) if early or not p["name"].startswith("early")]
    points.append({"epoch": last_epoch, "step": 999, "name": "loss", "value": 0.1 + wobble, "time": 3000.0})
    (job.path / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
    return job


def make_dataset(jobs: Path) -> Job:
    ds = Job.create("dataset", "digits", jobs_dir=jobs, plugin_id="image-classification")
    ds.set_status(JobStatus.DONE)
    return ds


@pytest.fixture
def client(tmp_path):
    from digits_core.web import create_app

    app = create_app(tmp_path / "jobs", start_scheduler=False, testing=True)
    return app.test_client()


def _text(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:p|div|table)>', html, re.DOTALL)
    assert found, f"no #{element_id} on the page"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


# -- fast: the page's words --------------------------------------------------------------------------------------


def test_an_early_stop_is_stated_in_the_status_line_and_history(client, tmp_path):
    jobs = tmp_path / "jobs"
    job = make_run(jobs, make_dataset(jobs).id, "early", early=EARLY, note=EARLY["note"])
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    line = _text(html, "stop-note")
    assert line.startswith("Stopped early at epoch 5 of 40:"), line
    assert "val_loss did not improve for 2 epochs" in line
    assert "best val_loss 0.4321 at epoch 3" in line and "best epoch's weights restored" in line
    assert _text(html, "train-progress") == "Epoch 5 of 40 · stopped early"
    history = _text(html, "status-history")
    assert "Done Stopped early at epoch 5 of 40" in history and "at epoch 3" in history


def test_a_run_started_from_the_cli_takes_its_planned_epochs_from_model_json(client, tmp_path):
    jobs = tmp_path / "jobs"
    job = make_run(jobs, make_dataset(jobs).id, "cli", early=EARLY, note=EARLY["note"])
    job.update(train_options={})
    record = json.loads((job.path / "model.json").read_text())
    (job.path / "model.json").write_text(json.dumps({**record, "options": {"epochs": 30}}))
    line = _text(client.get(f"/models/{job.id}").get_data(as_text=True), "stop-note")
    assert line.startswith("Stopped early at epoch 5 of 30:"), line


def test_an_asha_cut_names_its_rung_and_cutoff(client, tmp_path):
    jobs = tmp_path / "jobs"
    job = make_run(jobs, make_dataset(jobs).id, "trial", last_epoch=3.0, note=ASHA_NOTE, status=JobStatus.STOPPED_EARLY)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    line = _text(html, "stop-note")
    assert line.startswith("Cut by the sweep's ASHA scheduler:")
    assert "rung of epoch 3" in line and "(cutoff 0.62)" in line
    assert "rung of epoch 3" in _text(html, "status-history")


def test_a_run_that_ran_its_course_has_no_stop_note_and_a_whole_epoch(client, tmp_path):
    jobs = tmp_path / "jobs"
    job = make_run(jobs, make_dataset(jobs).id, "plain", epochs=80, last_epoch=5.21)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert 'id="stop-note"' not in html
    assert _text(html, "train-progress") == "Epoch 5 of 80"  # was "Epoch 5.21 of 80"


# -- slow: the charts in a real browser --------------------------------------------------------------------------

PANELS = """() => [...document.querySelectorAll('#metric-panels [data-panel]')].map(p => p.dataset.panel)"""
CHART_STATE = """() => {
  const out = {};
  document.querySelectorAll('#metric-panels [data-panel]').forEach(panel => {
    const chart = Chart.getChart(panel.querySelector('canvas'));
    const y = chart.scales.y;
    out[panel.dataset.panel] = {
      min: y.min, max: y.max,
      sets: chart.data.datasets.map(d => ({label: d.label, color: d.borderColor, ys: d.data.map(p => p.y)})),
      ticks: y.ticks.map(t => String(y.options.ticks.callback.call(y, t.value, 0, y.ticks))),
      area: chart.chartArea.bottom - chart.chartArea.top, canvas: chart.height,
      legend: [...panel.querySelectorAll('.chart-legend li')].map(li => li.textContent)};
  });
  return out;
}"""


@pytest.mark.slow
@pytest.mark.browser
def test_charts_of_an_early_stopped_run_with_an_overlay(chromium, live_server, tmp_path):
    jobs = tmp_path / "jobs"
    ds = make_dataset(jobs)
    other = make_run(jobs, ds.id, "other run", last_epoch=8.0, wobble=0.05)
    job = make_run(jobs, ds.id, "early run", early=EARLY, note=EARLY["note"], last_epoch=8.0)
    trials = [make_run(jobs, ds.id, f"trial {i}", last_epoch=4.0, wobble=i / 100) for i in range(14)]
    server = live_server(jobs)
    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + f"/models/{job.id}")
    page.wait_for_selector("#metric-summary")
    panels = page.evaluate(PANELS)
    assert not any(p.startswith("early") for p in panels), panels  # no "early per class" panel
    assert {"loss", "accuracy", "learning_rate"} <= set(panels)
    # "Best at epoch": a whole epoch as a whole number, a fractional one with two decimals
    best = page.eval_on_selector_all(
        "#metric-summary tbody tr",
        "rows => Object.fromEntries(rows.map(r => [r.dataset.metric, r.cells[3].textContent]))",
    )
    assert best["loss"] == "8" and best["val_loss"] == "8.57", best

    # smoothing never bends the learning rate; log scale labels a constant series briefly and draws it flat
    page.fill('[data-control="smoothing"]', "0.9")
    page.dispatch_event('[data-control="smoothing"]', "input")
    page.check('[data-control="log"]')
    state = page.evaluate(CHART_STATE)
    assert state["learning_rate"]["sets"][0]["ys"] == [0.1] * 4 + [0.01] * 4  # the steps as they were
    assert state["loss"]["sets"][0]["ys"][1] != 0.5  # (the smoothing did reach the loss)
    top5 = state["top5"]
    assert all(len(t) <= 8 for t in top5["ticks"]), top5["ticks"]  # no "1.00000000000000000000"
    assert top5["max"] / top5["min"] >= 2, top5  # flat in a range around it, not a zig-zag of 1e-12

    # overlay the other run: one colour per run in every panel; the legend is outside the plot
    page.click("#overlay-runs summary")
    page.check(f'#overlay-runs input[value="{other.id}"]')
    page.wait_for_function("() => document.getElementById('overlay-runs').dataset.overlaid === '1'")
    state = page.evaluate(CHART_STATE)
    colours: dict[str, set] = {}
    for key in ("loss", "accuracy", "learning_rate"):
        for s in state[key]["sets"]:
            colours.setdefault(s["label"].split(" · ")[0] if " · " in s["label"] else "this run", set()).add(s["color"])
        assert len(state[key]["legend"]) == len(state[key]["sets"]) >= 2
        assert state[key]["area"] >= 0.6 * state[key]["canvas"], state[key]  # the legend squeezes nothing
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len(set().union(*colours.values())) == 2, colours

    # The comparison (sweep) page: 16 runs; its curves keep their height under the legend and follow the
    # window when it narrows to a phone and widens again.
    ids = ",".join([job.id, other.id] + [t.id for t in trials])
    page.goto(server.url + f"/compare?jobs={ids}")
    page.wait_for_selector("body[data-sweep-charts=ready]")
    size = "() => { const c = Chart.getChart(document.getElementById('chart-curves')); return [c.width, c.chartArea.bottom - c.chartArea.top]; }"
    wide, area = page.evaluate(size)
    assert area >= 150, f"the curves are {area} px tall under their legend"
    assert page.locator("#curves-legend li").count() == 16
    from browser_support import assert_fits_a_phone

    assert_fits_a_phone(page, "compare page")
    # That check narrowed the window and widened it again: the chart first follows it back to its width.
    page.wait_for_function(f"() => Chart.getChart(document.getElementById('chart-curves')).width >= {wide}")
    page.set_viewport_size({"width": 375, "height": 800})
    # Chart.js follows the window through a resize observer: it may pass through widths in between first.
    page.wait_for_function("() => Chart.getChart(document.getElementById('chart-curves')).width <= 375")
    narrow = page.evaluate(size)
    assert narrow[0] <= 375 and narrow[1] >= 150, narrow
    page.set_viewport_size({"width": 1280, "height": 900})
    page.wait_for_function("() => Chart.getChart(document.getElementById('chart-curves')).width > 480")
    assert not errors, errors
