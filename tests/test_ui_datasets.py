"""Dataset pages and forms (issue 15): label histogram per stage, mean image, Explore's class filter,
the folder / list / S3 tabs of the image dataset form, the class-subfolder check on the field.

Fast tests render the real pages with Flask's test client on a real dataset built once for the module
(LMDB, PNG records). The browser tests (``slow``, ``browser``) run a real ``digits serve`` and headless
Chromium (the ``chromium`` fixture of ``tests/browser_support.py``), with JavaScript and without, and
check the LR preview of every policy against DIGITS 6's formulas. Screenshots go to ``test-artifacts/ui-datasets-*.png``::

    flock /tmp/digits-heavy.lock .venv/bin/python -m pytest tests/test_ui_datasets.py
"""

from __future__ import annotations

import io
import math
import os
import re
import time

import numpy as np
import pytest
from PIL import Image

#: Class folder -> (images, gray level of every pixel): unequal classes, so each bar differs.
CLASSES = {"cat": (10, 200), "dog": (6, 100), "eel": (3, 0)}


def write_class_folders(root, classes=CLASSES, size=8):
    """One sub-folder of constant-gray PNGs per class; returns ``root``."""
    for name, (count, level) in classes.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            Image.fromarray(np.full((size, size), level, np.uint8), mode="L").save(root / name / f"{i:02d}.png")
    return root


