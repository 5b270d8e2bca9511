"""numpy-arrays: .npy/.npz features and labels, memory-mapped, every label kind; arrays from memory."""

from __future__ import annotations

import numpy as np
import pytest

from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import DigitsError
from digits_data_images.arrays import ArrayFileError, open_array
from digits_data_images.numpy_arrays import create_dataset_from_arrays


def test_npz_members_are_memory_mapped_at_their_offset(tmp_path):
    features = np.arange(2 * 3 * 4 * 1, dtype=np.uint16).reshape(2, 3, 4, 1)
    np.savez(tmp_path / "d.npz", features=features, labels=np.array([1.5, 2.5]))
    mapped = open_array(str(tmp_path / "d.npz"), "features")
    assert isinstance(mapped, np.memmap) and mapped.dtype == np.uint16
    np.testing.assert_array_equal(mapped, features)
    np.save(tmp_path / "f.npy", features)
    assert isinstance(open_array(str(tmp_path / "f.npy")), np.memmap)


def test_compressed_or_missing_members_are_refused_with_the_fix(tmp_path):
    np.savez_compressed(tmp_path / "c.npz", features=np.zeros((2, 2, 2)))
    with pytest.raises(ArrayFileError, match="savez_compressed.*numpy.savez"):
        open_array(str(tmp_path / "c.npz"), "features")
    with pytest.raises(ArrayFileError, match='no array "x".*features'):
        open_array(str(tmp_path / "c.npz"), "x")


def test_classification_from_npz_with_class_names(tmp_path):
    rng = np.random.default_rng(0)
    features = rng.integers(0, 256, (20, 6, 5, 3), dtype=np.uint8)
    labels = np.arange(20) % 3
    np.savez(tmp_path / "d.npz", features=features, labels=labels)
    (tmp_path / "names.txt").write_text("a\nb\nc\n")
    job = create_dataset(
        "numpy-arrays",
        {
            "features_file": str(tmp_path / "d.npz"),
            "val_percent": 25,
            "class_labels_file": str(tmp_path / "names.txt"),
            "encoding": "png",
        },
        workers=2,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.label_kind == "class" and ds.class_labels == ["a", "b", "c"]
        assert ds.count("train") == 15 and ds.count("val") == 5
        got, got_labels = ds.read_all("train")
        for feature, label in zip(got, got_labels):  # each record is one source row, bit for bit
            (row,) = [i for i in range(20) if np.array_equal(features[i], feature)]
            assert labels[row] == label


def test_masks_regression_and_dtype_casts_from_npy(tmp_path):
    features = np.linspace(0, 1, 8 * 4 * 4).reshape(8, 4, 4)  # float64, N×H×W
    masks = (np.arange(8 * 16).reshape(8, 4, 4) % 2).astype(np.uint8)
    np.save(tmp_path / "f.npy", features)
    np.save(tmp_path / "m.npy", masks)
    job = create_dataset(
        "numpy-arrays",
        {
            "features_file": str(tmp_path / "f.npy"),
            "labels_file": str(tmp_path / "m.npy"),
            "val_percent": 0,
            "shuffle": False,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.label_kind == "mask" and ds.feature_dtype("train") == "float32"
        got, got_masks = ds.read_all("train")
        np.testing.assert_array_equal(got[:, :, :, 0], features.astype(np.float32))
        np.testing.assert_array_equal(got_masks, masks)
    np.save(tmp_path / "r.npy", np.stack([np.arange(8.0), -np.arange(8.0)], axis=1))
    job = create_dataset(
        "numpy-arrays",
        {
            "features_file": str(tmp_path / "f.npy"),
            "labels_file": str(tmp_path / "r.npy"),
            "val_percent": 0,
            "shuffle": False,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.label_kind == "regression" and ds.label_shape == (2,)
        np.testing.assert_array_equal(ds.read_all("train")[1][:, 1], -np.arange(8.0, dtype=np.float32))


def test_bad_arrays_give_clear_errors(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros((4, 3, 3), np.uint8))
    np.save(tmp_path / "l.npy", np.zeros(3, np.int64))
    with pytest.raises(DigitsError, match="4 feature rows.*but 3 labels"):
        create_dataset(
            "numpy-arrays",
            {"features_file": str(tmp_path / "f.npy"), "labels_file": str(tmp_path / "l.npy")},
            workers=1,
            jobs_dir=tmp_path / "jobs",
        )
    with pytest.raises(DigitsError, match="give its labels file"):
        create_dataset(
            "numpy-arrays", {"features_file": str(tmp_path / "f.npy")}, workers=1, jobs_dir=tmp_path / "jobs"
        )


def test_in_memory_arrays_with_separate_validation(tmp_path):
    features = np.random.default_rng(1).random((10, 4, 4, 2)).astype(np.float32)
    job = create_dataset_from_arrays(
        features,
        np.arange(10) % 2,
        folder=tmp_path / "arrays",
        val_features=features[:3],
        val_labels=np.array([0, 1, 1]),
        jobs_dir=tmp_path / "jobs",
        workers=1,
        name="mem",
    )
    with open_dataset(job.path) as ds:
        assert ds.count("train") == 10 and ds.count("val") == 3
        assert ds.feature_shape("train") == (4, 4, 2)
        assert sorted(ds.read_all("val")[1].tolist()) == [0, 1, 1]
    assert job.name == "mem"
