"""The `volume` view in headless Chromium: scrolling changes the slice, the overlay matches the label."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def page_file(tmp_path):
    from digits_core import Volume, registry
    from digits_core.templating import render_plugin_template

    label = np.zeros((10, 20, 30), np.uint8)
    zz, yy, xx = np.meshgrid(np.arange(10), np.arange(20), np.arange(30), indexing="ij")
    label[((zz - 5) / 3.5) ** 2 + ((yy - 9) / 6) ** 2 + ((xx - 12) / 8) ** 2 <= 1] = 1  # size changes per slice
    image = (label * 200 + 20).astype(np.float32)[..., None]
    view = registry.get_view("volume")(
        {"class_labels": ["background", "atrium"], "color_palette": [[0, 0, 0], [255, 0, 0]]}
    )
    data = view.process_data("case-1", Volume(image, (2.0, 1.0, 1.0), np.eye(4), "case-1"), label, ground_truth=label)
    assert data["volumes_ml"]["atrium"] == pytest.approx(label.sum() * 2.0 / 1000)
    assert data["scores"]["dice"] == 1.0 and data["scores"]["per_class"][0]["hd95_mm"] == 0.0
    source, context = view.get_view_template(data)
    html = tmp_path / "volume.html"
    html.write_text("<!doctype html><html><body>" + render_plugin_template(source, context) + "</body></html>")
    return html, label


def _state(page):
    return page.eval_on_selector(
        ".volume-view", "e => [e.dataset.plane, Number(e.dataset.slice), Number(e.dataset.overlayVoxels)]"
    )


def test_scrolling_changes_the_slice_and_the_overlay_matches_the_label(chromium, page_file):
    html, label = page_file
    page = chromium.new_page(viewport={"width": 390, "height": 844})  # a phone's screen
    try:
        page.goto(html.as_uri())
        page.wait_for_function("document.querySelector('.volume-view').dataset.ready === '1'")
        assert _state(page) == ["axial", 5, int(label[5].sum())]
        page.focus(".volume-canvas")
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowUp")
        assert _state(page) == ["axial", 7, int(label[7].sum())]
        assert label[7].sum() != label[5].sum()
        page.keyboard.press("PageDown")
        assert _state(page) == ["axial", 2, int(label[2].sum())]
        page.fill(".volume-slider", "8")
        page.dispatch_event(".volume-slider", "input")
        assert _state(page) == ["axial", 8, int(label[8].sum())]
        # a labelled voxel is tinted red, an unlabelled one stays gray (axial slice 8, row 9)
        inside, outside = page.eval_on_selector(
            ".volume-canvas",
            """c => {
            const g = c.getContext('2d');
            return [Array.from(g.getImageData(12, 9, 1, 1).data), Array.from(g.getImageData(28, 1, 1, 1).data)];
        }""",
        )
        assert label[8, 9, 12] == 1 and label[8, 1, 28] == 0
        assert inside[0] > inside[1] + 50 and outside[0] == outside[1] == outside[2]
        page.select_option(".volume-plane", "coronal")
        assert _state(page) == ["coronal", 10, int(label[:, 10, :].sum())]
        page.select_option(".volume-plane", "sagittal")
        assert _state(page) == ["sagittal", 15, int(label[:, :, 15].sum())]
        assert page.eval_on_selector(".volume-canvas", "c => [c.width, c.height]") == [20, 10]
    finally:
        page.close()


def test_explore_scrolls_the_cases_of_a_volume_dataset_on_a_real_server(chromium, tmp_path):
    from live_server import running_server

    from digits_core.datasets import create_dataset
    from digits_core.datasets.volumes import VolumeStageReader
    from digits_data_volumes.synth import generate

    synth = generate(tmp_path / "synth", cases=5, shape=(8, 16, 16), dicom=False)
    job = create_dataset(
        "msd-volumes", {"data_folder": str(synth.task), "pct_val": 40}, jobs_dir=tmp_path / "jobs", workers=1
    )
    reader = VolumeStageReader(job.path / "dataset" / "val")
    first_volume, first_label = reader.case(0)
    reader.close()
    with running_server(tmp_path / "jobs") as server:
        page = chromium.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
        try:
            page.goto(server.url + f"/datasets/{job.id}/explore?stage=val")
            page.wait_for_function("document.querySelectorAll('.volume-view[data-ready=\"1\"]').length === 2")
            first = page.locator(".volume-view").first
            assert first.get_attribute("data-case") == first_volume.name
            assert first.get_attribute("data-slice") == "4"
            assert int(first.get_attribute("data-overlay-voxels")) == int(first_label[4].sum())
            first.locator(".volume-canvas").focus()
            page.keyboard.press("ArrowDown")
            assert first.get_attribute("data-slice") == "3"
            assert int(first.get_attribute("data-overlay-voxels")) == int(first_label[3].sum())
            assert errors == []  # the view's script runs under the server's CSP (nonce)
        finally:
            page.close()
