"""The review page in headless Chromium on a real ``digits serve`` (issue 46 item 3).

A reviewer draws a brush stroke with the mouse over a proposal, undoes and redoes it, fills the proposal's region
with another class and accepts with the keyboard; the label stored in the pool folder has the stroke and the fill
pixel for pixel, and the next candidate is shown without a page reload. On a volume the reviewer pages to the next
slice and draws there: the stored volume has the stroke on that slice only. axe-core finds no serious or critical
problem on the page.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

H, W = 40, 60


@pytest.fixture
def pool(tmp_path):
    from PIL import Image

    from digits_core.labeling import create_pool
    from digits_core.labeling.masks import encode_mask

    data = tmp_path / "unlabelled"
    data.mkdir()
    rng = np.random.default_rng(0)
    for name in ("a.png", "b.png"):
        Image.fromarray(rng.integers(0, 255, (H, W), dtype=np.uint8), mode="L").save(data / name)
    pool = create_pool(
        "hearts",
        {"kind": "folder", "root": str(data)},
        [{"path": "a.png"}, {"path": "b.png"}],
        class_labels=["background", "lv", "myo"],
        jobs_dir=tmp_path / "jobs",
    )
    proposal = np.zeros((H, W), np.uint8)
    proposal[5:10, 6:12] = 1
    for score, cand in zip((0.9, 0.1), pool.candidates()):
        (pool.path / "proposals" / f"{cand['id']}.png").write_bytes(encode_mask(proposal))
        pool.record_proposal(cand["id"], {"file": f"proposals/{cand['id']}.png", "model_id": "m1"})
        pool.record_scores({cand["id"]: score}, "entropy")
    return pool, proposal


def _volume_pool(tmp_path):
    """A 3-D folder pool: one 5-slice volume (.npy) with a proposal on its middle slice."""
    from digits_core.labeling import create_pool
    from digits_core.labeling.masks import encode_mask

    data = tmp_path / "volumes"
    data.mkdir()
    np.save(data / "case.npy", np.random.default_rng(1).normal(size=(5, H, W)).astype(np.float32))
    pool = create_pool(
        "volumes",
        {"kind": "folder", "root": str(data)},
        [{"path": "case.npy"}],
        dimensions=3,
        class_labels=["background", "lv"],
        jobs_dir=tmp_path / "jobs",
    )
    (cand,) = pool.candidates()
    proposal = np.zeros((5, H, W), np.uint8)
    proposal[2, 12:20, 20:30] = 1
    (pool.path / "proposals" / f"{cand['id']}.npy").write_bytes(encode_mask(proposal))
    pool.record_proposal(cand["id"], {"file": f"proposals/{cand['id']}.npy", "model_id": "m1"})
    return pool, proposal


def _labelled(page) -> int:
    return int(page.get_attribute("#review", "data-labelled"))


def test_brush_strokes_through_the_page_are_stored_and_the_next_candidate_comes_without_reload(
    chromium, pool, tmp_path
):
    from axe_support import axe_violations
    from browser_support import assert_fits_a_phone
    from live_server import running_server

    from digits_core.labeling.masks import read_mask

    pool, proposal = pool
    first, second = sorted(pool.candidates(), key=lambda c: -c["score"])
    volumes, volume_proposal = _volume_pool(tmp_path)
    with running_server(tmp_path / "jobs") as server:
        page = chromium.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            page.goto(server.url + f"/pools/{pool.id}/review")
            page.locator('#review[data-ready="1"]').wait_for(timeout=15_000)
            assert page.get_attribute("#review", "data-candidate") == first["id"]
            assert _labelled(page) == int(proposal.sum())
            assert axe_violations(page, "review") == []
            assert_fits_a_phone(page, "the review page")
            page.evaluate("window.notReloaded = true")

            page.keyboard.press("2")  # class myo
            page.keyboard.press("[")
            page.keyboard.press("[")  # brush 5 -> 3 px
            box = page.locator("#review-canvas").bounding_box()

            def at(x, y):
                return box["x"] + (x + 0.5) * box["width"] / W, box["y"] + (y + 0.5) * box["height"] / H

            page.mouse.move(*at(10, 30))
            page.mouse.down()
            for x in range(12, 52, 4):
                page.mouse.move(*at(x, 30))
            page.mouse.up()
            drawn = _labelled(page)
            assert drawn > int(proposal.sum()) + 40
            page.keyboard.press("Control+z")
            assert _labelled(page) == int(proposal.sum())
            page.keyboard.press("Control+y")
            assert _labelled(page) == drawn
            page.keyboard.press("f")  # fill the proposal's region (class lv) with class myo
            page.mouse.click(*at(8, 7))
            assert _labelled(page) == drawn  # same pixels, another class

            page.keyboard.press("a")  # accept: stores the corrected label, then shows the next candidate
            page.locator(f'#review[data-candidate="{second["id"]}"][data-ready="1"]').wait_for(timeout=15_000)
            assert page.evaluate("window.notReloaded") is True
            assert page.get_attribute("#review", "data-saved") == f"{first['id']}:accept:1"

            # a volume: the middle slice first, PageUp to the next one, a stroke there
            (case,) = volumes.candidates()
            page.goto(server.url + f"/pools/{volumes.id}/review")
            page.locator(f'#review[data-candidate="{case["id"]}"][data-ready="1"]').wait_for(timeout=15_000)
            assert page.get_attribute("#review", "data-slice") == "2"
            assert _labelled(page) == int(volume_proposal[2].sum())
            page.keyboard.press("PageUp")
            assert page.get_attribute("#review", "data-slice") == "3" and _labelled(page) == 0
            box = page.locator("#review-canvas").bounding_box()
            for _ in range(4):
                page.keyboard.press("[")  # brush 5 -> 1 px
            page.mouse.move(*at(5, 10))
            page.mouse.down()
            page.mouse.move(*at(20, 10))
            page.mouse.up()
            assert _labelled(page) == 16
            page.keyboard.press("a")
            page.locator(f'#review[data-saved="{case["id"]}:accept:1"]').wait_for(timeout=15_000)
            assert errors == []
        finally:
            page.close()
    stored_volume = read_mask(volumes.label_file(case["id"], 1))
    assert stored_volume.shape == volume_proposal.shape
    assert (stored_volume[3, 10, 5:21] == 1).all() and int(stored_volume[3].sum()) == 16
    assert (np.delete(stored_volume, 3, axis=0) == np.delete(volume_proposal, 3, axis=0)).all()
    stored = read_mask(pool.label_file(first["id"], 1))
    assert (stored[30, 10:49] == 2).all() and (stored[29, 10:49] == 2).all() and (stored[31, 10:49] == 2).all()
    assert (stored[5:10, 6:12] == 2).all() and not (stored == 1).any()  # the proposal's region, filled
    assert int(np.count_nonzero(stored)) == drawn
    assert (stored[:28] == proposal[:28] * 2).all() and (stored[33:] == 0).all()
    cand = pool.candidate(first["id"])
    assert cand["state"] == "accepted" and cand["labels"][-1]["by"] == "local"
