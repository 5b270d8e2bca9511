"""Web UI parity with DIGITS 6 (issue 15): what a daily user sees on the home, model and inference pages.

Fast tests use Flask's test client on server-rendered pages and JSON; the browser test
(``slow``, ``browser``) runs a real server, real training and inference in headless Chromium
for what JavaScript does. Screenshots go to ``test-artifacts/`` (git-ignored)::

    flock /tmp/digits-heavy.lock .venv/bin/python -m pytest tests/test_ui_parity.py
"""

from __future__ import annotations

import json
import re

import pytest

from digits_core.jobs import Job, JobStatus


def make_job(app, kind, name, *statuses, **fields):
    job = Job.create(kind, name, jobs_dir=app.extensions["digits"]["jobs_dir"], **fields)
    for status in statuses:
        if job.status.is_finished:  # a finished job works again only through an explicit resume
            job.resume(status)
        elif not isinstance(status, tuple):
            job.set_status(status)
        else:
            job.set_status(status[0], error=status[1])
    return job


def model_with_snapshots(app, *statuses, epochs=(1, 2)):
    """A model job with snapshot files and metric lines, as the trainer leaves them after ``epochs``."""
    ds = make_job(app, "dataset", "digits", JobStatus.DONE, plugin_id="image-classification")
    job = make_job(app, "model", "lenet", *statuses, dataset_id=ds.id, train_options={"network": "lenet", "epochs": 5})
    (job.path / "snapshots").mkdir()
    with open(job.path / "metrics.jsonl", "w") as handle:
        for epoch in epochs:
            (job.path / "snapshots" / f"epoch-{epoch}.keras").write_bytes(b"x" * 10)
            metrics = {"loss": 1.0 / epoch, "val_accuracy": 0.8, "val_top5": 0.97}
            handle.writelines(
                json.dumps({"epoch": epoch, "step": epoch * 10, "name": name, "value": value}) + "\n"
                for name, value in metrics.items()
            )
    return job


def test_favicon_linked_and_served(client):
    html = client.get("/").get_data(as_text=True)
    href = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)"', html).group(1)
    icon = client.get(href)
    assert icon.status_code == 200 and icon.mimetype == "image/svg+xml" and b"<svg" in icon.data


def test_empty_home_names_the_next_step(client):
    html = client.get("/").get_data(as_text=True)
    row = re.search(r'id="datasets-table".*?<tr class="empty">(.*?)</tr>', html, re.DOTALL).group(1)
    assert "No datasets yet — create one:" in row
    assert 'href="/datasets/new/image-classification"' in row  # a link into the New dataset menu
    models_row = re.search(r'id="models-table".*?<tr class="empty">(.*?)</tr>', html, re.DOTALL).group(1)
    assert "create a dataset first" in models_row


def test_empty_models_link_to_new_model_once_a_dataset_exists(app, client):
    make_job(app, "dataset", "digits", JobStatus.DONE, plugin_id="image-classification")
    html = client.get("/").get_data(as_text=True)
    models_row = re.search(r'id="models-table".*?<tr class="empty">(.*?)</tr>', html, re.DOTALL).group(1)
    assert 'href="/models/new"' in models_row and "train one" in models_row


def test_abort_and_delete_ask_for_confirmation(app, client):
    job = model_with_snapshots(app, JobStatus.WAITING, JobStatus.RUNNING)
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    abort_form = re.search(r'<form[^>]*action="/models/[^"]+/abort"[^>]*>', html).group(0)
    delete_form = re.search(r'<form[^>]*action="/models/[^"]+/delete"[^>]*>', html).group(0)
    assert 'data-confirm="Abort training of lenet?' in abort_form
    assert 'data-confirm="Delete model lenet' in delete_form


def test_dataset_abort_asks_for_confirmation(app, client):
    job = make_job(app, "dataset", "digits", JobStatus.WAITING, JobStatus.RUNNING, plugin_id="image-classification")
    html = client.get(f"/datasets/{job.id}").get_data(as_text=True)
    assert 'data-confirm="Abort creating dataset digits?"' in re.search(
        r'<form[^>]*action="/datasets/[^"]+/abort"[^>]*>', html
    ).group(0)


def test_resumed_job_hides_the_old_abort_banner(app, client):
    job = model_with_snapshots(
        app, JobStatus.RUNNING, (JobStatus.ABORTED, "Aborted: abort requested"), JobStatus.WAITING
    )  # Resume: queued again, the old error still stored
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    banner = re.search(r'<div [^>]*id="job-error"[^>]*>', html).group(0)
    assert "hidden" in banner
    aborted = model_with_snapshots(app, JobStatus.RUNNING, (JobStatus.ABORTED, "Aborted: abort requested"))
    html = client.get(f"/models/{aborted.id}").get_data(as_text=True)
    assert "hidden" not in re.search(r'<div [^>]*id="job-error"[^>]*>', html).group(0)