def expected_split(count, val_percent=25.0):
    """``(train, val)`` images of one class: DIGITS's per-class split, validation rounded half up."""
    val = int(math.floor(count * val_percent / 100.0 + 0.5))
    return count - val, val


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A real classification dataset (3 unequal classes, 8×8 grayscale PNG records) and its folders."""
    from digits_core.datasets import create_dataset

    root = tmp_path_factory.mktemp("ui-datasets")
    data = write_class_folders(root / "animals")
    job = create_dataset(
        "image-classification",
        {"folder": str(data), "image_type": "grayscale", "width": 8, "height": 8},
        name="animals",
        workers=1,
        jobs_dir=root / "jobs",
    )
    return {"root": root, "data": data, "jobs": root / "jobs", "id": job.id}


@pytest.fixture(scope="module")
def client(built):
    from digits_core.web import create_app

    app = create_app(built["jobs"], start_scheduler=False, testing=True, data_roots=[built["root"]])
    return app.test_client()


def _form_post(client, **fields):
    token = client.get("/api/csrf-token").get_json()["csrf_token"]
    base = {
        "csrf_token": token,
        "job_name": "new",
        "image_type": "grayscale",
        "width": "8",
        "height": "8",
        "resize_mode": "squash",
        "encoding": "png",
        "jpg_quality": "90",
        "seed": "0",
        "min_per_class": "2",
        "val_percent": "25",
        "test_percent": "0",
        "shuffle": "y",
    }
    return client.post("/datasets/new/image-classification", data={**base, **fields})


def _field_errors(html):
    return dict(re.findall(r'class="field-error" data-for="(\w+)">([^<]*)<', html))


# -- dataset page ---------------------------------------------------------------------------------------------------


def test_dataset_page_shows_images_per_class_and_stage(client, built):
    html = client.get(f"/datasets/{built['id']}").get_data(as_text=True)
    table = re.search(r'id="label-histogram".*?</table>', html, re.DOTALL).group(0)
    assert "images per class and stage" in table
    for class_id, (name, (count, _)) in enumerate(CLASSES.items()):
        row = re.search(rf'<tr data-class="{class_id}"><td class="class-name">(.*?)</td>(.*?)</tr>', table, re.DOTALL)
        assert row.group(1) == f"{class_id}: {name}"
        cells = dict(re.findall(r'data-stage="(\w+)".*?>(\d+)</a>', row.group(2), re.DOTALL))
        train, val = expected_split(count)
        assert cells == {"train": str(train), "val": str(val)}, (name, cells)
    # Bars are scaled to the stage's largest class: cat (7 of 7 train images) is full, eel (2) is 2/7.
    widths = re.findall(r'data-stage="train".*?class="hbar" style="width: ([\d.]+)%"', table, re.DOTALL)
    assert [float(w) for w in widths] == pytest.approx([100.0, 100 * 4 / 7, 100 * 2 / 7], abs=0.06)
    # A count opens those images in Explore.
    assert f'href="/datasets/{built["id"]}/explore?stage=val&amp;label=2">1</a>' in table


def test_dataset_json_has_the_histograms_and_the_mean_image(client, built):
    data = client.get(f"/datasets/{built['id']}.json").get_json()
    hist = data["label_histograms"]
    assert hist["unit"] == "images" and hist["stages"] == ["train", "val"]
    assert [c["name"] for c in hist["classes"]] == list(CLASSES)
    assert hist["totals"] == {
        "train": sum(expected_split(n)[0] for n, _ in CLASSES.values()),
        "val": sum(expected_split(n)[1] for n, _ in CLASSES.values()),
    }
    assert data["mean_image_url"] == f"/datasets/{built['id']}/mean.png"


def test_mean_image_is_the_mean_of_the_training_images(client, built):
    html = client.get(f"/datasets/{built['id']}").get_data(as_text=True)
    img = re.search(r'<img id="mean-image" src="([^"]+)"[^>]*width="(\d+)" height="(\d+)"', html)
    assert img and (img.group(2), img.group(3)) == ("192", "192")  # 8×8 shown 24× larger
    assert "Mean of 13 train images, 8 × 8 × 1" in html
    resp = client.get(img.group(1))
    assert resp.status_code == 200 and resp.mimetype == "image/png"
    pixels = np.asarray(Image.open(io.BytesIO(resp.data)).convert("L"))
    # Every image of a class has one gray level: the mean is the count-weighted level of the train split.
    train = {name: expected_split(count)[0] for name, (count, _) in CLASSES.items()}
    level = sum(train[n] * lv for n, (_, lv) in CLASSES.items()) / sum(train.values())
    assert pixels.shape == (8, 8) and np.all(pixels == round(level)), (pixels[0, 0], level)


def test_a_dataset_still_building_has_no_histogram_or_mean_yet(client, built):
    from digits_core.jobs import Job, JobStatus

    job = Job.create("dataset", "busy", jobs_dir=built["jobs"], plugin_id="image-classification")
    job.set_status(JobStatus.WAITING)
    html = client.get(f"/datasets/{job.id}").get_data(as_text=True)
    assert 'id="label-histogram"' not in html and 'id="mean-image"' not in html
    assert client.get(f"/datasets/{job.id}/mean.png").status_code == 404


def test_segmentation_histogram_counts_pixels_per_class(built):
    """A mask dataset's histogram counts pixels (the numbers written into the masks), not images."""
    from digits_core.datasets import create_dataset, open_dataset
    from digits_core.datasets.explore import label_histograms

    root = built["root"] / "seg"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    masks = []
    for i in range(4):
        mask = np.zeros((8, 8), np.uint8)
        mask[: i + 1, :] = 1  # class 1: i + 1 rows
        mask[7, : 2 * i] = 2  # class 2: 2 i pixels
        masks.append(mask)
        Image.fromarray(np.full((8, 8), 40 * i, np.uint8), mode="L").save(root / "images" / f"{i}.png")
        Image.fromarray(mask, mode="L").save(root / "labels" / f"{i}.png")
    job = create_dataset(
        "image-segmentation",
        {
            "image_folder": str(root / "images"),
            "label_folder": str(root / "labels"),
            "val_percent": 0,
            "image_type": "grayscale",
            "width": 8,
            "height": 8,
        },
        name="seg",
        workers=1,
        jobs_dir=built["root"] / "seg-jobs",
    )
    with open_dataset(job.path) as ds:
        hist = label_histograms(ds)
        _, stored = ds.read_all("train")
    assert hist["unit"] == "pixels" and hist["stages"] == ["train"]
    assert [c["counts"]["train"] for c in hist["classes"]] == np.bincount(np.concatenate(masks).ravel()).tolist()
    # Explore's class filter keeps the records with a pixel of the class (mask 0 has no class 2).
    from digits_core.web import create_app

    client = create_app(
        built["root"] / "seg-jobs", start_scheduler=False, testing=True, data_roots=[built["root"]]
    ).test_client()
    data = client.get(f"/datasets/{job.id}/explore?stage=train&label=2&format=json").get_json()
    assert [item["index"] for item in data["items"]] == [i for i, m in enumerate(stored) if (m == 2).any()]
    assert data["count"] == 3 and data["classes"][2]["count"] == 12 and data["class_unit"] == "pixels"
    html = client.get(f"/datasets/{job.id}/explore?stage=train&label=2").get_data(as_text=True)
    assert "3 records in stage <b>train</b> with class <b>2" in html and ">2 (12 pixels)</option>" in html


