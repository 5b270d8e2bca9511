"""Job groups, home search, bulk delete and LR / batch-size sweeps (issue 15).

Fast tests drive the Flask app with its test client (a scheduler that queues but does not
run jobs). The slow tests train a real 2×2 sweep with ``digits train`` (tiny data, one epoch)
and walk the home page and the sweep form of a real ``digits serve`` in headless Chromium;
both share one jobs folder, dataset and server (module-scoped). Screenshots go to
``test-artifacts/``::

    flock /tmp/digits-heavy.lock .venv/bin/python -m pytest tests/test_ui_groups_sweeps.py
"""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest
from test_ui_parity import browser_page  # noqa: F401  (the fixture: headless Chromium, JS errors fail the test)

from digits_core.jobs import Job, JobLock, JobStatus


def make_job(app, kind, name, status=JobStatus.DONE, **fields):
    job = Job.create(kind, name, jobs_dir=app.extensions["digits"]["jobs_dir"], **fields)
    job.set_status(status)
    return job


@pytest.fixture
def dataset(app):
    return make_job(
        app,
        "dataset",
        "digits",
        plugin_id="image-classification",
        dataset={"label": {"kind": "class", "dtype": "int64", "shape": []}},
    )


def models_of(app) -> list[Job]:
    return sorted(app.extensions["digits"]["store"].list("model"), key=lambda j: j.data["created"])


def test_api_sweep_queues_one_job_per_combination_in_one_group(app, client, dataset, token):
    resp = client.post(
        "/api/models",
        headers={"X-CSRFToken": token},
        json={
            "name": "lenet sweep",
            "dataset": dataset.id,
            "network": "lenet",
            "options": {"epochs": 1, "learning_rate": [0.1, 0.01], "batch_size": "32,64", "solver": "adam"},
        },
    )
    assert resp.status_code == 202, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["group"] == "lenet sweep" and len(body["jobs"]) == 4
    jobs = {j.id: j for j in models_of(app)}
    assert [row["id"] for row in body["jobs"]] == list(jobs)  # created in sweep order
    got = [(j.name, j.data["group"], j.data["sweep"], j.data["train_options"]) for j in jobs.values()]
    assert [(name, group, sweep) for name, group, sweep, _ in got] == [
        ("lenet sweep lr=0.1 batch=32", "lenet sweep", {"learning_rate": 0.1, "batch_size": 32}),
        ("lenet sweep lr=0.1 batch=64", "lenet sweep", {"learning_rate": 0.1, "batch_size": 64}),
        ("lenet sweep lr=0.01 batch=32", "lenet sweep", {"learning_rate": 0.01, "batch_size": 32}),
        ("lenet sweep lr=0.01 batch=64", "lenet sweep", {"learning_rate": 0.01, "batch_size": 64}),
    ]
    for _name, _group, sweep, options in got:  # what the scheduler's worker passes to train()
        assert options == {"dataset": dataset.id, "network": "lenet", "epochs": 1, "solver": "adam", **sweep}
    assert app.extensions["digits"]["scheduler"].status()["waiting"] == list(jobs)
    assert body["jobs"][0]["values"] == {"learning_rate": 0.1, "batch_size": 32}


def test_api_single_job_keeps_its_answer_and_takes_a_group(app, client, dataset, token):
    resp = client.post(
        "/api/models",
        headers={"X-CSRFToken": token},
        json={
            "name": "one",
            "dataset": dataset.id,
            "network": "lenet",
            "group": " baseline  runs ",
            "options": {"epochs": 1, "learning_rate": "0.05"},
        },
    )
    assert resp.status_code == 202
    body = resp.get_json()
    (job,) = models_of(app)
    assert body["id"] == job.id and body["group"] == "baseline runs" and "jobs" not in body
    assert job.data["train_options"]["learning_rate"] == 0.05 and "sweep" not in job.data