def test_metrics_json_carries_what_the_page_updates_live(app, client):
    job = model_with_snapshots(app, JobStatus.WAITING, JobStatus.RUNNING, epochs=(1, 2, 3))
    data = client.get(f"/models/{job.id}/metrics.json").get_json()
    assert [s["epoch"] for s in data["snapshots"]] == [1, 2, 3]
    assert [s for s, _ in data["status_history"]] == ["Initialized", "Waiting", "Running"]
    assert data["epoch"] == 3 and data["epochs"] == 5
    html = client.get(f"/models/{job.id}").get_data(as_text=True)
    assert "No snapshot yet." not in html
    assert re.search(r'id="train-progress">Epoch 3(\.0)? of 5<', html)


def test_inference_error_stays_on_the_form_with_values_kept(app, client, tmp_path):
    job = model_with_snapshots(app, JobStatus.RUNNING, JobStatus.DONE)
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    missing = tmp_path / "no such image.png"
    resp = client.post(
        f"/models/{job.id}/infer",
        data={
            "csrf_token": token,
            "view_id": "image-classification",
            "input_mode": "path",
            "server_path": str(missing),
            "snapshot": "1",
        },
    )
    assert resp.status_code == 200
    html = resp.get_data(as_text=True)
    assert "Cannot do that" not in html and 'id="infer-form"' in html
    assert re.search(r'id="infer-errors".*does not exist on the server', html, re.DOTALL)
    assert f'value="{missing}"' in html  # the path typed is still there
    assert re.search(r'value="path" checked', html)
    assert re.search(r'<option value="1(\.0)?" selected>epoch 1', html)
    # JSON clients keep the error object.
    resp = client.post(
        f"/models/{job.id}/infer",
        headers={"Accept": "application/json"},
        data={
            "csrf_token": token,
            "view_id": "image-classification",
            "input_mode": "path",
            "server_path": str(missing),
        },
    )
    assert resp.status_code == 400 and "does not exist" in resp.get_json()["error"]["message"]


def test_inference_upload_without_files_is_an_inline_error(app, client):
    job = model_with_snapshots(app, JobStatus.RUNNING, JobStatus.DONE)
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    resp = client.post(
        f"/models/{job.id}/infer", data={"csrf_token": token, "view_id": "image-classification", "input_mode": "upload"}
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200 and "Choose at least one image to upload." in html
    assert "choose the image(s) again" in html


@pytest.mark.parametrize("value", ["-0.01", "0", "nan", "inf"])
def test_lr_preview_refuses_a_learning_rate_that_is_not_positive(client, value):
    resp = client.get(f"/api/lr-preview?learning_rate={value}&lr_policy=fixed")
    assert resp.status_code == 400
    assert resp.get_json()["error"]["fields"]["learning_rate"] == ["The learning rate must be a number above 0."]
    assert client.get("/api/lr-preview?learning_rate=0.01&lr_policy=fixed").status_code == 200


def test_network_must_fit_the_dataset_task(app, client):
    ds = make_job(
        app,
        "dataset",
        "digits",
        JobStatus.DONE,
        plugin_id="image-classification",
        dataset={"label": {"kind": "class", "dtype": "int64", "shape": []}},
    )
    html = client.get("/models/new").get_data(as_text=True)
    options = json.loads(
        re.search(r'data-options="([^"]+)"', html)
        .group(1)
        .replace("&#34;", '"')
        .replace("&quot;", '"')
        .replace("&amp;", "&")
    )
    assert options["dataset_tasks"][ds.id] == "classification"
    assert "segmentation" in options["network_tasks"]["unet"]
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    resp = client.post(
        "/api/models",
        headers={"X-CSRFToken": token},
        json={"name": "u", "dataset": ds.id, "network": "unet", "options": {"epochs": 1}},
    )
    message = resp.get_json()["error"]["fields"]["network"][0]
    assert resp.status_code == 400 and "classification dataset" in message and "lenet" in message


# -- in a real browser --------------------------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def browser_page():
    """A headless Chromium page; JavaScript errors and CSP violations fail the test."""
    import os

    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} missing: run scripts/ensure-chromium.sh")
        pytest.skip(f"{CHROMIUM} missing: run scripts/ensure-chromium.sh")
    from playwright.sync_api import sync_playwright
    from test_ui_browser import ARTIFACTS, CHROMIUM_ARGS

    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 375, "height": 740})
        page = context.new_page()
        page.set_default_timeout(180_000)  # only the bound after which a wait on page state fails
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
        yield page
        browser.close()
    assert not errors, f"JavaScript errors: {errors}"


