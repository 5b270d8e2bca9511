"""End-to-end tests in a real headless Chromium (Playwright), against a real server and real workers.

Run under the TensorFlow lock (the training workers import TF)::

    flock /tmp/digits-tf.lock .venv/bin/python -m pytest tests/test_ui_browser.py

Screenshots of every page go to ``test-artifacts/`` (git-ignored).
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPO = Path(__file__).resolve().parent.parent
# Re-exported: other browser test modules import these names from here.
from browser_support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS  # noqa: E402,F401


def _load_demo():
    spec = importlib.util.spec_from_file_location("digits_demo_script", REPO / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real DIGITS web server (werkzeug, threaded) on a free port, with its scheduler."""
    from werkzeug.serving import make_server

    from digits_core.web import create_app

    jobs = tmp_path_factory.mktemp("browser") / "jobs"
    # Data root: pytest's temporary base folder, where each test writes its images.
    app = create_app(jobs, max_dataset_jobs=2, max_training_jobs=1, data_roots=[tmp_path_factory.getbasetemp()])
    app.extensions["digits"]["scheduler"].poll_interval = 0.2
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield {"url": f"http://127.0.0.1:{httpd.server_port}", "app": app, "jobs": jobs}
    httpd.shutdown()
    app.extensions["digits"]["scheduler"].shutdown()


@pytest.fixture(scope="module")
def browser(chromium):
    """The module's headless Chromium (``tests/browser_support.py``: skipped without it, failed in CI)."""
    return chromium


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    # Waits are on page state; this is only the bound after which a wait fails (a loaded 2-core box is slow).
    page.set_default_timeout(180_000)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # The server's Content-Security-Policy must fit the UI: a blocked script or style is a failure.
    page.on("console", lambda msg: errors.append(msg.text) if "Content Security Policy" in msg.text else None)
    yield page
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def wait_status(page, status, timeout_s):
    page.wait_for_function(
        f"() => document.getElementById('job-status') && "
        f"document.getElementById('job-status').textContent.trim() === '{status}'",
        timeout=timeout_s * 1000,
    )