@pytest.mark.parametrize(
    "options, field, message",
    [
        ({"learning_rate": "0.1,-1"}, "learning_rate", "must be above 0"),
        ({"batch_size": [16, "x"]}, "batch_size", "is not a whole number"),
        ({"learning_rate": "0.1,0.2", "momentum": -1}, "momentum", ""),
    ],
)
def test_api_sweep_with_a_bad_value_queues_nothing(app, client, dataset, token, options, field, message):
    resp = client.post(
        "/api/models",
        headers={"X-CSRFToken": token},
        json={"name": "bad", "dataset": dataset.id, "network": "lenet", "options": {"epochs": 1, **options}},
    )
    assert resp.status_code == 400
    assert message in resp.get_json()["error"]["fields"][field][0]
    assert models_of(app) == [] and app.extensions["digits"]["scheduler"].status()["waiting"] == []


def _form(token, dataset, **changes):
    values = {
        "csrf_token": token,
        "model_name": "web sweep",
        "dataset": dataset.id,
        "network": "lenet",
        "epochs": "1",
        "learning_rate": "0.01",
        "network_params": "{}",
    }
    values.update(changes)
    return values


def test_form_sweep_queues_jobs_and_lands_on_the_group(app, client, dataset, token):
    resp = client.post("/models/new", data=_form(token, dataset, learning_rate="0.05, 0.02", batch_size="8", group=""))
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/?q=web+sweep")
    jobs = models_of(app)
    assert [
        (j.name, j.data["group"], j.data["train_options"]["learning_rate"], j.data["train_options"]["batch_size"])
        for j in jobs
    ] == [("web sweep lr=0.05", "web sweep", 0.05, 8), ("web sweep lr=0.02", "web sweep", 0.02, 8)]
    page = client.get(resp.headers["Location"]).get_data(as_text=True)
    assert 'Sweep queued: 2 training jobs in group "web sweep".' in html_lib.unescape(page)


def test_form_refuses_a_bad_sweep_value_on_its_field(app, client, dataset, token):
    resp = client.post("/models/new", data=_form(token, dataset, learning_rate="0.1,abc", batch_size="8,0"))
    assert resp.status_code == 200  # the form again, with its errors
    page = resp.get_data(as_text=True)
    assert re.search(r'data-for="learning_rate">&#34;abc&#34; is not a number<', page)
    assert re.search(r'data-for="batch_size">0: must be above 0<', page)
    assert models_of(app) == []


def test_form_group_is_stored_and_cloned(app, client, dataset, token):
    resp = client.post("/models/new", data=_form(token, dataset, model_name="solo", group="my runs"))
    assert resp.status_code == 302
    (job,) = models_of(app)
    assert job.data["group"] == "my runs" and "sweep" not in job.data
    clone = client.get(f"/models/new?clone={job.id}").get_data(as_text=True)
    assert re.search(r'<input[^>]*id="group"[^>]*value="my runs"', clone)
    assert '<datalist id="group-names"><option value="my runs"></datalist>' in clone
    resp = client.post("/models/new", data=_form(token, dataset, model_name="x", group="a\x01b"))
    assert (
        resp.status_code == 200
        and 'data-for="group">a group name cannot contain control characters' in resp.get_data(as_text=True)
    )


def test_dataset_form_and_api_store_the_group(app, client, token, tmp_path):
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / "imgs" / label).mkdir(parents=True)
        Image.new("L", (8, 8), 40).save(tmp_path / "imgs" / label / "1.png")
    page = client.get("/datasets/new/image-classification").get_data(as_text=True)
    assert re.search(
        r'<input[^>]*list="group-names"[^>]*name="job_group"|<input[^>]*name="job_group"[^>]*list="group-names"', page
    )
    fields = {
        "csrf_token": token,
        "job_name": "imgs",
        "job_group": "cardiac",
        "job_workers": "1",
        "folder": str(tmp_path / "imgs"),
        "width": "8",
        "height": "8",
        "seed": "0",
        "min_per_class": "1",
    }
    resp = client.post("/datasets/new/image-classification", data=fields)
    assert resp.status_code == 302, resp.get_data(as_text=True)[:3000]
    resp = client.post(
        "/api/datasets",
        headers={"X-CSRFToken": token},
        json={
            "plugin_id": "image-classification",
            "name": "imgs 2",
            "group": "cardiac",
            "form_data": {"folder": str(tmp_path / "imgs"), "width": 8, "height": 8},
        },
    )
    assert resp.status_code == 202, resp.get_data(as_text=True)
    assert [j.data.get("group") for j in app.extensions["digits"]["store"].list("dataset")] == ["cardiac", "cardiac"]


