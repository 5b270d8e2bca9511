"""The image-output view and its PSNR/SSIM, checked against scikit-image (no TensorFlow)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from digits_core import registry
from digits_core.inference import render_html, report_json, run_view
from digits_view_generic.image_output import ImageOutputView
from digits_view_generic.metrics import psnr, ssim


def _decode(uri: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))))


@pytest.mark.parametrize("shape", [(24, 20, 3), (16, 16, 1), (32, 12)])
def test_psnr_ssim_match_scikit_image(shape):
    rng = np.random.default_rng(sum(shape))
    target = rng.random(shape)
    output = np.clip(target + rng.normal(0, 0.08, shape), 0, 1)
    assert psnr(output, target) == pytest.approx(peak_signal_noise_ratio(target, output, data_range=1.0))
    axis = 2 if len(shape) == 3 else None
    expected = structural_similarity(
        target, output, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0, channel_axis=axis
    )
    assert ssim(output, target) == pytest.approx(expected, rel=1e-9)
    assert ssim(target, target) == pytest.approx(1.0) and psnr(target, target) == float("inf")


def test_side_by_side_images_scores_and_summary():
    assert registry.get_view("image-output") is ImageOutputView
    rng = np.random.default_rng(0)
    target = rng.random((12, 12, 1)).astype(np.float32)
    output = target + 0.05  # slightly off, some values above 1
    feature = (target * 255).astype(np.uint8)
    view = ImageOutputView({})
    processed = run_view(
        view, [("a.png", feature, output, target), ("b.png", feature, target, target), ("c.png", feature, output, None)]
    )
    a, b, c = (p.data for p in processed)
    clipped = np.clip(output, 0, 1)
    assert a["psnr"] == pytest.approx(psnr(clipped, target)) and a["ssim"] == pytest.approx(ssim(clipped, target))
    assert b["psnr"] == "inf" and b["ssim"] == pytest.approx(1.0)
    assert c["target"] is None and c["psnr"] is None
    np.testing.assert_array_equal(_decode(a["output"]).reshape(12, 12), np.round(clipped[:, :, 0] * 255))
    summary = view.summary()
    assert summary["labelled"] == 2 and summary["mean_psnr"] == pytest.approx(a["psnr"])  # exact output left out
    html = render_html(view, processed, title="t")
    assert html.count('class="dvg-sample"') == 3 and html.count('class="dvg-target"') == 2
    assert "dvg-mean-ssim" in html and ">inf<" in html
    json.dumps(report_json(view, processed), allow_nan=False)  # valid JSON: no Infinity