def test_box_filter_keeps_images_with_a_box_of_the_class():
    """Detection labels (padded with class -1 rows) and masks summarised per record, as Explore filters them."""
    from digits_core.datasets.explore import _summarize

    boxes = np.full((3, 2, 5), -1.0, np.float32)
    boxes[0, 0] = [2, 1, 1, 4, 4]
    boxes[1, :] = [[0, 0, 0, 2, 2], [1, 3, 3, 5, 5]]
    has = _summarize(boxes, "boxes", 3)
    assert has.tolist() == [[False, False, True], [True, True, False], [False, False, False]]
    masks = np.array([[[0, 9], [0, 0]], [[1, 1], [2, 0]]])  # 9: an id beyond the classes is ignored
    assert _summarize(masks, "mask", 3).tolist() == [[True, False, False], [True, True, True]]


# -- Explore --------------------------------------------------------------------------------------------------------


def test_explore_class_filter_shows_only_that_class(client, built):
    data = client.get(f"/datasets/{built['id']}/explore?stage=train&label=1&format=json").get_json()
    assert data["label"] == 1 and data["count"] == expected_split(CLASSES["dog"][0])[0]
    assert [item["label"] for item in data["items"]] == ["dog"] * data["count"]
    assert data["classes"] == [
        {"id": i, "name": n, "count": expected_split(c)[0]} for i, (n, (c, _)) in enumerate(CLASSES.items())
    ]
    # The record numbers are the stage's own: reading them unfiltered gives the same class.
    everything = client.get(f"/datasets/{built['id']}/explore?stage=train&per_page=200&format=json").get_json()
    by_index = {item["index"]: item["label"] for item in everything["items"]}
    assert all(by_index[item["index"]] == "dog" for item in data["items"])
    assert sum(label == "dog" for label in by_index.values()) == data["count"]


def test_explore_filter_menu_and_pages_keep_the_class(client, built):
    html = client.get(f"/datasets/{built['id']}/explore?stage=train&label=0&per_page=3").get_data(as_text=True)
    assert re.search(r'<option value="0" selected>0: cat \(7\)</option>', html)
    assert '<option value="">All classes</option>' in html
    assert "7 records in stage <b>train</b> of class <b>0: cat</b>" in html
    assert "page 1 of 3" in html and len(re.findall(r'class="sample-label">cat<', html)) == 3
    assert f'href="/datasets/{built["id"]}/explore?stage=train&amp;label=0&amp;page=1&amp;per_page=3">Next' in html
    assert f'href="/datasets/{built["id"]}/explore?stage=val&amp;label=0"' in html  # stage buttons keep it
    # The filter is a plain GET form: it works without JavaScript.
    form = re.search(r'<form method="get" action="([^"]+)"[^>]*id="class-filter">(.*?)</form>', html, re.DOTALL)
    assert form.group(1) == f"/datasets/{built['id']}/explore" and 'name="stage" value="train"' in form.group(2)


@pytest.mark.parametrize("label", ["7", "-1", "cat"])
def test_explore_refuses_a_class_the_dataset_lacks(client, built, label):
    resp = client.get(
        f"/datasets/{built['id']}/explore?stage=train&label={label}", headers={"Accept": "application/json"}
    )
    assert resp.status_code == 400
    assert "label: " in resp.get_json()["error"]["message"]
    assert "is not a class id of this dataset (0 to 2)" in resp.get_json()["error"]["message"]


# -- the form: source tabs and the class-subfolder check --------------------------------------------------------------


def _tabs(html):
    checked = re.findall(
        r'<input type="radio" class="tab-radio" name="source_tab" id="source-tab-(\w+)" '
        r'value="\w+"( checked)?>',
        html,
    )
    panels = dict(re.findall(r'<div class="tab-panel" data-tab="(\w+)">(.*?)\n    </div>', html, re.DOTALL))
    return [key for key, _ in checked], next((key for key, on in checked if on), None), panels


def test_form_sources_are_tabs_with_their_own_fields(client):
    keys, chosen, panels = _tabs(client.get("/datasets/new/image-classification").get_data(as_text=True))
    assert keys == ["folder", "list", "s3"] and chosen == "folder"
    fields = {key: re.findall(r'data-field="(\w+)"', panel) for key, panel in panels.items()}
    assert fields == {
        "folder": ["folder", "val_folder", "test_folder"],
        "list": ["train_list", "val_list", "test_list", "labels_file", "list_root"],
        "s3": [
            "s3_endpoint_url",
            "s3_bucket",
            "s3_path",
            "s3_val_path",
            "s3_test_path",
            "s3_accesskey",
            "s3_secretkey",
            "s3_profile",
            "s3_region",
        ],
    }


