"""The web UI for a working day (issue 27): forms that keep every value, deletes that know what depends on them.

Browser tests (``slow``, ``browser``) run against a real ``digits serve`` in headless Chromium; the jobs
they need are written with :class:`~digits_core.jobs.Job` (no training: the pages only read job folders),
so no TensorFlow runs. Several checks share one page session to keep the 2-core CI short.
"""

from __future__ import annotations

import json
import shutil

import pytest

from digits_core.engine.option_specs import TRAINING_OPTIONS, effective_defaults
from digits_core.jobs import Job, JobStatus, JobStore

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: The generated option fields of the New Model form.
OPTION_FIELDS = [spec for spec in TRAINING_OPTIONS if spec.web == "auto"]


def _dataset(jobs, name, kind):
    job = Job.create(
        "dataset", name, jobs_dir=jobs, plugin_id="image-classification", dataset={"label": {"kind": kind}}
    )
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    return job


def _model(jobs, name, dataset_id, task, train_options):
    job = Job.create(
        "model", name, jobs_dir=jobs, dataset_id=dataset_id, train_options={"dataset": dataset_id, **train_options}
    )
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    (job.path / "snapshots").mkdir()
    (job.path / "snapshots" / "epoch-001.keras").write_bytes(b"k")
    (job.path / "model.json").write_text(json.dumps({"task": task}))
    return job


def _defaults(network):
    from digits_core.web.model_form import network_defaults

    values = effective_defaults(network_defaults(network))
    return {
        name: "" if value is None else ("true" if value is True else "false" if value is False else str(value))
        for name, value in values.items()
    }


def _values(page):
    """Every named option field of the New Model form: ``{name: (value, disabled)}``."""
    return page.evaluate(
        """names => Object.fromEntries(names.map(n => {
        const el = document.getElementById('model-form').elements[n];
        return [n, el ? [el.value, el.disabled] : null]; }))""",
        [s.name for s in OPTION_FIELDS],
    )


def _fill_every_visible_field(page, defaults):
    """Give every option field the user can see a valid value other than the network's default."""
    page.evaluate("document.querySelectorAll('#model-form details').forEach(d => d.open = true)")
    typed = {}
    for spec in OPTION_FIELDS:
        field = page.locator(f"#model-form [name={spec.name}]")
        if not field.is_visible():
            continue
        default = defaults.get(spec.name, "")
        if spec.kind in ("bool", "choice"):
            options = [o for o in field.locator("option").evaluate_all("os => os.map(o => o.value)") if o != default]
            value = options[-1]
            field.select_option(value)
        else:
            if spec.name == "learning_rate":
                value = "0.0123"
            elif spec.name == "batch_size":
                value = "12"
            elif spec.kind == "int":
                low = spec.minimum if spec.minimum is not None else 1
                value = str(int(low) + 3 if spec.maximum is None or low + 3 <= spec.maximum else int(low))
            elif spec.kind == "float":
                low = spec.minimum if spec.minimum is not None else 0.0
                high = spec.maximum if spec.maximum is not None else low + 1.0
                value = str(round(low + (high - low) * 0.37, 4))
            else:
                value = "0"
            if value == default:
                value = value + "1" if spec.kind != "float" else str(float(value) / 2)
            field.fill(value)
        typed[spec.name] = value
    return typed


