"""Pages at 375 px (issue 43, item 7): the dataset types of an empty home page and the New dataset menu stay
on the screen; Classify Many (the classification view's real fragments of 12 images with long paths and
class names, stored as a result) fits in both layouts. A real ``digits serve`` in headless Chromium."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from digits_core.inference.report import render_fragments, run_view
from digits_core.jobs import Job, JobStatus


def _classify_many(jobs) -> str:
    """A model job with a stored Classify Many result; returns the result page's path."""
    from digits_view_classification.view import ClassificationView

    labels = [f"a rather long class name number {i}" for i in range(10)]
    job = Job.create("model", "classifier", jobs_dir=jobs, train_options={"network": "lenet"})
    job.set_status(JobStatus.RUNNING)
    job.set_status(JobStatus.DONE)
    (job.path / "model.json").write_text(json.dumps({"task": "classification"}))
    view = ClassificationView({"class_labels": labels})
    rng = np.random.default_rng(3)
    samples = []
    for i in range(12):
        probs = rng.dirichlet(np.ones(10)).astype(np.float32)
        image = rng.integers(0, 255, (28, 28, 1), dtype=np.uint8)
        samples.append((f"/data/digits/test/a/long/folder/name/without/spaces/img_{i:05d}.png", image, probs, i % 10))
    fragments = render_fragments(view, run_view(view, samples))
    result_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-abc123"
    folder = job.path / "inference" / "results" / result_id
    folder.mkdir(parents=True)
    record = {
        "view_id": ClassificationView.get_id(),
        "view_title": "Classification",
        "fragments": {
            k: None if v is None else (str(v) if k != "samples" else [str(x) for x in v]) for k, v in fragments.items()
        },
        "info": {},
        "json": {},
        "inputs": "12 images",
        "samples": 12,
        "id": result_id,
        "created": time.time(),
        "files": [],
    }
    (folder / "result.json").write_text(json.dumps(record))
    return f"/models/{job.id}/inference/{result_id}"


INSIDE = """sel => [...document.querySelectorAll(sel)].filter(e => e.getClientRects().length)
  .map(e => { const r = e.getBoundingClientRect(), clip = e.closest('.table-scroll, .panel').getBoundingClientRect();
              return {text: e.textContent.trim().slice(0, 40), left: r.left, right: r.right, clipRight: clip.right}; })
  .filter(b => b.left < 0 || b.right > Math.min(window.innerWidth, b.clipRight) + 0.5)"""


@pytest.mark.slow
@pytest.mark.browser
def test_home_and_classify_many_fit_a_phone(chromium, live_server):
    from browser_support import assert_fits_a_phone

    server = live_server()
    page = chromium.new_context(viewport={"width": 375, "height": 800}).new_page()
    page.goto(server.url + "/")
    assert_fits_a_phone(page, "home", screenshot="home-375")
    assert page.locator("tr.empty a").count() >= 3
    assert page.evaluate(INSIDE, "tr.empty a") == []  # every dataset type readable, none under the table's edge
    page.click(".panel-head details.dropdown summary")
    assert page.evaluate(INSIDE, ".panel-head .dropdown-menu") == []
    assert_fits_a_phone(page, "home with the New dataset menu open", screenshot="home-375-menu")

    page.goto(server.url + _classify_many(server.jobs_dir))
    page.wait_for_selector("#results-layout")
    for layout in ("table", "cards"):
        page.select_option("#results-layout", layout)
        assert_fits_a_phone(page, f"Classify Many ({layout})", screenshot=f"classify-many-375-{layout}")
