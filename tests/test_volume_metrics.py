"""Volume metrics, patch sampling and sliding-window blending (numpy and scipy only; no TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from digits_core.volumes.metrics import case_metrics, dice_per_class, hd95, summarize
from digits_core.volumes.sliding import gaussian_weights, sliding_window, tile_starts


def _reference_hd95(a: np.ndarray, b: np.ndarray, spacing) -> float:
    """HD95 from Euclidean distance transforms (an independent way to the same definition)."""
    footprint = ndimage.generate_binary_structure(3, 1)
    sa = a & ~ndimage.binary_erosion(a, footprint)
    sb = b & ~ndimage.binary_erosion(b, footprint)
    to_b = ndimage.distance_transform_edt(~sb, sampling=spacing)[sa]
    to_a = ndimage.distance_transform_edt(~sa, sampling=spacing)[sb]
    return max(np.percentile(to_b, 95), np.percentile(to_a, 95))


def _ball(shape, centre, radius, spacing):
    grid = np.meshgrid(*(np.arange(n) * s for n, s in zip(shape, spacing)), indexing="ij")
    return sum((g - c) ** 2 for g, c in zip(grid, centre)) <= radius**2


@pytest.mark.parametrize("spacing", [(1.0, 1.0, 1.0), (3.0, 0.8, 0.8), (2.5, 1.25, 0.7)])
def test_hd95_in_mm_matches_a_distance_transform_reference(spacing):
    shape = (20, 40, 40)
    a = _ball(shape, (25.0, 16.0, 16.0), 9.0, spacing)
    b = _ball(shape, (28.0, 18.5, 15.0), 7.5, spacing)
    b[12:14, 5:9, 5:9] = True  # a stray island far away dominates the tail
    assert hd95(a, b, spacing) == pytest.approx(_reference_hd95(a, b, spacing), rel=1e-9)
    assert hd95(a, a, spacing) == 0.0


def test_hd95_honours_spacing_and_empty_masks():
    a = np.zeros((10, 10, 10), bool)
    a[2:4, 2:4, 2:4] = True
    b = np.roll(a, 3, axis=0)  # 3 voxels along D
    assert hd95(a, b, (2.0, 1.0, 1.0)) == pytest.approx(6.0)
    assert hd95(a, b, (1.0, 1.0, 1.0)) == pytest.approx(3.0)
    assert hd95(a, np.zeros_like(a), (1, 1, 1)) == float("inf")
    assert hd95(np.zeros_like(a), np.zeros_like(a), (1, 1, 1)) == 0.0


def test_dice_is_per_case_per_class_and_the_summary_averages_cases():
    truth = np.zeros((4, 4, 4), np.uint8)
    truth[0, :2, :2] = 1  # 4 voxels
    truth[3] = 2  # 16 voxels
    pred = truth.copy()
    pred[0, 0, 0] = 0  # class 1: 3 of 4 found
    assert dice_per_class(pred, truth, 3) == pytest.approx([6 / 7, 1.0])
    assert dice_per_class(np.zeros_like(truth), np.zeros_like(truth), 2) == [1.0]
    big = case_metrics(pred, truth, 3, (1, 1, 1))
    empty = case_metrics(np.zeros_like(truth), truth, 3, (1, 1, 1))
    summary = summarize([big, empty])
    assert summary["val_dice"] == pytest.approx(((6 / 7 + 1) / 2 + 0.0) / 2)  # mean of case means, not voxels
    assert summary["val_dice_class2"] == pytest.approx(0.5)


def test_tiles_cover_the_volume_and_overlap():
    assert tile_starts(32, 24, 0.5) == [0, 8]
    assert tile_starts(50, 16, 0.5) == [0, 8, 16, 24, 32, 34]
    assert tile_starts(10, 16, 0.5) == [0]
    weights = gaussian_weights((8, 16, 16))
    assert weights.max() == 1.0 and weights.min() > 0
    assert weights[4, 8, 8] > weights[0, 8, 8] > weights[0, 0, 0]


def test_sliding_window_blends_tiles_into_the_exact_voxelwise_answer():
    rng = np.random.default_rng(0)
    volume = rng.normal(size=(13, 37, 29, 1)).astype(np.float32)
    calls = []

    def predict(tiles):  # a per-voxel "network": blending must reproduce it exactly, wherever tiles overlap
        calls.append(len(tiles))
        p = 1 / (1 + np.exp(-tiles[..., 0]))
        return np.stack([1 - p, p], axis=-1)

    probs = sliding_window(volume, (8, 16, 16), predict, 2, overlap=0.5)
    expected = 1 / (1 + np.exp(-volume[..., 0]))
    assert probs.shape == (13, 37, 29, 2)
    assert np.allclose(probs[..., 1], expected, atol=1e-5)
    assert sum(calls) == len(tile_starts(13, 8, 0.5)) * len(tile_starts(37, 16, 0.5)) * len(tile_starts(29, 16, 0.5))
    small = sliding_window(volume[:4, :5, :6], (8, 16, 16), predict, 2)  # padded up to the patch, cropped back
    assert small.shape == (4, 5, 6, 2) and np.allclose(small[..., 1], expected[:4, :5, :6], atol=1e-5)


def test_patch_sampler_oversamples_foreground_and_augments_label_with_image(tmp_path):
    from digits_core.datasets.volumes import Volume, VolumeStageReader, VolumeStageWriter, check_volume_pair
    from digits_core.volumes.patches import PatchSampler, augment

    label = np.zeros((16, 32, 32), np.uint8)
    label[2:4, 3:6, 20:24] = 1  # a tiny structure: 24 of 16384 voxels
    image = (label * 100).astype(np.float32)[..., None]
    writer = VolumeStageWriter(tmp_path / "train")
    writer.append(*check_volume_pair(Volume(image, (1, 1, 1), np.eye(4), "c"), label))
    writer.close()
    reader = VolumeStageReader(tmp_path / "train")
    sampler = PatchSampler(reader, 1, (8, 8, 8), foreground=0.5, seed=0)
    hits = sum(int(sampler.sample(0)[1].any()) for _ in range(200))
    assert 80 <= hits <= 140  # about half centred on it; uniform starts alone would rarely catch it
    uniform = PatchSampler(reader, 1, (8, 8, 8), foreground=0.0, seed=0)
    assert sum(int(uniform.sample(0)[1].any()) for _ in range(200)) < 60
    rng = np.random.default_rng(1)
    for _ in range(10):
        x, y = augment(*sampler.sample(0), rng)
        assert np.array_equal(x[..., 0] > 50, y == 1)  # image and label moved together
    reader.close()


def test_small_scaling_zooms_image_and_label_together_about_the_centre():
    from digits_core.volumes.patches import rescale

    label = np.zeros((16, 16, 16), np.uint8)
    label[4:12, 4:12, 4:12] = 1  # 8 voxels wide, centred
    image = (label * 100).astype(np.float32)[..., None]
    big_image, big_label = rescale(image, label, 1.25)
    assert big_label.shape == label.shape and big_image.shape == image.shape
    assert big_label[:, 8, 8].sum() == 10  # 8 voxels × 1.25, still centred
    assert big_label[3, 8, 8] == 1 and big_label[2, 8, 8] == 0 and big_label[12, 8, 8] == 1
    assert np.mean((big_image[..., 0] > 50) == (big_label == 1)) > 0.99
    small_label = rescale(image, label, 0.75)[1]
    assert small_label[:, 8, 8].sum() == 6