@pytest.fixture(scope="module")
def workday(tmp_path_factory, chromium):
    """A jobs folder with datasets and models, a live server on it and a browser context."""
    from live_server import running_server

    jobs = tmp_path_factory.mktemp("workday") / "jobs"
    jobs.mkdir()
    digits = _dataset(jobs, "digits", "class")
    boxes = _dataset(jobs, "boxes", "boxes")
    gone = _dataset(jobs, "gone", "class")
    classifier = _model(jobs, "classifier", digits.id, "classification", {"network": "lenet"})
    detector = _model(jobs, "detector", boxes.id, "detection", {"network": "detectnet"})
    _write_detection_metrics(detector.path / "metrics.jsonl")
    source = _model(
        jobs,
        "source",
        gone.id,
        "classification",
        {
            "network": "lenet",
            "epochs": 15,
            "solver": "sgd",
            "learning_rate": 0.05,
            "lr_policy": "step",
            "momentum": 0.8,
        },
    )
    shutil.rmtree(gone.path)  # deleted behind the server's back: the clone must say so
    with running_server(jobs, log_dir=jobs.parent) as server:
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(120_000)  # only the bound after which a wait on page state fails
        errors: list[str] = []
        context.on("weberror", lambda e: errors.append(str(e.error)))
        yield {
            "server": server,
            "context": context,
            "errors": errors,
            "digits": digits,
            "boxes": boxes,
            "classifier": classifier,
            "detector": detector,
            "source": source,
            "gone": gone.id,
        }
        context.close()


#: Nine classes of a KITTI-like detector: nine per-class AP series.
CLASSES = ("car", "van", "truck", "pedestrian", "sitter", "cyclist", "tram", "misc", "dontcare")
EPOCHS = 10


def _write_detection_metrics(path):
    """What a detector's training logs: 15 series, one point per epoch, a minute apart."""
    with open(path, "w") as handle:
        for epoch in range(1, EPOCHS + 1):
            values = {
                "loss": 2.0 / epoch,
                "val_loss": 2.2 / epoch,
                "centre_recall": 0.1 * epoch,
                "val_map50": min(1.0, 0.12 * epoch),
                "val_map": 0.05 * epoch,
                "lr": 0.002,
                **{f"val_ap50_{c}": 0.09 * epoch for c in CLASSES},
            }
            for name, value in values.items():
                handle.write(
                    json.dumps(
                        {
                            "epoch": epoch,
                            "step": epoch * 10,
                            "name": name,
                            "value": value,
                            "time": 1_700_000_000 + 60 * epoch,
                        }
                    )
                    + "\n"
                )


def _page(workday):
    page = workday["context"].new_page()
    page.console_errors = []
    page.on("console", lambda m: page.console_errors.append(m.text) if m.type == "error" else None)
    return page


def test_new_model_form_keeps_every_value(workday):
    server, digits = workday["server"], workday["digits"]
    lenet, detectnet = _defaults("lenet"), _defaults("detectnet")
    page = _page(workday)
    page.goto(server.url + f"/models/new?dataset={digits.id}&network=lenet")
    # The page shows LeNet's defaults as the server rendered them.
    shown = _values(page)
    assert {n: v[0] for n, v in shown.items() if n in lenet} == {n: lenet[n] for n in shown if n in lenet}

    # Every field typed, then a validation error (bad network parameters): every value comes back.
    page.select_option("[name=solver]", "sgd")  # the solver that shows momentum
    typed = _fill_every_visible_field(page, {**lenet, "solver": "sgd"})
    typed["solver"] = page.locator("[name=solver]").input_value()
    assert len(typed) >= 20, typed
    page.fill("[name=model_name]", "kept")
    page.fill("[name=network_params]", "{not json")  # the error
    with page.expect_navigation():
        page.click("#create-model")
    assert page.locator("#form-errors").is_visible()
    back = _values(page)
    assert {n: back[n][0] for n in typed} == typed
    assert page.locator("[name=model_name]").input_value() == "kept"
    assert page.locator("[name=network_params]").input_value() == "{not json"
    assert not [n for n, v in back.items() if v and v[1]], back  # nothing left disabled
    assert not page.console_errors, page.console_errors  # the 400 re-render logs nothing

    # Visualize (a new tab) leaves every field editable: typing 5 into Epochs gives 5.
    page.context.route(
        "**/models/network", lambda route: route.fulfill(status=200, body="network", content_type="text/plain")
    )
    with page.context.expect_page() as popup:
        page.click("#visualize")
    popup.value.close()
    assert not [n for n, v in _values(page).items() if v and v[1]]
    page.fill("[name=epochs]", "5")
    assert page.locator("[name=epochs]").input_value() == "5"

    # Network change: the field the user typed stays, the untouched ones take the new network's defaults.
    page.goto(server.url + f"/models/new?dataset={digits.id}&network=lenet")
    page.fill("[name=epochs]", "7")
    page.select_option("[name=dataset]", workday["boxes"].id)  # a detection dataset: the page picks detectnet
    assert page.locator("[name=network]").input_value() == "detectnet"
    now = _values(page)
    assert now["epochs"][0] == "7"
    differing = [n for n in detectnet if n != "epochs" and detectnet[n] != lenet[n] and n in now]
    assert len(differing) >= 3 and {n: now[n][0] for n in differing} == {n: detectnet[n] for n in differing}

    # Reload: the browser restores what was typed, and the page does not overwrite it.
    page.reload()
    assert page.locator("[name=epochs]").input_value() == "7"

    # The LR preview keeps its size (it grew without end: a resize loop), at 1280 and at 375 px.
    for width in (1280, 375):
        page.set_viewport_size({"width": width, "height": 800})
        assert _lr_preview_height(page) == 240, width
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.close()


