"""Detection results are compact (issue 43, item 5): 40 images fit 3,000 px at 1280 px, and the Layout menu
changes the layout.

The results page is the ``bounding-boxes`` view's real fragments (its ``process_data`` and templates on
40 synthetic images with predictions and ground truth), stored as a result of a model job and served by a
real ``digits serve`` to headless Chromium; no training.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from digits_core.inference.report import render_fragments, run_view
from digits_core.jobs import Job, JobStatus

IMAGES = 40


def _stored_detection_result(jobs) -> tuple[Job, str]:
    from digits_view_detection.view import BoundingBoxesView

    ds = Job.create("dataset", "boxes", jobs_dir=jobs, plugin_id="image-detection")
    ds.set_status(JobStatus.DONE)
    job = Job.create("model", "detector", jobs_dir=jobs, dataset_id=ds.id, train_options={"network": "detectnet"})
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    (job.path / "model.json").write_text(json.dumps({"task": "detection"}))
    rng = np.random.default_rng(7)
    view = BoundingBoxesView(
        {"class_labels": ["dontcare", "car", "van"], "color_palette": [[0, 0, 0], [230, 40, 40], [40, 90, 230]]}
    )
    samples = []
    for i in range(IMAGES):
        image = rng.integers(0, 255, (96, 160, 3), dtype=np.uint8)
        boxes = np.array([[1, 10, 10, 60, 50], [2, 80, 30, 150, 90]], dtype=np.float32)
        preds = np.array([[c, s, *b] for (c, *b), s in zip(boxes.tolist(), (0.9, 0.6))] + [[1, 0.4, 100, 5, 140, 40]])
        samples.append((f"img_{i:03d}.png", image, preds.astype(np.float32), boxes))
    fragments = render_fragments(view, run_view(view, samples))
    result_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-abcdef"
    folder = job.path / "inference" / "results" / result_id
    folder.mkdir(parents=True)
    record = {
        "view_id": "bounding-boxes",
        "view_title": BoundingBoxesView.title,
        "fragments": {
            "header": str(fragments["header"]),
            "samples": [str(s) for s in fragments["samples"]],
            "summary": str(fragments["summary"]),
        },
        "info": {},
        "json": {},
        "inputs": "40 images",
        "samples": IMAGES,
        "id": result_id,
        "created": time.time(),
        "files": [],
    }
    (folder / "result.json").write_text(json.dumps(record))
    return job, result_id


@pytest.mark.slow
@pytest.mark.browser
def test_forty_detection_results_fit_3000_px_and_the_layout_menu_works(chromium, live_server, tmp_path):
    from browser_support import ARTIFACTS, assert_fits_a_phone

    job, result_id = _stored_detection_result(tmp_path / "jobs")
    server = live_server(tmp_path / "jobs")
    page = chromium.new_context(viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(server.url + f"/models/{job.id}/inference/{result_id}")
    page.wait_for_selector("#results-layout")
    assert page.locator(".dbb-sample").count() == IMAGES
    assert page.locator(".dbb-sample:visible").count() == IMAGES  # one page of results, none hidden
    height = page.evaluate("document.documentElement.scrollHeight")
    page.screenshot(path=str(ARTIFACTS / "detection-results-compact.png"), full_page=True)
    assert height <= 3000, f"40 detection results are {height} px tall at 1280 px"
    assert not page.locator(".dbb-detections").first.is_visible()  # compact: the tables are folded away

    page.select_option("#results-layout", "cards")
    cards = page.evaluate("document.documentElement.scrollHeight")
    assert page.locator(".dbb-detections").first.is_visible()
    assert cards > height * 1.2, (cards, height)  # the menu changes what the page shows
    page.select_option("#results-layout", "table")
    assert page.evaluate("document.documentElement.scrollHeight") == height
    assert_fits_a_phone(page, "detection results", screenshot="detection-results-375")
    assert not errors, errors