def test_home_groups_jobs_under_collapsible_heads(app, client, dataset):
    sweep = [make_job(app, "model", f"s lr={lr}", group="s", sweep={"learning_rate": lr}) for lr in (0.1, 0.01)]
    make_job(app, "model", "other", status=JobStatus.ERROR, group="t")
    loose = make_job(app, "model", "loose")
    page = client.get("/").get_data(as_text=True)
    table = re.search(r'<table[^>]*id="models-table".*?</table>', page, re.DOTALL).group(0)
    bodies = re.findall(r'<tbody class="([^"]+)"(?: data-group="([^"]*)")?>(.*?)</tbody>', table, re.DOTALL)
    assert [(cls, group) for cls, group, _ in bodies] == [
        ("jobs-loose", ""),
        ("job-group", "t"),
        ("job-group", "s"),
    ]  # newest group first
    assert loose.id in bodies[0][2] and all(j.id in bodies[2][2] for j in sweep)
    head = re.search(r'<tr class="group-head">(.*?)</tr>', bodies[2][2], re.DOTALL).group(1)
    assert 'class="group-toggle" aria-expanded="true"' in head and "2 models" in head and "2 Done" in head
    data = client.get("/index.json").get_json()
    assert {g["name"]: (len(g["models"]), g["statuses"]) for g in data["groups"]} == {
        "t": (1, {"Error": 1}),
        "s": (2, {"Done": 2}),
    }
    assert {r["name"]: r["group"] for r in data["models"]}["loose"] is None


def test_home_search_filters_on_the_server_too(app, client, dataset):
    make_job(app, "model", "alpha", group="cardiac", network="unet")
    make_job(app, "model", "beta", network="lenet")
    names = lambda q: sorted(r["name"] for r in client.get(f"/index.json?q={q}").get_json()["models"])  # noqa: E731
    assert names("CARDIAC") == ["alpha"] and names("lenet") == ["beta"] and names("a") == ["alpha", "beta"]
    assert names("unet alpha") == ["alpha"] and names("unet beta") == []
    page = client.get("/?q=nothing+like+this").get_data(as_text=True)
    row = re.search(r'id="models-table".*?<p class="no-match muted"( hidden)?>(.*?)</p>', page, re.DOTALL)
    assert row.group(1) is None and 'No model matches “<span class="query">nothing like this</span>”' in row.group(2)
    assert 'value="nothing like this"' in page
    # The page keeps every row and hides those that do not match, so the search can widen without a reload.
    page = client.get("/?q=cardiac").get_data(as_text=True)
    hidden = {
        name: bool(flag)
        for flag, name in re.findall(
            r'<tr class="job-row"( hidden)? data-id="[^"]+" '
            r'data-name="([^"]+)"',
            page,
        )
    }
    assert hidden == {"alpha": False, "beta": True, "digits": True}
    assert re.search(r'<tbody class="job-group" data-group="cardiac">', page)
    assert "1 of 3 jobs shown" in page
    assert client.get("/index.json?q=digits").get_json()["datasets"][0]["id"] == dataset.id