def test_classification_dataset_train_infer(server, page, tmp_path):
    demo = _load_demo()
    data = tmp_path / "digits"
    demo.export_sklearn_digits(data, per_class=24)
    base = server["url"]
    console_errors: list[str] = []  # a form error answered 400 logs "Failed to load resource" here
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)

    page.goto(base + "/")
    shot(page, "01-home-empty")
    page.click("nav summary:has-text('New dataset')")
    page.click("nav .dropdown-menu a:has-text('Image classification')")
    page.wait_for_selector("#dataset-form")
    # A wrong folder first: the error shows next to the field.
    page.fill("[name=folder]", str(tmp_path / "missing"))
    page.fill("[name=job_name]", "digits <script>")
    page.click("#create-dataset")
    page.wait_for_selector(".field-error")
    shot(page, "02-new-dataset-errors")
    assert page.locator("[name=folder]").evaluate(
        "el => el.classList.contains('is-invalid') || !!el.closest('.has-error')"
    )
    assert page.locator("[name=folder]").input_value() == str(tmp_path / "missing")  # the user's value kept
    assert not console_errors, console_errors
    page.fill("[name=folder]", str(data))
    page.select_option("[name=image_type]", "grayscale")
    page.fill("[name=width]", "28")
    page.fill("[name=height]", "28")
    page.click("#create-dataset")
    page.wait_for_url("**/datasets/*")
    wait_status(page, "Done", 90)
    page.wait_for_selector("#dataset-info")  # the page reloads itself when the job ends
    assert "digits <script>" in page.locator("h1").inner_text()  # escaped, shown as text
    shot(page, "03-dataset-done")
    dataset_id = page.url.rsplit("/", 1)[1]
    page.click("a:has-text('Explore')")
    assert page.locator(".sample").count() >= 12
    shot(page, "04-dataset-explore")

    page.goto(base + f"/models/new?dataset={dataset_id}")
    page.wait_for_function("() => document.getElementById('lr-preview').dataset.points > 0")
    page.select_option("[name=lr_policy]", "exp")
    page.fill("[name=lr_gamma]", "0.97")
    page.wait_for_function(
        "() => (document.getElementById('lr-preview').dataset.query || '').includes('lr_gamma=0.97')"
    )
    shot(page, "05-new-model")
    page.select_option("[name=network]", "lenet")
    page.fill("[name=epochs]", "3")
    page.fill("[name=batch_size]", "32")
    page.select_option("[name=solver]", "momentum")
    page.fill("[name=model_name]", "tiny lenet")
    page.click("#create-model")
    page.wait_for_url("**/models/*")
    page.wait_for_function("() => document.getElementById('charts').dataset.points > 0", timeout=120000)
    shot(page, "06-model-training")
    wait_status(page, "Done", 150)
    page.wait_for_selector("#infer-form")
    page.wait_for_function("() => document.getElementById('charts').dataset.points > 3")
    shot(page, "07-model-done")
    with page.expect_download(timeout=180000) as download_info:
        page.click("#download")
    archive = download_info.value.path()
    import tarfile

    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert any(n.endswith("info.json") for n in names) and any("saved_model" in n for n in names), names

    # Inference and Top N form errors re-render the model page with the values kept and no console error.
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(tmp_path / "no such.png"))
    page.click("#infer-button")
    page.wait_for_selector("#infer-errors")
    assert page.locator("#infer-path").input_value() == str(tmp_path / "no such.png")
    page.fill("#top-n-path", str(tmp_path / "no such folder"))
    page.click("#top-n-button")
    page.wait_for_selector("#top-n-errors")
    assert page.locator("#top-n-path").input_value() == str(tmp_path / "no such folder")
    assert not console_errors, console_errors

    image = sorted((data / "7").glob("*.png"))[0]
    page.check("input[name=input_mode][value=upload]")
    page.set_input_files("#infer-images", str(image))
    page.click("#infer-button")
    page.wait_for_selector("#results", timeout=120000)
    text = page.locator("#results").inner_text()
    assert text.count("%") >= 5 and "top 5" in text  # the classification view's top-N with percentages
    shot(page, "08-inference-top-n")
    _stored_results_have_urls(page, base, data, text)


