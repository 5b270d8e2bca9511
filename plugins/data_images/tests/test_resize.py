"""DIGITS resize modes and channel conversion on small known images."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_data_images.resize import image_to_array, resize_image


def gradient(w: int, h: int, channels: int = 3) -> np.ndarray:
    """An image whose every pixel is distinct: value = 10*x + y (+ 100 per channel)."""
    y, x = np.mgrid[0:h, 0:w]
    planes = [(10 * x + y + 50 * c) % 256 for c in range(channels)]
    return np.stack(planes, axis=2).astype(np.uint8)


def pil_bilinear(arr: np.ndarray, w: int, h: int) -> np.ndarray:
    return np.asarray(Image.fromarray(arr).resize((w, h), Image.BILINEAR))


def test_same_size_is_untouched_and_equal_ratios_are_a_plain_resize():
    src = gradient(8, 4)
    for mode in ("squash", "crop", "fill", "half_crop"):
        assert resize_image(src, 4, 8, mode) is src or np.array_equal(resize_image(src, 4, 8, mode), src)
        assert np.array_equal(resize_image(src, 2, 4, mode), pil_bilinear(src, 4, 2))


def test_squash_ignores_the_aspect_ratio():
    src = gradient(8, 4)
    out = resize_image(src, 4, 4, "squash")
    assert out.shape == (4, 4, 3) and np.array_equal(out, pil_bilinear(src, 4, 4))


def test_crop_scales_the_shorter_side_and_centre_crops_the_longer():
    wide = gradient(8, 4)  # wr = 2 > hr = 1: height fits, 8 columns -> crop 2..6
    assert np.array_equal(resize_image(wide, 4, 4, "crop"), wide[:, 2:6])
    tall = gradient(4, 8)
    assert np.array_equal(resize_image(tall, 4, 4, "crop"), tall[2:6, :])
    big = gradient(16, 8)  # scale by hr = 2 to 8x4, then crop columns 2..6
    assert np.array_equal(resize_image(big, 4, 4, "crop"), pil_bilinear(big, 8, 4)[:, 2:6])


def test_fill_scales_the_longer_side_and_pads_with_seeded_noise():
    src = gradient(8, 4)  # wr = 2: resize to 4x2, one noise row above and below
    a = resize_image(src, 4, 4, "fill", rng=np.random.default_rng(7))
    b = resize_image(src, 4, 4, "fill", rng=np.random.default_rng(7))
    c = resize_image(src, 4, 4, "fill", rng=np.random.default_rng(8))
    assert a.shape == (4, 4, 3) and a.dtype == np.uint8
    assert np.array_equal(a[1:3], pil_bilinear(src, 4, 2))
    assert np.array_equal(a, b) and not np.array_equal(a[0], c[0])
    tall = gradient(4, 8)
    out = resize_image(tall, 4, 4, "fill")
    assert np.array_equal(out[:, 1:3], pil_bilinear(tall, 2, 4))


def test_fill_bumps_the_short_side_so_padding_splits_evenly():
    src = gradient(8, 6)  # wr = 2, hr = 1.5: height 3 -> 4 (odd padding), so no noise at all
    assert np.array_equal(resize_image(src, 4, 4, "fill"), pil_bilinear(src, 4, 4))


def test_half_crop_uses_the_average_ratio_then_crops_and_fills():
    src = gradient(12, 4)  # wr = 3, hr = 1, ratio 2 -> 6x2; crop columns 1..5; pad one row each side
    out = resize_image(src, 4, 4, "half_crop", rng=np.random.default_rng(0))
    assert out.shape == (4, 4, 3)
    assert np.array_equal(out[1:3], pil_bilinear(src, 6, 2)[:, 1:5])


def test_sixteen_bit_and_labels_keep_their_values():
    src = (np.arange(32, dtype=np.uint16).reshape(4, 8) * 2000)[:, :, None]
    cropped = resize_image(src, 4, 4, "crop")
    assert cropped.dtype == np.uint16 and np.array_equal(cropped, src[:, 2:6])
    squashed = resize_image(src, 2, 4, "squash")
    assert squashed.dtype == np.uint16 and squashed.max() > 255
    filled = resize_image(src, 8, 8, "fill", rng=np.random.default_rng(1))
    assert filled.dtype == np.uint16 and filled[:2].max() > 255  # noise spans the 16-bit range
    mask = (np.arange(32).reshape(4, 8) % 3).astype(np.uint8)[:, :, None]
    out = resize_image(mask, 6, 6, "fill", is_label=True)
    assert set(np.unique(out)) <= {0, 1, 2} and out[0].max() == 0  # nearest neighbour, zero padding


def test_channel_conversion_uses_digits_weights():
    rgb = Image.fromarray(np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [10, 20, 30]]], np.uint8))
    gray = image_to_array(rgb, 1)
    assert gray.shape == (1, 4, 1)
    assert gray[0, :, 0].tolist() == [
        round(0.299 * 255),
        round(0.587 * 255),
        round(0.114 * 255),
        round(0.299 * 10 + 0.587 * 20 + 0.114 * 30),
    ]
    back = image_to_array(Image.fromarray(gray[:, :, 0]), 3)
    assert back.shape == (1, 4, 3) and (back == gray).all()
    rgba = Image.fromarray(np.array([[[0, 0, 0, 0], [0, 0, 0, 255]]], np.uint8), mode="RGBA")
    assert image_to_array(rgba, 3)[0].tolist() == [[255, 255, 255], [0, 0, 0]]  # transparent -> white


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown resize mode"):
        resize_image(gradient(4, 2), 2, 2, "stretch")