def _frames(page, frames):
    """Let ``frames`` animation frames pass (Chart.js follows a resize in one)."""
    page.evaluate(
        """frames => new Promise(done => { let n = 0;
        const step = () => ++n < frames ? requestAnimationFrame(step) : done(); requestAnimationFrame(step); })""",
        frames,
    )


def _lr_preview_height(page, frames=90):
    """The LR preview's height once it has drawn and ``frames`` animation frames have passed."""
    page.wait_for_function("() => document.getElementById('lr-preview').dataset.query !== undefined")
    _frames(page, frames)
    return page.evaluate("document.getElementById('lr-preview').clientHeight")


def test_clone_of_a_model_whose_dataset_was_deleted(workday):
    server, source = workday["server"], workday["source"]
    page = _page(workday)
    page.goto(server.url + f"/models/new?clone={source.id}")
    values = _values(page)
    assert page.locator("[name=network]").input_value() == "lenet"  # not switched to another dataset's network
    assert {n: values[n][0] for n in ("epochs", "solver", "learning_rate", "lr_policy", "momentum")} == {
        "epochs": "15",
        "solver": "sgd",
        "learning_rate": "0.05",
        "lr_policy": "step",
        "momentum": "0.8",
    }
    assert page.locator("[name=dataset]").input_value() == ""
    assert workday["gone"] in page.locator("[data-field=dataset] .field-error").inner_text()
    page.close()


def test_pretrained_menu_offers_the_dataset_task_only(workday):
    server = workday["server"]
    page = _page(workday)
    page.goto(server.url + f"/models/new?dataset={workday['digits'].id}")
    offered = page.locator("[name=pretrained] option:not([disabled])").evaluate_all("os => os.map(o => o.value)")
    assert sorted(offered) == sorted(["", workday["classifier"].id, workday["source"].id])
    page.select_option("[name=dataset]", workday["boxes"].id)
    offered = page.locator("[name=pretrained] option:not([disabled])").evaluate_all("os => os.map(o => o.value)")
    assert offered == ["", workday["detector"].id]
    page.close()
    assert not workday["errors"], workday["errors"]