def test_bulk_delete_reports_what_it_did_with_running_jobs(app, client, dataset, token):
    scheduler, store = app.extensions["digits"]["scheduler"], app.extensions["digits"]["store"]
    done = make_job(app, "model", "done one")
    queued = make_job(
        app,
        "model",
        "queued one",
        status=JobStatus.INITIALIZED,
        train_options={"dataset": dataset.id, "network": "lenet"},
    )
    scheduler.submit(queued)
    elsewhere = make_job(app, "model", "shell run", status=JobStatus.INITIALIZED)
    lock = JobLock(elsewhere.path).acquire()  # as a `digits train` in a shell holds it
    try:
        # Without abort_running the queued job is refused, and said so.
        report = client.post(
            "/api/jobs/delete", headers={"X-CSRFToken": token}, json={"ids": [queued.id, done.id]}
        ).get_json()
        assert [e["id"] for e in report["deleted"]] == [done.id]
        assert report["refused"] == [{"id": queued.id, "name": "queued one", "reason": "Waiting: abort it first"}]
        # The page form aborts first (its confirmation says so) and reports it in the flash message.
        resp = client.post(
            "/jobs/delete",
            data={
                "csrf_token": token,
                "abort_running": "1",
                "q": "one",
                "job_id": [queued.id, elsewhere.id, "20000101-000000-dead"],
            },
        )
        assert resp.status_code == 302 and resp.headers["Location"].endswith("/?q=one")
        message = html_lib.unescape(client.get("/").get_data(as_text=True))
        assert "Deleted 1 job. Aborted first: queued one (was Waiting)." in message
        assert "shell run: running in another process" in message
        assert "20000101-000000-dead: no such job" in message
        assert [j.id for j in store.list("model")] == [elsewhere.id] and not queued.path.exists()
        assert scheduler.status()["waiting"] == []
    finally:
        lock.release()
    resp = client.post("/api/jobs/delete", headers={"X-CSRFToken": token}, json={"ids": []})
    assert resp.status_code == 400 and "non-empty list" in resp.get_json()["error"]["fields"]["ids"][0]


def test_home_page_has_the_bulk_form_and_search_box(app, client, dataset):
    page = client.get("/?q=dig").get_data(as_text=True)
    assert re.search(r'<form method="post" action="/jobs/delete" id="bulk-form"', page)
    assert re.search(
        r'<input type="checkbox" class="job-select" form="bulk-form" name="job_id" value="%s"' % dataset.id, page
    )
    assert re.search(r'<input type="search" name="q" id="job-search" value="dig"', page)
    assert "1 of 1 jobs shown" in page


def test_lr_preview_draws_the_first_rate_of_a_sweep(client):
    swept = client.get("/api/lr-preview?learning_rate=0.1,0.01&lr_policy=fixed").get_json()["points"]
    assert {p["lr"] for p in swept} == {0.1}
    resp = client.get("/api/lr-preview?learning_rate=0.1,-1&lr_policy=fixed")
    assert resp.status_code == 400 and "must be above 0" in resp.get_json()["error"]["fields"]["learning_rate"][0]


# -- real training and a real browser (slow) ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny digits dataset (40 images, group "digits data") in a jobs folder the server below also serves."""
    import sys

    from digits_core.datasets import create_dataset

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from demo import export_sklearn_digits

    root = tmp_path_factory.mktemp("groups")
    export_sklearn_digits(root / "digits", per_class=4)
    dataset = create_dataset(
        "image-classification",
        {"folder": str(root / "digits"), "image_type": "grayscale", "width": 28, "height": 28},
        name="digits",
        jobs_dir=root / "jobs",
        workers=1,
        group="digits data",
    )
    return {"root": root, "jobs": root / "jobs", "dataset": dataset}


@pytest.fixture(scope="module")
def cli_sweep(world):
    """``digits train`` with two learning rates and two batch sizes, one epoch each, in one process."""
    from conftest import run_digits

    result = run_digits(
        "--jobs-dir",
        str(world["jobs"]),
        "train",
        "--dataset",
        world["dataset"].id,
        "--network",
        "lenet",
        "--epochs",
        "1",
        "--seed",
        "1",
        "--learning-rate",
        "0.1,0.01",
        "--batch-size",
        "8,16",
        "--name",
        "cli sweep",
        "--json",
        "--quiet",
        timeout=600,
    )
    return result


