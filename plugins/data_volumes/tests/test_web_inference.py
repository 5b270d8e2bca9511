"""*Test a volume* on a real ``digits serve`` in headless Chromium, with the session's trained ``unet3d``.

The model page's form sends a NIfTI file and its label by server path, then uploads both; the stored
result page shows the ``volume`` view (the slider and keys change the slice, the overlay is the
predicted label) with Dice and HD95, and its NIfTI download carries the source's affine. A path
outside the data roots, a 2-D picture and a label of another shape are refused on their fields.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))  # the suite's browser and server helpers
import browser_support  # noqa: E402

chromium = browser_support.chromium  # the suite's fixture: one headless Chromium per module

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _submit(page, server_path: str, label_path: str = "") -> None:
    page.check('input[name=input_mode][value="path"]')
    page.fill("#infer-path", server_path)
    page.fill("#infer-label-path", label_path)
    with page.expect_navigation():
        page.click("#infer-button")


def _state(page) -> tuple[int, int]:
    return tuple(
        page.eval_on_selector(".volume-view", "e => [Number(e.dataset.slice), Number(e.dataset.overlayVoxels)]")
    )


def test_test_a_volume_shows_the_view_and_downloads_nifti_with_the_source_affine(chromium, trained, synth, tmp_path):
    import nibabel as nib
    from live_server import running_server
    from PIL import Image

    jobs, _, model = trained
    source = synth.task / "imagesTr" / "heart_001.nii.gz"  # stored with a mirrored i axis
    truth = synth.task / "labelsTr" / "heart_001.nii.gz"
    picture = tmp_path / "slice.png"
    Image.fromarray(np.zeros((24, 24), np.uint8)).save(picture)
    wrong = tmp_path / "wrong_label.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((5, 6, 7), np.uint8), np.eye(4)), str(wrong))
    with running_server(jobs, extra_args=["--data-root", str(synth.root), "--data-root", str(tmp_path)]) as server:
        page = chromium.new_page(viewport={"width": 390, "height": 844})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            page.goto(server.url + f"/models/{model.name}")
            assert page.inner_text("#volume-input legend") == "Test a volume"
            browser_support.assert_fits_a_phone(page, "a volume model's page")
            _submit(page, "/etc/hostname")  # outside the data roots: refused before the worker sees it
            assert "is outside the server's data roots" in page.inner_text("#infer-path + .field-error")
            _submit(page, str(picture))  # a 2-D picture: refused on the path field, the value kept
            assert "is a 2-D image; a volume network needs a 3-D volume" in page.inner_text(
                "#infer-path + .field-error"
            )
            assert page.input_value("#infer-path") == str(picture)
            _submit(page, str(source), str(wrong))  # a label of another shape: refused on the label field
            assert "differs from the shape" in page.inner_text("#infer-label-path + .field-error")

            _submit(page, str(source), str(truth))
            assert "/inference/" in page.url
            page.wait_for_function("document.querySelector('.volume-view').dataset.ready === '1'")
            assert page.locator(".volume-scores td").first.inner_text() == "left atrium"  # Dice/HD95 per class
            data = json.loads(page.inner_text(".volume-data"))
            label = np.frombuffer(base64.b64decode(data["label"]), np.uint8).reshape(data["shape"])
            first = _state(page)
            assert first[1] == int(label[first[0]].sum())  # the overlay is the predicted label's slice
            page.focus(".volume-canvas")
            page.keyboard.press("ArrowDown")
            page.fill(".volume-slider", "1")
            page.dispatch_event(".volume-slider", "input")
            assert _state(page) == (1, int(label[1].sum())) and first[0] != 1
            assert errors == []  # the stored fragment's script runs under the server's CSP
            browser_support.assert_fits_a_phone(page, "a volume result page")

            href = page.get_attribute("#result-files a.result-file", "href")
            assert href.endswith("/files/heart_001_seg.nii.gz")
            (tmp_path / "seg.nii.gz").write_bytes(server.get(href).body)
            result, original = nib.load(str(tmp_path / "seg.nii.gz")), nib.load(str(source))
            assert np.array_equal(result.affine, original.affine) and result.shape == original.shape
            assert server.get(href.replace("heart_001_seg", "model")).status == 404  # only the listed files

            scores = page.inner_text(".volume-scores")
            page.goto(server.url + f"/models/{model.name}")  # uploads: image and label share a file name
            page.check('input[name=input_mode][value="upload"]')
            page.set_input_files("#infer-images", str(source))
            page.set_input_files("#infer-label-file", str(truth))
            with page.expect_navigation():
                page.click("#infer-button")
            page.wait_for_function("document.querySelector('.volume-view').dataset.ready === '1'")
            assert page.inner_text(".volume-scores") == scores  # the same case scored the same way
            assert "inputs heart_001.nii.gz" in page.inner_text("#result-facts")
        finally:
            page.close()