def test_form_reopens_on_the_tab_with_the_error(client, built):
    resp = _form_post(client, train_list=str(built["root"] / "missing.txt"))
    assert resp.status_code == 200
    html = resp.get_data(as_text=True)
    assert _tabs(html)[1] == "list"
    assert "does not exist or is not a file" in _field_errors(html)["train_list"]


def test_clone_of_a_list_dataset_opens_on_the_list_tab(client, built):
    from digits_core.jobs import Job, JobStatus

    source = Job.create(
        "dataset",
        "from lists",
        jobs_dir=built["jobs"],
        plugin_id="image-classification",
        form_data={"train_list": str(built["root"] / "train.txt"), "width": 8, "height": 8},
    )
    source.set_status(JobStatus.DONE)
    html = client.get(f"/datasets/new/image-classification?clone={source.id}").get_data(as_text=True)
    assert _tabs(html)[1] == "list"
    assert f'value="{built["root"] / "train.txt"}"' in _tabs(html)[2]["list"]


def test_folder_without_class_subfolders_is_refused_on_the_field(client, built):
    flat = built["root"] / "flat"
    flat.mkdir(exist_ok=True)
    for i in range(3):
        Image.new("L", (8, 8)).save(flat / f"{i}.png")
    empty = built["root"] / "empty-classes"
    for name in ("a", "b"):
        (empty / name).mkdir(parents=True, exist_ok=True)
    jobs_before = sorted(p.name for p in built["jobs"].iterdir())
    resp = _form_post(client, folder=str(flat))
    assert resp.status_code == 200
    error = _field_errors(resp.get_data(as_text=True))["folder"]
    assert f"training folder {flat} has no class sub-folders (it holds 3 images directly)" in error
    assert "put each class&#39;s images in a sub-folder named after the class" in error
    (empty / "a" / "loop").symlink_to(empty / "a", target_is_directory=True)  # walked once, not forever
    error = _field_errors(_form_post(client, folder=str(empty)).get_data(as_text=True))["folder"]
    assert "has 2 sub-folders (a, b) but no image in any of them" in error
    error = _field_errors(_form_post(client, folder=str(built["data"]), val_folder=str(flat)).get_data(as_text=True))
    assert "validation folder" in error["val_folder"] and "no class sub-folders" in error["val_folder"]
    outside = built["root"].parent / f"{built['root'].name}-outside"  # not under the server's data roots
    (outside / "cat").mkdir(parents=True, exist_ok=True)
    Image.new("L", (8, 8)).save(outside / "cat" / "0.png")
    linked = built["root"] / "linked-classes"
    linked.mkdir(exist_ok=True)
    (linked / "cat").symlink_to(outside / "cat", target_is_directory=True)
    error = _field_errors(_form_post(client, folder=str(linked)).get_data(as_text=True))["folder"]
    assert (
        f"class folder cat leads to {os.path.realpath(outside / 'cat')}, outside the server&#39;s data roots" in error
    )
    assert sorted(p.name for p in built["jobs"].iterdir()) == jobs_before  # no job was started


def test_cli_refuses_the_flat_folder_before_a_job_starts(built, capsys):
    from digits_core.cli import main as digits

    flat = built["root"] / "flat-cli"
    flat.mkdir()
    Image.new("L", (8, 8)).save(flat / "only.png")
    jobs = built["root"] / "cli-jobs"
    assert (
        digits(
            [
                "--jobs-dir",
                str(jobs),
                "dataset",
                "create",
                "image-classification",
                "--folder",
                str(flat),
                "--name",
                "flat",
            ]
        )
        != 0
    )
    assert "has no class sub-folders (it holds 1 image directly)" in capsys.readouterr().err
    assert not jobs.exists() or not any(jobs.iterdir())


# -- in a real browser, on a real `digits serve` ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """One ``digits serve`` for the module; its working folder (a data root) holds the class folders."""
    from live_server import running_server

    root = tmp_path_factory.mktemp("ui-datasets-live")
    write_class_folders(root / "animals")
    flat = root / "flat"
    flat.mkdir()
    Image.new("L", (8, 8)).save(flat / "only.png")
    with running_server(root / "jobs") as server:
        yield {"server": server, "root": root, "data": root / "animals", "flat": flat}