@pytest.mark.slow
def test_cli_sweep_trains_every_combination_in_one_group(world, cli_sweep):
    assert cli_sweep.returncode == 0, cli_sweep.stderr[-3000:]
    assert (
        'sweep cli sweep: 4 jobs in group "cli sweep", trained one after the other in this process' in cli_sweep.stderr
    )
    rows = json.loads(cli_sweep.stdout)
    assert [(r["name"], r["status"], r["group"], r["learning_rate"], r["batch_size"]) for r in rows] == [
        ("cli sweep lr=0.1 batch=8", "Done", "cli sweep", 0.1, 8),
        ("cli sweep lr=0.1 batch=16", "Done", "cli sweep", 0.1, 16),
        ("cli sweep lr=0.01 batch=8", "Done", "cli sweep", 0.01, 8),
        ("cli sweep lr=0.01 batch=16", "Done", "cli sweep", 0.01, 16),
    ]
    for row in rows:  # what each run really used, as the engine recorded it
        folder = world["jobs"] / row["id"]
        model = json.loads((folder / "model.json").read_text())
        assert model["options"]["learning_rate"] == row["learning_rate"]
        assert model["options"]["batch_size"] == model["batch_size"] == row["batch_size"]
        assert model["options"]["epochs"] == 1 and model["options"]["seed"] == 1 and model["last_epoch"] == 1
        assert model["dataset_id"] == world["dataset"].id
        record = json.loads((folder / "job.json").read_text())
        assert record["group"] == "cli sweep"
        assert record["sweep"] == {"learning_rate": row["learning_rate"], "batch_size": row["batch_size"]}
    steps = {
        r["batch_size"]: json.loads((world["jobs"] / r["id"] / "model.json").read_text())["steps_per_epoch"]
        for r in rows
    }
    assert steps[8] > steps[16]  # the batch size really changed the run


def _shot(page, name):
    from test_ui_browser import ARTIFACTS

    page.screenshot(path=str(ARTIFACTS / f"groups-{name}.png"), full_page=True)


