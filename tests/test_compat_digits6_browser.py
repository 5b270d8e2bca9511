"""DIGITS-6-style segmentation plugins end to end: pip-installed, CLI and a real browser on ``digits serve``.

``tests/digits6_plugins/data_blobs`` is written in the Sunnybrook idiom (its
folder read in ``__init__``, ``Blob`` objects in userdata, a flat 768-value
palette, ``1×H×W`` masks, inference choices built from userdata);
``view_segmentation`` in the imageSegmentation idiom (``argmax(axis=0)`` of
C×H×W scores, the palette reshaped to 256 colours, ``iteritems()`` in its
templates, CSS/JS linked at ``/digits/extension-static/``, an inline
``<script>`` using jQuery, an AngularJS ``{[ ]}`` block);
``builtin_view/rawOutput6`` is a DIGITS 6 built-in view, packaged with
``digits plugin wrap-digits6``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from browser_support import ARTIFACTS
from live_server import running_server

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FIXTURES = Path(__file__).resolve().parent / "digits6_plugins"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> list[Path]:
    """The blobs data plugin, the segmentation view and the wrapped built-in view, really pip-installed."""
    from digits_core.scaffold.digits6 import wrap_digits6

    root = tmp_path_factory.mktemp("digits6-segmentation")
    sources = [
        shutil.copytree(FIXTURES / folder, root / "src" / folder) for folder in ("data_blobs", "view_segmentation")
    ]
    sources.append(wrap_digits6(FIXTURES / "builtin_view" / "rawOutput6", root / "src").folder)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--target",
            str(root / "site"),
            *map(str, sources),
        ],
        check=True,
        capture_output=True,
        text=True,
    )  # one pip run for the three (CI time)
    return [root / "site"]


def _blobs(folder: Path, count: int = 12, size: int = 16) -> Path:
    """Images with a bright (class 1) and a mid-grey (class 2) square, and their masks."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        image = np.full((size, size), 20, np.uint8)
        mask = np.zeros((size, size), np.uint8)
        for value, label in ((220, 1), (120, 2)):
            top, left = rng.integers(0, size - 5, 2)
            image[top : top + 5, left : left + 5], mask[top : top + 5, left : left + 5] = value, label
        np.save(folder / f"image-{i:02d}.npy", image)
        np.save(folder / f"mask-{i:02d}.npy", mask)
    return folder