def _shot(page, name):
    from test_ui_browser import ARTIFACTS

    page.screenshot(path=str(ARTIFACTS / f"parity-{name}.png"), full_page=True)


def _fits_a_phone(page):
    """At 375 px the page is no wider than the screen (then back to the test's width)."""
    size = page.viewport_size
    page.set_viewport_size({"width": 375, "height": 740})
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    width = page.evaluate("document.scrollingElement.scrollWidth")
    page.set_viewport_size(size)
    assert width <= 375, f"{page.url} is {width} px wide at 375 px"


def _post_json(page, url, body):
    return page.evaluate(
        """([url, body]) => fetch('/api/csrf-token').then(r => r.json()).then(t =>
        fetch(url, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRFToken': t.csrf_token},
                    body: JSON.stringify(body)})).then(r => r.json())""",
        [url, body],
    )


def _status_is(page, *statuses):
    wanted = json.dumps(list(statuses))
    page.wait_for_function(f"() => {wanted}.includes((document.getElementById('job-status') || {{}}).textContent)")


@pytest.mark.slow
@pytest.mark.browser
def test_daily_user_walk(live_server, browser_page, tmp_path):
    """Home on a phone, a model page while it trains, abort/resume, inference: what issue 15 found wrong."""
    import shutil
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from demo import export_sklearn_digits

    page = browser_page
    data = tmp_path / "digits"
    export_sklearn_digits(data, per_class=12)
    server = live_server()

    # Home, empty, at 375 px: nothing wider than the screen, and the empty state leads somewhere.
    page.goto(server.url + "/")
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 375
    assert page.locator("link[rel=icon]").get_attribute("href").endswith("favicon.svg")
    _shot(page, "home-375-empty")
    page.click("#datasets-table tr.empty a:has-text('Image classification')")
    page.wait_for_url("**/datasets/new/image-classification")
    page.wait_for_load_state()

    page.set_viewport_size({"width": 1280, "height": 900})
    ds = _post_json(
        page,
        "/api/datasets",
        {
            "plugin_id": "image-classification",
            "name": "digits",
            "form_data": {"folder": str(data), "image_type": "grayscale", "width": 28, "height": 28},
        },
    )
    page.goto(server.url + ds["url"])
    page.wait_for_selector("#dataset-info")  # shown once Done (the page reloads itself then)
    # New model for this classification dataset: no U-Net/FCN offered; a negative LR is refused, not drawn.
    page.goto(server.url + f"/models/new?dataset={ds['id']}")
    page.wait_for_function("() => document.getElementById('lr-preview').dataset.points > 0")
    assert page.locator("[name=network] option[value=unet]").is_disabled()
    assert not page.locator("[name=network] option[value=lenet]").is_disabled()
    assert "classification" in page.locator("#network-task-note").inner_text()
    page.fill("[name=learning_rate]", "-0.1")
    page.wait_for_function("() => document.getElementById('lr-preview').dataset.points === '0'")
    assert "above 0" in page.locator("#lr-preview-error").inner_text()
    _shot(page, "new-model-invalid-lr")
    model = _post_json(
        page,
        "/api/models",
        {
            "name": "long lenet",
            "dataset": ds["id"],
            "network": "lenet",
            "options": {"epochs": 60, "batch_size": 16, "lr_policy": "fixed"},
        },
    )
    page.goto(server.url + model["url"])
    page.evaluate("window.sameLoad = true")  # gone if the page reloads

    # While it trains, the page updates in place: snapshots, status history, epoch and ETA.
    page.wait_for_function("""() => document.getElementById('job-status').textContent === 'Running'
        && document.querySelectorAll('#snapshots tbody td.num').length > 0
        && /ETA/.test(document.getElementById('train-progress').textContent)
        && document.querySelector('#metric-panels [data-panel="top5"]') !== null""")
    assert page.evaluate("window.sameLoad") is True
    assert "No snapshot yet." not in page.locator("#snapshots").inner_text()
    history = page.locator("#status-history").inner_text()
    assert "Running" in history and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", history), history
    if page.locator("#infer-form").count() == 0:  # the page was opened before the first snapshot
        assert "reload the page to test the model" in page.locator("#no-snapshot-note").inner_text()
    assert page.locator("#train-progress").inner_text().startswith("Epoch ")
    # One panel per tag: ratios on a 0..1 axis (with room above 1.0), the loss on its own.
    y_max = page.evaluate("""Object.fromEntries([...document.querySelectorAll('#metric-panels [data-panel]')].map(p =>
        [p.dataset.panel, Chart.getChart(p.querySelector('canvas')).options.scales.y.max ?? null]))""")
    assert y_max["top5"] > 1 and y_max["accuracy"] > 1 and y_max["loss"] is None, y_max
    _shot(page, "model-training")

    # Abort asks first; the aborted page shows why; Resume hides that banner while the job runs again.
    dialogs: list[str] = []
    answer = {"accept": True}
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept() if answer["accept"] else d.dismiss()))
    page.click("#abort")
    page.wait_for_selector("#resume")
    assert dialogs and dialogs[-1].startswith("Abort training of long lenet?")
    assert page.locator("#job-error").is_visible() and "abort" in page.locator("#job-error").inner_text().lower()
    page.click("#resume")
    _status_is(page, "Waiting", "Running")
    assert page.locator("#job-error").is_hidden()
    _status_is(page, "Running")
    assert page.locator("#job-error").is_hidden()
    _shot(page, "model-resumed")
    page.click("#abort")
    page.wait_for_selector("#resume")

    # Inference: an error stays on the form with what was typed; a run shows that it is loading.
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(tmp_path / "nope.png"))
    page.click("#infer-button")
    page.wait_for_selector("#infer-errors")
    assert "does not exist" in page.locator("#infer-errors").inner_text()
    assert page.locator("#infer-path").input_value() == str(tmp_path / "nope.png")
    assert page.locator("input[name=input_mode][value=path]").is_checked()
    _shot(page, "inference-error")

    upload = tmp_path / "my digit 7.png"
    shutil.copy(sorted((data / "7").glob("*.png"))[0], upload)
    page.check("input[name=input_mode][value=upload]")
    page.set_input_files("#infer-images", str(upload))
    # What #infer-status shows before the results page replaces it (sessionStorage survives the navigation).
    page.evaluate("""() => new MutationObserver(() => sessionStorage.setItem('inferStatus',
        document.getElementById('infer-status').textContent)).observe(document.getElementById('infer-status'),
        {childList: true, characterData: true, subtree: true})""")
    page.click("#infer-button")
    page.wait_for_selector("#results")
    assert re.fullmatch(r"Loading model and running inference… \d+ s", page.evaluate("sessionStorage.inferStatus"))
    captions = page.locator(".dcv-id").all_inner_texts()
    assert captions == ["my digit 7.png"], captions
    _fits_a_phone(page)  # Classify One

    # A labelled list: the accuracy summary comes before the samples.
    listing = tmp_path / "labelled.txt"
    listing.write_text("".join(f"{p} {c}\n" for c in ("1", "7") for p in sorted((data / c).glob("*.png"))[:3]))
    page.goto(server.url + model["url"])
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(listing))
    page.click("#infer-button")
    page.wait_for_selector("#results-summary")
    assert page.evaluate("""() => !!(document.getElementById('results-summary').compareDocumentPosition(
        document.querySelector('.dcv-sample')) & Node.DOCUMENT_POSITION_FOLLOWING)""")
    _shot(page, "inference-summary-first")
    # Classify Many: a compact table, sortable by the view's values (top-1 probability here).
    assert page.locator("#result-samples.results-table").count() == 1
    assert max(page.locator(".dcv-sample").evaluate_all("els => els.map(e => e.offsetHeight)")) <= 60
    page.select_option("#results-sort", "probability:desc")
    shown = [
        float(v) for v in page.locator(".dcv-sample").evaluate_all("els => els.map(e => e.dataset.sortProbability)")
    ]
    assert shown == sorted(shown, reverse=True) and len(shown) == 6
    _fits_a_phone(page)
    page.select_option("#results-sort", "input:asc")
    # Paging (50 a page on real pages; 4 here to see it with 6 samples).
    page.evaluate("const b = document.getElementById('result-samples'); b.dataset.pageSize = 4; DIGITS.pageResults(b)")
    assert page.locator(".result-sample:visible").count() == 4
    assert "Samples 1–4 of 6" in page.locator("#result-samples > .pager").first.inner_text()
    page.locator("#result-samples > .pager").first.locator("button:has-text('Next')").click()
    assert page.locator(".result-sample:visible").count() == 2
    assert "Samples 5–6 of 6" in page.locator("#result-samples > .pager").last.inner_text()

    # Home with jobs, on a phone again.
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto(server.url + "/")
    assert page.locator("#models-table tbody tr").count() == 1
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 375
    _shot(page, "home-375-jobs")
    page.set_viewport_size({"width": 1280, "height": 900})

    # Delete asks first; dismissing keeps the model.
    page.goto(server.url + model["url"])
    answer["accept"] = False
    page.click("button:has-text('Delete')")
    assert dialogs[-1].startswith("Delete model long lenet")
    assert server.get(model["url"]).status == 200