def _tiny_image_folder(root):
    """Two classes of 20 grey 16x16 PNGs (a dark and a bright square): enough for a LeNet to train on."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for label, level in (("dark", 40), ("bright", 200)):
        (root / label).mkdir(parents=True)
        for i in range(20):
            pixels = np.clip(rng.normal(level, 20, (16, 16)), 0, 255).astype("uint8")
            Image.fromarray(pixels, mode="L").save(root / label / f"{i}.png")
    return root


def _start_training(page, dataset_id, name):
    return page.evaluate(
        """([ds, name]) => fetch('/api/csrf-token').then(r => r.json()).then(t =>
        fetch('/api/models', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRFToken': t.csrf_token},
              body: JSON.stringify({name: name, dataset: ds, network: 'lenet',
                                    options: {epochs: 500, batch_size: 4, lr_policy: 'fixed'}})})).then(r => r.json())""",
        [dataset_id, name],
    )


def _accept_and_click(page, selector):
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation(url=lambda url: url.rstrip("/").count("/") == 2):  # the home page
        page.click(selector)


def test_deleting_running_jobs_lands_on_home(tmp_path, live_server, chromium):
    """A running model deleted from its page, then a dataset with a running model deleted with it (cascade)."""
    from digits_core.datasets import create_dataset

    jobs = tmp_path / "jobs"
    dataset = create_dataset(
        "image-classification",
        {"folder": str(_tiny_image_folder(tmp_path / "images")), "image_type": "grayscale", "width": 16, "height": 16},
        workers=1,
        jobs_dir=jobs,
    )
    server = live_server(jobs, extra_args=["--max-training-jobs", "1"])
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(180_000)  # only the bound after which a wait on page state fails
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(str(e.error)))
    page = context.new_page()
    page.goto(server.url + "/")

    # A running model, deleted from its own page: aborted, deleted, home page with the flash.
    first = _start_training(page, dataset.id, "doomed")
    page.goto(server.url + first["url"])
    page.wait_for_function(
        "() => Number((document.getElementById('train-progress') || {dataset: {}}).dataset.epoch) > 0"
    )
    _accept_and_click(page, "#delete-model")
    assert "Model deleted." in page.locator(".alert").all_inner_texts()
    assert first["id"] not in page.content() and not (jobs / first["id"]).exists()

    # The dataset page names the running model that depends on it; confirming deletes both.
    second = _start_training(page, dataset.id, "in the way")
    page.goto(server.url + second["url"])
    page.wait_for_function("() => document.getElementById('job-status').textContent.trim() === 'Running'")
    page.goto(server.url + f"/datasets/{dataset.id}")
    assert page.locator("#dependents li").all_inner_texts() == [f"in the way {second['id']} Running"]
    _accept_and_click(page, "#delete-cascade")
    assert "Dataset deleted, and the 1 model trained on it." in page.locator(".alert").all_inner_texts()
    assert not (jobs / second["id"]).exists() and not (jobs / dataset.id).exists()
    context.close()
    assert not errors, errors


def test_detector_charts_read_like_tensorboard(workday):
    server, detector = workday["server"], workday["detector"]
    page = _page(workday)
    page.goto(server.url + f"/models/{detector.id}")
    page.wait_for_function(
        "() => Number(document.getElementById('charts').dataset.points) === 150"
    )  # 15 series × 10 epochs
    panels = page.evaluate("""() => [...document.querySelectorAll('#metric-panels [data-panel]')].map(p => [
        p.dataset.panel, Chart.getChart(p.querySelector('canvas')).data.datasets.map(d => d.label)])""")
    # One panel per tag, the task's metrics first, the nine per-class APs together, the learning rate last.
    assert [name for name, _ in panels] == ["loss", "map50", "map", "centre_recall", "ap50 per class", "learning_rate"]
    assert dict(panels)["loss"] == ["loss", "val_loss"] and len(dict(panels)["ap50 per class"]) == 9

    def chart(panel, expression):
        return page.evaluate(f"""() => {{ const c = Chart.getChart(document.querySelector(
            '#metric-panels [data-panel="{panel}"] canvas')); return {expression}; }}""")

    assert chart("map50", "c.options.scales.y.max") > 1  # 1.0 does not sit on the border
    # Final and best values as text.
    row = page.locator('#metric-summary tr[data-metric="val_map50"] td').all_inner_texts()
    assert row == ["val_map50", "1", "1", "9"]  # capped at 1.0 from epoch 9: the best is the first
    assert page.locator('#metric-summary tr[data-metric="loss"] td').all_inner_texts() == ["loss", "0.2", "0.2", "10"]
    # Smoothing (TensorBoard's debiased EMA): the loss curve changes, its first point does not.
    raw = chart("loss", "c.data.datasets[0].data.map(p => p.y)")
    page.locator('[data-control="smoothing"]').fill("0.9")
    smoothed = chart("loss", "c.data.datasets[0].data.map(p => p.y)")
    assert smoothed[0] == pytest.approx(raw[0]) and smoothed[-1] > raw[-1] * 1.5
    page.locator('[data-control="smoothing"]').fill("0")
    # Log scale, wall-time axis (minutes since the first point).
    page.check('[data-control="log"]')
    assert chart("loss", "c.options.scales.y.type") == "logarithmic"
    page.uncheck('[data-control="log"]')
    page.select_option('[data-control="axis"]', "wall")
    assert chart("loss", "c.data.datasets[0].data.map(p => p.x)") == [float(i) for i in range(EPOCHS)]
    page.select_option('[data-control="axis"]', "epoch")
    # Drag to zoom: every panel shows the range; Reset zoom undoes it.
    box = page.locator('#metric-panels [data-panel="loss"] canvas').bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, y)
    page.mouse.up()
    assert page.locator("#charts #metric-panels").get_attribute("data-zoomed") == "true"
    low, high = chart("map", "[c.options.scales.x.min, c.options.scales.x.max]")
    assert 1 < low < high < EPOCHS
    page.click('[data-control="reset-zoom"]')
    assert chart("map", "c.options.scales.x.min") is None
    # A phone: the panels stack, nothing is wider than the screen (once the charts have followed the resize).
    page.set_viewport_size({"width": 375, "height": 800})
    _frames(page, 30)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.close()


def test_other_runs_overlay_on_the_model_page_charts(workday):
    """Tick another run of the same dataset: its curves join this run's panels; untick: they go."""
    server, detector, boxes = workday["server"], workday["detector"], workday["boxes"]
    jobs = detector.path.parent
    other = _model(jobs, "detector b", boxes.id, "detection", {"network": "detectnet"})
    with open(other.path / "metrics.jsonl", "w") as handle:
        for epoch in (1, 2, 3):
            for name, value in (("loss", 3.0 / epoch), ("val_loss", 3.1 / epoch), ("val_map50", 0.2 * epoch)):
                handle.write(json.dumps({"epoch": epoch, "step": epoch, "name": name, "value": value}) + "\n")
    page = _page(workday)
    page.goto(server.url + f"/models/{detector.id}")
    page.wait_for_function("() => Number(document.getElementById('charts').dataset.points) === 150")
    offered = page.locator("#overlay-runs input[data-url]").evaluate_all("els => els.map(e => e.value)")
    assert offered == [other.id]  # same dataset; the classifier of another dataset is not offered
    page.click("#overlay-runs summary")
    page.check(f"#overlay-runs input[value='{other.id}']")
    page.wait_for_function("() => document.getElementById('overlay-runs').dataset.overlaid === '1'")

    def labels(panel):
        return page.evaluate(f"""() => Chart.getChart(document.querySelector(
            '#metric-panels [data-panel="{panel}"] canvas')).data.datasets.map(d => d.label)""")

    assert labels("loss") == ["loss", "val_loss", "detector b · loss", "detector b · val_loss"]
    assert "detector b · val_map50" in labels("map50")
    row = page.locator('#metric-summary tr[data-metric="detector b · val_map50"] td').all_inner_texts()
    assert row == ["detector b · val_map50", "0.6", "0.6", "3"]
    assert page.locator("#compare-link").get_attribute("href").endswith(f"/compare?jobs={detector.id}%2C{other.id}")
    page.uncheck(f"#overlay-runs input[value='{other.id}']")
    page.wait_for_function("() => document.getElementById('overlay-runs').dataset.overlaid === '0'")
    assert labels("loss") == ["loss", "val_loss"]
    assert not page.console_errors, page.console_errors
    page.close()