def _page(browser, javascript=True):
    """A new page; JavaScript errors and CSP violations are collected in ``page.js_errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=javascript)
    page = context.new_page()
    page.set_default_timeout(120_000)  # only the bound after which a wait on page state fails
    page.js_errors = []
    page.on("pageerror", lambda exc: page.js_errors.append(str(exc)))
    page.on("console", lambda m: page.js_errors.append(m.text) if "Content Security Policy" in m.text else None)
    return page


def _shot(page, name):
    from browser_support import ARTIFACTS

    page.screenshot(path=str(ARTIFACTS / f"ui-datasets-{name}.png"), full_page=True)


def _visible_panel(page):
    return [key for key in ("folder", "list", "s3") if page.locator(f'.tab-panel[data-tab="{key}"]').is_visible()]


@pytest.mark.slow
@pytest.mark.browser
def test_dataset_tabs_histogram_mean_and_class_filter_in_chromium(live, chromium):
    server, page = live["server"], _page(chromium)
    page.goto(server.url + "/datasets/new/image-classification")
    assert _visible_panel(page) == ["folder"]
    # The flat folder is refused on its field; nothing is queued.
    page.fill("[name=job_name]", "flat")
    page.fill("[name=folder]", str(live["flat"]))
    page.click("#create-dataset")
    page.wait_for_selector('.field-error[data-for="folder"]')
    assert "has no class sub-folders" in page.locator('[data-field="folder"] .field-error').inner_text()
    assert page.locator('[data-field="folder"]').is_visible()
    _shot(page, "flat-folder-refused")
    assert server.get_json("/index.json")["datasets"] == []

    # A list path typed in the List tab is not sent once the Folder tab is chosen again.
    page.click("label[for=source-tab-list]")
    assert _visible_panel(page) == ["list"]
    page.fill("[name=train_list]", str(live["root"] / "no-such-list.txt"))
    _shot(page, "form-list-tab")
    page.click("label[for=source-tab-folder]")
    assert _visible_panel(page) == ["folder"]
    page.fill("[name=folder]", str(live["data"]))
    page.fill("[name=job_name]", "animals")
    page.select_option("[name=image_type]", "grayscale")
    page.fill("[name=width]", "8")
    page.fill("[name=height]", "8")
    page.click("#create-dataset")
    page.wait_for_url("**/datasets/2*")
    page.wait_for_selector("#label-histogram")  # the page reloads itself once the job is Done
    rows = page.locator("#label-histogram tbody tr").all_inner_texts()
    assert [re.sub(r"\s+", " ", r).strip() for r in rows] == ["0: cat 7 3", "1: dog 4 2", "2: eel 2 1"]
    page.wait_for_function("() => document.getElementById('mean-image').complete")
    assert page.evaluate("document.getElementById('mean-image').naturalWidth") == 8
    assert page.locator("#mean-image").bounding_box()["width"] == 192
    _shot(page, "show")
    page.set_viewport_size({"width": 375, "height": 740})  # a phone: nothing wider than the screen
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 375
    _shot(page, "show-375")
    page.set_viewport_size({"width": 1280, "height": 900})

    # A count opens Explore on that class; the menu switches class (submitting itself).
    page.click('#label-histogram tr[data-class="1"] td[data-stage="train"] a')
    page.wait_for_selector("#class-filter")
    assert page.locator(".sample-label").all_inner_texts() == ["dog"] * 4
    page.select_option("#filter-label", "2")
    page.wait_for_url("**label=2**")
    assert page.locator(".sample-label").all_inner_texts() == ["eel"] * 2
    assert "of class 2: eel" in page.locator("#explore-summary").inner_text()
    _shot(page, "explore-filtered")
    from browser_support import assert_fits_a_phone

    assert_fits_a_phone(page, "Explore of a classification dataset, one class", screenshot="ui-datasets-explore-375")
    assert not page.js_errors, page.js_errors
    page.context.close()


@pytest.mark.slow
@pytest.mark.browser
def test_tabs_and_class_filter_work_without_javascript(live, chromium):
    server, page = live["server"], _page(chromium, javascript=False)
    page.goto(server.url + "/datasets/new/image-classification")
    assert _visible_panel(page) == ["folder"]
    page.click("label[for=source-tab-s3]")
    assert _visible_panel(page) == ["s3"] and page.locator("[name=s3_bucket]").is_visible()
    _shot(page, "form-s3-tab-no-js")
    page.click("label[for=source-tab-folder]")
    page.fill("[name=folder]", str(live["data"]))
    page.fill("[name=job_name]", "animals without js")
    page.fill("[name=width]", "8")
    page.fill("[name=height]", "8")
    page.click("#create-dataset")
    page.wait_for_url("**/datasets/2*")
    job_id = page.url.rstrip("/").rsplit("/", 1)[1]
    deadline = time.monotonic() + 120  # no JavaScript on this page to watch the job: poll its state
    while (status := server.get_json(f"/datasets/{job_id}.json")["job"]["status"]) not in ("Done", "Error"):
        assert time.monotonic() < deadline, f"dataset still {status}\n{server.describe()}"
        time.sleep(0.2)  # polling interval of a bounded wait on state
    assert status == "Done", server.describe()
    page.goto(server.url + f"/datasets/{job_id}/explore?stage=val")
    page.select_option("#filter-label", "0")
    page.click("#filter-apply")
    page.wait_for_url("**label=0**")
    assert page.locator(".sample-label").all_inner_texts() == ["cat"] * 3
    page.context.close()


PROGRESS_POINTS = list(range(101))


def _digits6_rate(query: dict, progress: float) -> float:
    """DIGITS 6's rate for the preview's query string (empty parameters take DIGITS's defaults)."""
    from test_lr_policy_formulas import digits6

    def num(name):
        return float(query[name]) if query.get(name, "").strip() else None

    steps = query.get("lr_step_values", "").strip()
    return digits6(
        query["lr_policy"],
        progress,
        float(query["learning_rate"]),
        gamma=num("lr_gamma"),
        power=num("lr_power"),
        step=num("lr_step_size"),
        steps=tuple(float(s) for s in steps.split(",")) if steps else None,
    )


@pytest.mark.slow
@pytest.mark.browser
def test_lr_preview_draws_digits6_formula_for_every_policy(live, chromium):
    from urllib.parse import parse_qsl

    from digits_core.engine.lr_policies import POLICIES

    server, page = live["server"], _page(chromium)
    page.goto(server.url + "/models/new")
    for policy in POLICIES:
        page.select_option("[name=lr_policy]", policy)
        page.wait_for_function(
            "p => (document.getElementById('lr-preview').dataset.query || '').includes('lr_policy=' + p)", arg=policy
        )
        query = dict(
            parse_qsl(page.evaluate("document.getElementById('lr-preview').dataset.query"), keep_blank_values=True)
        )
        drawn = page.evaluate("Chart.getChart('lr-preview').data.datasets[0].data.map(p => [p.x, p.y])")
        assert len(drawn) == 101
        expected = [_digits6_rate(query, x) for x, _ in drawn]
        np.testing.assert_allclose([y for _, y in drawn], expected, rtol=1e-9, err_msg=f"{policy}: {query}")
        if policy == "sigmoid":
            assert drawn[0][1] > drawn[50][1] > drawn[100][1], "DIGITS 6's sigmoid decays with its default gamma"
            _shot(page, "lr-preview-sigmoid")
    # A learning-rate sweep draws one curve per rate, with a legend.
    page.fill("[name=learning_rate]", "0.1,0.01")
    page.wait_for_function("() => document.getElementById('lr-preview').dataset.series === '2'")
    lines = page.evaluate("Chart.getChart('lr-preview').data.datasets.map(d => [d.label, d.data.map(p => p.y)])")
    assert [label for label, _ in lines] == ["lr 0.1", "lr 0.01"]
    query = dict(
        parse_qsl(page.evaluate("document.getElementById('lr-preview').dataset.query"), keep_blank_values=True)
    )
    for rate, (_, ys) in zip((0.1, 0.01), lines):
        np.testing.assert_allclose(
            ys, [_digits6_rate({**query, "learning_rate": rate}, x) for x in PROGRESS_POINTS], rtol=1e-9
        )
    _shot(page, "lr-preview-sweep")
    # A value that would break the schedule is refused with the reason, and nothing is drawn.
    page.select_option("[name=lr_policy]", "exp")
    page.fill("[name=lr_gamma]", "-0.5")
    page.wait_for_function("() => document.getElementById('lr-preview').dataset.points === '0'")
    assert "exp: gamma -0.5 must be above 0" in page.locator("#lr-preview-error").inner_text()
    assert not page.js_errors, page.js_errors
    page.context.close()