def test_segmentation_plugins_on_the_cli_and_in_the_browser(installed, digits_cli, chromium, tmp_path):
    jobs = tmp_path / "jobs"
    base = ["--jobs-dir", str(jobs)]
    data = _blobs(tmp_path / "blobs")

    # Listed without the folder: the plugin reads it in __init__, yet no command prints an error about it.
    listing = digits_cli("plugins", pythonpath=installed)
    assert listing.returncode == 0 and "blobs6" in listing.stdout and "raw-output6" in listing.stdout
    assert "cannot become options" not in listing.stderr and "TypeError" not in listing.stderr, listing.stderr
    # The wrapped built-in view passes the view contract (process_data and its template on synthetic output).
    checked = digits_cli("plugin", "check", "view:raw-output6", pythonpath=installed)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    created = digits_cli(
        *base,
        "dataset",
        "create",
        "blobs6",
        "--image-folder",
        str(data),
        "--workers",
        "1",
        "--json",
        pythonpath=installed,
    )
    assert created.returncode == 0, created.stderr
    job = json.loads(created.stdout)["job"]
    assert job["dataset"]["label"] == {"kind": "mask", "dtype": "uint8", "shape": [16, 16]}
    assert job["dataset"]["stages"] == {"train": 8, "val": 4}
    info = json.loads((jobs / job["id"] / "dataset" / "dataset.json").read_text())
    assert info["color_palette"][:3] == [[0, 0, 0], [255, 0, 0], [0, 255, 0]]
    assert info["userdata"]["blobs"]["digits6_pickled"].endswith("digits6-userdata.pkl")  # Blob objects, pickled

    with running_server(jobs, pythonpath=installed, log_dir=tmp_path) as server:
        context = chromium.new_context()
        page = context.new_page()
        page.set_default_timeout(180_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        try:
            # The dataset form: the DIGITS 6 template, its tooltips readable text
            page.goto(server.url + "/datasets/new/blobs6")
            page.wait_for_selector("[name=image_folder]")
            assert "Folder of image-*.npy and mask-*.npy files" in page.locator("#dataset-form").inner_text()

            token = page.evaluate("fetch('/api/csrf-token').then(r => r.json()).then(d => d.csrf_token)")
            model = page.evaluate(
                """([token, ds]) => fetch('/api/models', {method: 'POST',
                headers: {'Content-Type': 'application/json', 'X-CSRFToken': token},
                body: JSON.stringify({name: 'blobs unet', dataset: ds, network: 'unet',
                       options: {epochs: 1, batch_size: 8, solver: 'adam', learning_rate: 0.003, lr_policy: 'fixed',
                                 network_params: {filters: 4, depth: 2}}})}).then(r => r.json())""",
                [token, job["id"]],
            )
            page.goto(server.url + model["url"])
            page.wait_for_function(
                "() => (document.getElementById('job-status') || {}).textContent"
                " && document.getElementById('job-status').textContent.trim() === 'Done'",
                timeout=240_000,
            )
            page.wait_for_selector("#infer-form")
            model_id = model["url"].rstrip("/").rsplit("/", 1)[1]

            # CLI: --validation-record from the dataset's pickled Blob objects, the DIGITS 6 views' pages
            report = tmp_path / "report.html"
            inferred = digits_cli(
                *base,
                "infer",
                "--model",
                model_id,
                "--validation-record",
                "1",
                "--view",
                "segmentation6",
                "--view-option",
                "opacity=50",
                "--out",
                str(report),
                pythonpath=installed,
                timeout=240,
            )
            assert inferred.returncode == 0, inferred.stderr
            html = report.read_text(encoding="utf-8")
            assert re.search(
                r'class="badge segmentation6-class" style="background-color: #(000000|ff0000|00ff00)"', html
            )
            assert "set_opacity" not in html  # the AngularJS block is gone
            assert "jQuery v3.7.1" in html and ".label-info" in html  # the compat's files, inlined

            # Web: the plugin's inference form with the dataset's choices, the view drawn over the image
            page.select_option("#view-id", "segmentation6")
            page.check("input[name=input_mode][value=plugin]")
            choices = page.locator("[name=validation_record] option").all_inner_texts()
            assert len(choices) == 5 and choices[0] == "- select record -"  # none + the 4 validation blobs
            page.select_option("[name=validation_record]", "2")
            page.click("#infer-button")
            page.wait_for_selector("#results img.segmentation6-overlay[data-top-left-class]", timeout=180_000)
            page.screenshot(path=str(ARTIFACTS / "digits6-segmentation-view.png"), full_page=True)
            overlay = page.locator("img.segmentation6-overlay").first
            image = page.locator("img.segmentation6-input").first
            assert overlay.evaluate("el => getComputedStyle(el).position") == "absolute"  # the view's own CSS
            assert overlay.bounding_box() == image.bounding_box()  # the mask is drawn over the image
            assert overlay.evaluate("el => getComputedStyle(el).opacity") == "0.6"  # set by the inline script
            assert overlay.get_attribute("data-top-left-class") in ("0", "1", "2")
            assert page.evaluate("window.segmentation6App") == "loaded"  # JS from /digits/extension-static/
            badge = page.locator(".segmentation6-class").first
            assert badge.evaluate("el => getComputedStyle(el).color") == "rgb(255, 255, 255)"
            assert badge.evaluate("el => getComputedStyle(el).backgroundColor") in (
                "rgb(0, 0, 0)",
                "rgb(255, 0, 0)",
                "rgb(0, 255, 0)",
            )
            label = page.locator(".segmentation6-count").first
            assert label.evaluate("el => getComputedStyle(el).display") == "inline"  # Bootstrap's label, not a block
            assert label.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(91, 192, 222)"
            assert "{[" not in page.locator("#results").inner_text()
        finally:
            context.close()
        assert not errors, f"browser errors: {errors}"