def _wait_for(predicate, what, timeout=300.0):
    """Poll ``predicate`` until it is true (a bounded wait on state); fail naming ``what`` after ``timeout`` s."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _visible_rows(page, table):
    return page.locator(f"#{table}-table tr.job-row:visible").count()


@pytest.mark.slow
@pytest.mark.browser
def test_home_groups_search_bulk_delete_and_sweep_form(world, cli_sweep, browser_page):  # noqa: F811
    """The home page as a DIGITS 6 user expects it: groups fold, search filters, a sweep form, one bulk delete."""
    from live_server import running_server

    assert cli_sweep.returncode == 0, cli_sweep.stderr[-3000:]
    page = browser_page
    with running_server(world["jobs"], log_dir=world["root"], cwd=world["root"]) as server:
        page.goto(server.url + "/")
        assert page.evaluate("document.scrollingElement.scrollWidth") <= 375  # toolbar and groups fit a phone
        _shot(page, "home-375")
        page.set_viewport_size({"width": 1280, "height": 900})
        group = page.locator('#models-table tbody.job-group[data-group="cli sweep"]')
        assert group.locator("tr.job-row").count() == 4 and _visible_rows(page, "models") == 4
        assert "4 models" in group.locator(".group-summary").inner_text()
        assert page.locator('#datasets-table tbody.job-group[data-group="digits data"] tr.job-row').count() == 1

        # A group folds, and stays folded across a reload; it unfolds again.
        group.locator(".group-toggle").click()
        assert _visible_rows(page, "models") == 0
        page.reload()
        assert group.locator(".group-toggle").get_attribute("aria-expanded") == "false"
        assert _visible_rows(page, "models") == 0
        _shot(page, "home-folded")
        group.locator(".group-toggle").click()
        assert _visible_rows(page, "models") == 4

        # Search filters as one types (folded groups too), keeps the query in the URL, and the server agrees.
        group.locator(".group-toggle").click()
        page.fill("#job-search", "batch=16")
        page.wait_for_function("() => document.getElementById('search-count').textContent === '2 of 5 jobs shown'")
        assert sorted(
            page.locator("#models-table tr.job-row:visible").evaluate_all("rows => rows.map(r => r.dataset.name)")
        ) == ["cli sweep lr=0.01 batch=16", "cli sweep lr=0.1 batch=16"]
        assert page.locator(".table-scroll:has(#datasets-table) .no-match").is_visible()
        assert page.locator("#models-table tbody tr:visible").count() == 3  # group head and the two matches
        assert "q=batch%3D16" in page.url
        _shot(page, "home-search")
        page.reload()
        assert page.locator("#job-search").input_value() == "batch=16" and _visible_rows(page, "models") == 2
        page.fill("#job-search", "")
        group.locator(".group-toggle").click()
        assert _visible_rows(page, "models") == 4 and "q=" not in page.url

        # A sweep from the New Model form: comma-separated values, one queued job per value, one group.
        page.goto(server.url + f"/models/new?dataset={world['dataset'].id}")
        page.fill("[name=model_name]", "web sweep")
        page.fill("[name=epochs]", "1000")  # long enough to be caught running below, whatever the machine
        page.fill("[name=batch_size]", "8")
        page.fill("[name=learning_rate]", "0.05, 0.02")
        page.wait_for_function("() => Number(document.getElementById('lr-preview').dataset.points) > 0")
        assert page.locator("#lr-preview-error").inner_text() == ""
        page.click("#create-model")
        page.wait_for_url("**/?q=web+sweep")
        assert 'Sweep queued: 2 training jobs in group "web sweep".' in page.locator(".alert").first.inner_text()
        web = page.locator('#models-table tbody.job-group[data-group="web sweep"] tr.job-row')
        assert web.evaluate_all("rows => rows.map(r => r.dataset.name)") == ["web sweep lr=0.05", "web sweep lr=0.02"]
        ids = web.evaluate_all("rows => rows.map(r => r.dataset.id)")
        scheduler = server.get_json("/api/scheduler")
        assert set(ids) <= set(scheduler["waiting"]) | set(scheduler["running"])  # queued through the scheduler
        for job_id, lr in zip(ids, (0.05, 0.02)):
            options = json.loads((world["jobs"] / job_id / "job.json").read_text())["train_options"]
            assert (options["learning_rate"], options["batch_size"], options["epochs"]) == (lr, 8, 1000)
        _shot(page, "home-web-sweep")

        # Bulk delete: the web sweep (one running, one queued) and one finished CLI job, after one confirmation.
        _wait_for(
            lambda: {m["id"]: m["status"] for m in server.get_json("/index.json")["models"]}[ids[0]] == "Running",
            f"model {ids[0]} Running\n{server.describe()}",
        )
        page.goto(server.url + "/")
        dialogs: list[str] = []
        answer = {"accept": False}
        page.on("dialog", lambda d: (dialogs.append(d.message), d.accept() if answer["accept"] else d.dismiss()))
        doomed = page.evaluate("""() => {  /* one task: the page's 5 s reload cannot fall in between */
            document.querySelector('tbody.job-group[data-group="web sweep"] .group-select').click();
            const row = Array.from(document.querySelectorAll('tr.job-row'))
                .find(r => r.dataset.name === 'cli sweep lr=0.01 batch=16');
            row.querySelector('.job-select').click();
            return [document.getElementById('bulk-delete').textContent, row.dataset.id];
        }""")
        assert doomed[0] == "Delete selected (3)"
        page.click("#bulk-delete")
        assert dialogs and dialogs[-1].startswith("Delete 3 jobs and all their files?")
        assert (
            "2 of them are running or waiting and will be aborted first: web sweep lr=0.05, web sweep lr=0.02"
            in dialogs[-1]
        ), dialogs[-1]
        assert all((world["jobs"] / i).exists() for i in ids)  # dismissed: nothing deleted
        answer["accept"] = True
        page.click("#bulk-delete")
        page.wait_for_selector(".alert:has-text('Deleted 3 jobs.')")
        message = page.locator(".alert").first.inner_text()
        assert "Aborted first: web sweep lr=0.05 (was Running), web sweep lr=0.02 (was Waiting)." in message, message
        assert not any((world["jobs"] / i).exists() for i in [*ids, doomed[1]])
        assert page.locator('#models-table tbody.job-group[data-group="cli sweep"] tr.job-row').count() == 3
        assert page.locator('tbody.job-group[data-group="web sweep"]').count() == 0
        _shot(page, "home-after-bulk-delete")


@pytest.mark.slow
def test_train_sweep_stops_after_an_aborted_point_and_creates_no_more_jobs(world, tmp_path):
    from digits_core.jobs import JobStore
    from digits_core.sweeps import train_sweep

    def stop_at_first_step(event):
        raise RuntimeError("stopped by the test")  # raising in progress aborts the run

    jobs = train_sweep(
        world["dataset"].path,
        "lenet",
        "py sweep",
        jobs_dir=tmp_path,
        progress=stop_at_first_step,
        epochs=1,
        learning_rate=[0.1, 0.01],
        batch_size=8,
    )
    assert [(j.name, j.status.value, j.group, j.data["sweep"]) for j in jobs] == [
        ("py sweep lr=0.1", "Aborted", "py sweep", {"learning_rate": 0.1})
    ]
    assert [j.name for j in JobStore(tmp_path).list("model")] == ["py sweep lr=0.1"]  # the second never existed
    from digits_core import FormValidationError
    from digits_core.engine import train

    with pytest.raises(FormValidationError, match="train_sweep") as info:  # train() makes one job, never a sweep
        train(world["dataset"].path, "lenet", "one", jobs_dir=tmp_path, epochs=1, learning_rate=[0.1, 0.01])
    assert list(info.value.errors) == ["learning_rate"] and len(JobStore(tmp_path).list("model")) == 1


def test_job_pages_link_to_their_group(app, client, dataset):
    ds = make_job(app, "dataset", "grouped data", plugin_id="image-classification", group="cardiac")
    model = make_job(
        app, "model", "m lr=0.1", group="cardiac sweep", sweep={"learning_rate": 0.1, "batch_size": 8}, dataset_id=ds.id
    )
    page = client.get(f"/models/{model.id}").get_data(as_text=True)
    assert re.search(
        r'<a href="/\?q=cardiac\+sweep" id="job-group">cardiac sweep</a>\s*'
        r"\(sweep point: <code>batch_size=8</code>, <code>learning_rate=0.1</code>\)",
        page,
    )  # job.json: sorted keys
    page = client.get(f"/datasets/{ds.id}").get_data(as_text=True)
    assert '<a href="/?q=cardiac" id="job-group">cardiac</a>' in page
    assert 'id="job-group"' not in client.get(f"/datasets/{dataset.id}").get_data(as_text=True)


@pytest.mark.slow
def test_api_sweep_runs_through_the_server_scheduler_into_model_json(world):
    """POST /api/models with 2 × 2 values: four queued jobs, each trained by the scheduler's workers as asked."""
    import urllib.request
    from http.cookiejar import CookieJar

    from live_server import running_server

    with running_server(world["jobs"], log_dir=world["root"], cwd=world["root"]) as server:
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
        csrf = json.loads(opener.open(server.url + "/api/csrf-token").read())["csrf_token"]
        body = {
            "name": "api sweep",
            "dataset": world["dataset"].id,
            "network": "lenet",
            "group": "api runs",
            "options": {"epochs": 1, "seed": 2, "learning_rate": [0.05, 0.005], "batch_size": "8,16"},
        }
        request = urllib.request.Request(
            server.url + "/api/models",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
        )
        with opener.open(request) as resp:
            assert resp.status == 202
            answer = json.loads(resp.read())
        assert answer["group"] == "api runs" and len(answer["jobs"]) == 4
        ids = [row["id"] for row in answer["jobs"]]

        def statuses():
            return {m["id"]: m["status"] for m in server.get_json("/index.json?q=api+runs")["models"]}

        _wait_for(
            lambda: all(statuses()[i] in ("Done", "Error", "Aborted") for i in ids),
            f"the sweep's jobs to finish\n{server.describe()}",
        )
        assert [statuses()[i] for i in ids] == ["Done"] * 4, server.describe()
    for row in answer["jobs"]:
        model = json.loads((world["jobs"] / row["id"] / "model.json").read_text())
        assert (model["options"]["learning_rate"], model["options"]["batch_size"], model["batch_size"]) == (
            row["values"]["learning_rate"],
            row["values"]["batch_size"],
            row["values"]["batch_size"],
        )
        assert model["options"]["seed"] == 2 and model["last_epoch"] == 1
    assert [(r["values"]["learning_rate"], r["values"]["batch_size"]) for r in answer["jobs"]] == [
        (0.05, 8),
        (0.05, 16),
        (0.005, 8),
        (0.005, 16),
    ]