def test_pages_fit_a_phone_and_print_no_python_none(workday):
    from digits_core.plugins.registry import registry

    server = workday["server"]
    new_dataset_forms = [f"/datasets/new/{plugin_id}" for plugin_id in registry.data_ingestions()]
    assert len(new_dataset_forms) >= 10, new_dataset_forms  # every bundled data plugin's form, not only three
    page = _page(workday)
    page.set_viewport_size({"width": 375, "height": 800})
    for path in (
        "/",
        "/plugins",
        f"/datasets/{workday['digits'].id}",
        f"/models/{workday['detector'].id}",
        f"/models/{workday['classifier'].id}",
        "/models/new",
        *new_dataset_forms,
        f"/compare?jobs={workday['classifier'].id},{workday['source'].id}",
        "/models/no-such-job",
    ):
        response = page.goto(server.url + path)
        assert response.ok or path == "/models/no-such-job", (path, response.status)
        _frames(page, 10)
        assert page.evaluate("document.documentElement.scrollWidth") <= 375, path
        if not path.startswith("/datasets/new/"):  # the forms offer an encoding named "None (raw pixels)"
            assert "None" not in page.locator("body").inner_text(), path
    page.close()


def test_clone_reproduces_the_source_options_exactly(tmp_path, live_server, chromium):
    """A model trained with non-default options by `digits train`, cloned in the browser: the same options.

    The clone's ``model.json`` options are what the engine resolves from its job's ``train_options``
    (:meth:`TrainingOptions.resolve` with the network's defaults, as ``train`` writes them); they are
    compared with the source's ``model.json``, and the clone is then deleted rather than trained again.
    """
    import subprocess
    import sys

    from digits_core.datasets import create_dataset
    from digits_core.engine.networks import resolve_network
    from digits_core.engine.options import TrainingOptions

    jobs = tmp_path / "jobs"
    dataset = create_dataset(
        "image-classification",
        {"folder": str(_tiny_image_folder(tmp_path / "images")), "image_type": "grayscale", "width": 16, "height": 16},
        workers=1,
        jobs_dir=jobs,
    )
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "digits_core",
            "--jobs-dir",
            str(jobs),
            "train",
            "--dataset",
            dataset.id,
            "--network",
            "lenet",
            "--epochs",
            "1",
            "--batch-size",
            "4",
            "--solver",
            "sgd",
            "--learning-rate",
            "0.05",
            "--momentum",
            "0.8",
            "--lr-policy",
            "step",
            "--lr-step-size",
            "40",
            "--seed",
            "3",
            "--aug-flip",
            "horizontal",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
    (source,) = JobStore(jobs).list("model")
    server = live_server(jobs)
    page = chromium.new_page()
    page.set_default_timeout(120_000)  # only the bound after which a wait on page state fails
    page.goto(server.url + f"/models/new?clone={source.id}")
    with page.expect_navigation(url="**/models/2*"):
        page.click("#create-model")
    clone = JobStore(jobs).get(page.url.rsplit("/", 1)[1])
    page.goto(server.url + "/plugins")  # a page without a poller, to delete the clone from
    page.evaluate(
        """id => fetch('/api/csrf-token').then(r => r.json()).then(t =>
        fetch('/api/jobs/' + id, {method: 'DELETE', headers: {'X-CSRFToken': t.csrf_token}}))""",
        clone.id,
    )
    page.close()
    given = {k: v for k, v in clone.data["train_options"].items() if k not in ("dataset", "network")}
    network = clone.data["train_options"]["network"]
    ours = json.loads((source.path / "model.json").read_text())
    assert (network, clone.data["train_options"]["dataset"]) == (ours["network"], ours["dataset_id"])
    assert TrainingOptions.resolve(resolve_network(network).defaults, given).to_dict() == ours["options"]
