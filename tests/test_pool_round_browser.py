"""The pool page's *Run a round* button in headless Chromium on a real ``digits serve`` (issue 46 item 4).

A tiny U-Net the engine trains and a folder pool of four PNGs: the reviewer picks the model and a strategy on the
pool page and clicks *Run a round*; the server's own scheduler runs the round (scoring in its worker), the page
follows the job's status without a reload and, when it ends, shows the round in the rounds table and the proposals
in the review queue. The page fits a phone.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core import registry

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SIZE = 32


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from synthetic_plugins import SyntheticLV, lv_image

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    root = tmp_path_factory.mktemp("pool-round")
    jobs = root / "jobs"
    registry.register(SyntheticLV)
    try:
        lv = create_dataset("synthetic-lv", {"count": 8, "val_count": 2, "size": SIZE}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticLV)
    model = train(lv.id, "unet", name="unet", epochs=1, batch_size=8, jobs_dir=jobs,
                  network_params={"filters": 4, "depth": 2, "dropout": 0.3})  # fmt: skip
    folder = root / "unlabelled"
    folder.mkdir()
    rng = np.random.default_rng(3)
    for i in range(4):
        Image.fromarray(lv_image(SIZE, rng)[0]).save(folder / f"case{i}.png")
    return jobs, model, folder


def test_run_a_round_button_shows_progress_then_the_round_in_the_table(chromium, trained):
    from browser_support import assert_fits_a_phone
    from live_server import running_server

    from digits_core.labeling import create_folder_pool

    jobs, model, folder = trained
    pool = create_folder_pool("hearts", folder, jobs_dir=jobs)
    with running_server(jobs) as server:
        page = chromium.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            page.goto(server.url + f"/pools/{pool.id}")
            assert page.locator("#pool-rounds-table").count() == 0
            page.select_option("#pool-run-form select[name=model]", model.id)
            page.select_option("#pool-run-form select[name=strategy]", "entropy")
            page.fill("#pool-run-form input[name=count]", "2")
            page.click("#pool-run-round")
            page.wait_for_url(f"**/pools/{pool.id}#pool-run")
            status = page.get_attribute("#pool-run-status", "data-status")
            assert status in ("Waiting", "Running", "Done")  # the job's status as the redirect found it
            if status != "Done":  # the page follows the job, then swaps the panels in without a reload
                assert page.locator("#pool-run-progress").count() == 1
                assert page.locator("#pool-run-round").is_disabled()
                page.evaluate("window.notReloaded = true")
                page.locator('body[data-pool-refreshed="1"]').wait_for(timeout=240_000)
                assert page.evaluate("window.notReloaded") is True
            assert page.get_attribute("#pool-run-status", "data-status") == "Done", server.describe()
            cells = page.locator("#pool-rounds-table tbody tr").first.locator("td").all_inner_texts()
            assert cells[:4] == ["1", "entropy", model.id, "2"]
            assert page.locator("#pool-queue-table tbody tr").count() == 2
            assert page.locator("#pool-run-round").is_enabled()
            assert_fits_a_phone(page, "the pool page")
            assert errors == []
        finally:
            page.close()
    (entry,) = pool.record()["rounds"]
    assert entry["strategy"] == "entropy" and entry["model_id"] == model.id and len(entry["proposed"]) == 2
    assert sum(c["state"] == "proposed" for c in pool.candidates()) == 2