def _stored_results_have_urls(page, base, data, one_text):
    """Results are stored with a GET URL (reload shows them, runs nothing), listed newest first, deletable."""
    import re

    one_url = page.url.split("#")[0]  # the form's #inference anchor is kept through the redirect
    match = re.fullmatch(re.escape(base) + r"/models/([^/]+)/inference/([0-9a-f-]+)", one_url)
    assert match, one_url
    model_id = match.group(1)
    page.reload()
    assert page.locator("#results").inner_text() == one_text
    page.set_viewport_size({"width": 375, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375, "a stored results page at 375 px"
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/models/{model_id}")
    rows = page.locator("#inference-results tbody tr")
    assert rows.count() == 1  # the reload did not run (and store) the model again
    page.check("input[name=input_mode][value=path]")
    page.fill("#infer-path", str(data / "3"))  # Classify Many: a folder
    page.click("#infer-button")
    page.wait_for_selector("#results", timeout=120000)
    many_url = page.url.split("#")[0]
    assert many_url != one_url and page.locator(".result-sample").count() == 24
    page.goto(f"{base}/models/{model_id}")
    links = page.locator("#inference-results a.result-open").evaluate_all("els => els.map(a => a.href)")
    assert links == [many_url, one_url]  # newest first
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        page.locator("#inference-results tbody tr").nth(1).locator("button.result-delete").click()
    assert page.locator("#inference-results a.result-open").evaluate_all("els => els.map(a => a.href)") == [many_url]
    assert page.request.get(one_url).status == 404
    assert page.request.get(many_url).status == 200


def test_sunnybrook_dataset_and_segmentation_view(server, page, tmp_path):
    from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR, generate

    synth = generate(tmp_path / "sunny", cases=3, size=48, seed=0, slices=2)
    base = server["url"]
    page.goto(base + "/datasets/new/image-sunnybrook")
    page.fill("[name=image_folder]", str(synth.root / IMAGES_DIR))
    page.fill("[name=contour_folder]", str(synth.root / CONTOURS_DIR))
    page.fill("[name=pct_val]", "34")
    page.fill("[name=job_name]", "sunny")
    shot(page, "09-new-sunnybrook")
    page.click("#create-dataset")
    page.wait_for_url("**/datasets/*")
    wait_status(page, "Done", 90)
    page.wait_for_selector("#dataset-info")
    shot(page, "10-sunnybrook-done")
    dataset_id = page.url.rsplit("/", 1)[1]
    page.goto(base + f"/datasets/{dataset_id}/explore")
    assert page.locator(".sample img").count() >= 2
    shot(page, "11-sunnybrook-explore")

    # Train through the JSON API (the page flow is covered above), then infer in the browser.
    token = page.evaluate("fetch('/api/csrf-token').then(r => r.json()).then(d => d.csrf_token)")
    created = page.evaluate(
        """([token, ds]) => fetch('/api/models', {method: 'POST',
        headers: {'Content-Type': 'application/json', 'X-CSRFToken': token},
        body: JSON.stringify({name: 'tiny unet', dataset: ds, network: 'unet',
               options: {epochs: 1, batch_size: 8, solver: 'adam', learning_rate: 0.003, lr_policy: 'fixed',
                         network_params: {filters: 4, depth: 2}}})}).then(r => r.json())""",
        [token, dataset_id],
    )
    page.goto(base + created["url"])
    wait_status(page, "Done", 150)
    page.wait_for_selector("#infer-form")
    page.select_option("#view-id", "image-segmentation")
    plugin_mode = page.locator("input[name=input_mode][value=plugin]")
    assert plugin_mode.count() == 1  # the Sunnybrook plugin's own inference form is offered
    plugin_mode.check()
    page.fill("[name=validation_record]", "0")
    page.click("#infer-button")
    page.wait_for_selector("#results img", timeout=120000)
    shot(page, "12-segmentation-view")
    assert "Dice" in page.locator("#results").inner_text()
    page.goto(base + "/")
    assert page.locator("#datasets-table tbody tr").count() >= 2
    page.click("#datasets-table th:has-text('Name')")
    shot(page, "14-home")
    page.goto(base + "/plugins")
    assert page.locator("text=image-sunnybrook").count() >= 1
    shot(page, "15-plugins")


def test_segmentation_inference_form_takes_mask_labels(server, page, tmp_path):
    """image-segmentation: the plugin's inference form takes ``<image> <mask>`` lines and compares with them."""
    import numpy as np
    from PIL import Image

    for folder in ("images", "masks"):
        (tmp_path / folder).mkdir()
    for i in range(6):
        image, mask = np.full((16, 16), 30, np.uint8), np.zeros((16, 16), np.uint8)
        image[i : i + 6, 4:10], mask[i : i + 6, 4:10] = 220, 1
        Image.fromarray(image).save(tmp_path / "images" / f"{i}.png")
        Image.fromarray(mask).save(tmp_path / "masks" / f"{i}.png")
    (tmp_path / "val.txt").write_text("images/0.png masks/0.png\nimages/3.png masks/3.png\n")
    base = server["url"]
    page.goto(base + "/")
    token = page.evaluate("fetch('/api/csrf-token').then(r => r.json()).then(d => d.csrf_token)")
    post = """([token, url, body]) => fetch(url, {method: 'POST', body: JSON.stringify(body),
        headers: {'Content-Type': 'application/json', 'X-CSRFToken': token}}).then(r => r.json())"""
    dataset = page.evaluate(
        post,
        [
            token,
            "/api/datasets",
            {
                "plugin_id": "image-segmentation",
                "name": "squares",
                "form_data": {
                    "image_folder": str(tmp_path / "images"),
                    "label_folder": str(tmp_path / "masks"),
                    "image_type": "grayscale",
                    "width": 16,
                    "height": 16,
                    "val_percent": 34,
                },
            },
        ],
    )
    page.goto(base + dataset["url"])
    wait_status(page, "Done", 90)
    page.wait_for_selector("#dataset-info")  # the page reloads itself when the job ends
    created = page.evaluate(
        post,
        [
            token,
            "/api/models",
            {
                "name": "squares unet",
                "dataset": dataset["id"],
                "network": "unet",
                "options": {
                    "epochs": 1,
                    "batch_size": 4,
                    "lr_policy": "fixed",
                    "network_params": {"filters": 4, "depth": 2},
                },
            },
        ],
    )
    page.goto(base + created["url"])
    wait_status(page, "Done", 150)
    page.wait_for_selector("#infer-form")
    assert page.locator("#view-id").input_value() == "image-segmentation"  # the task's view, preselected
    page.check("input[name=input_mode][value=plugin]")
    page.fill("#infer-form [name=image_list]", str(tmp_path / "val.txt"))
    page.check("#infer-form [name=show_labels]")
    page.click("#infer-button")
    page.wait_for_selector("#results .dsv-scores", timeout=120000)
    assert "/inference/" in page.url  # a stored result, as for every task
    samples = page.locator(".dsv-sample")
    assert samples.count() == 2 and "Dice" in samples.first.inner_text()
    truth_pixels = page.locator(".dsv-scores tr").evaluate_all(
        "rows => rows.filter(r => r.cells[0].textContent.trim().startsWith('1')).map(r => r.cells[4].textContent)"
    )
    assert truth_pixels == ["36", "36"], truth_pixels  # the 6x6 square of class 1 of each listed mask
    shot(page, "12b-segmentation-with-masks")
    page.set_viewport_size({"width": 375, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375, "segmentation results at 375 px"


def test_abort_and_resume_training(server, page):
    """Abort a running training from its page, then resume it from the last snapshot."""
    store = server["app"].extensions["digits"]["store"]
    datasets = [
        j
        for j in store.list("dataset")
        if j.status.value == "Done" and j.data.get("plugin_id") == "image-classification"
    ]
    if not datasets:
        pytest.skip("needs the dataset of test_classification_dataset_train_infer")
    base = server["url"]
    page.goto(base + "/")
    token = page.evaluate("fetch('/api/csrf-token').then(r => r.json()).then(d => d.csrf_token)")
    created = page.evaluate(
        """([token, ds]) => fetch('/api/models', {method: 'POST',
        headers: {'Content-Type': 'application/json', 'X-CSRFToken': token},
        body: JSON.stringify({name: 'long lenet', dataset: ds, network: 'lenet',
               options: {epochs: 200, batch_size: 16, lr_policy: 'fixed'}})}).then(r => r.json())""",
        [token, datasets[0].id],
    )
    page.goto(base + created["url"])
    page.wait_for_function("() => document.getElementById('charts').dataset.snapshots > 0", timeout=120000)
    page.once("dialog", lambda dialog: dialog.accept())  # Abort asks for confirmation
    page.click("#abort")
    wait_status(page, "Aborted", 60)
    page.wait_for_selector("#resume")  # the page reloads when the job ends
    shot(page, "13-model-aborted")
    before = int(page.evaluate("document.getElementById('charts').dataset.points"))
    with page.expect_navigation():  # Resume posts, then the page reloads: wait on the new page, not the old
        page.click("#resume")
    # The predicate also runs while the new page is still parsing, before #charts exists.
    page.wait_for_function(
        f"() => Number(document.getElementById('charts')?.dataset.points) > {before}", timeout=120000
    )
    job = store.get(created["id"])
    assert job.status.value in ("Running", "Waiting")
    server["app"].extensions["digits"]["scheduler"].abort(job.id)
    server["app"].extensions["digits"]["scheduler"].wait(job.id, 60)
    assert store.get(job.id).status.value == "Aborted"
