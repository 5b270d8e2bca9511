"""image-processing: feature and target folders matched by name → float32 [0, 1] image targets."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import FormValidationError
from digits_core.interfaces.records import RecordError, pack_record, unpack_record


def test_image_label_kind_round_trips_and_needs_finite_floats():
    target = np.random.default_rng(0).random((5, 4, 3)).astype(np.float32)
    record, meta, _ = pack_record(np.zeros((5, 4, 1), np.uint8), target, "image")  # the plugin's label_kind
    assert meta.label_shape == (5, 4, 3)
    np.testing.assert_array_equal(unpack_record(record)[1], target)
    with pytest.raises(RecordError, match="NaN"):
        pack_record(np.zeros((5, 4, 1), np.uint8), np.full((5, 4, 1), np.nan, np.float32), "image")


def test_pairs_matched_converted_and_resized_alike(tmp_path, images):
    rng = np.random.default_rng(1)
    sources = {}
    for i in range(6):
        clean = rng.integers(0, 256, (10, 8, 3), dtype=np.uint8)
        sources[f"{i}"] = clean
        images.save(tmp_path / "clean" / f"{i}.png", clean)
        images.save(tmp_path / "noisy" / f"{i}.jpg", 255 - clean, "JPEG")
    images.save(tmp_path / "noisy" / "orphan.png", images.rgb(10, 8, 9))
    job = create_dataset(
        "image-processing",
        {
            "feature_folder": str(tmp_path / "noisy"),
            "label_folder": str(tmp_path / "clean"),
            "image_type": "grayscale",
            "width": 4,
            "height": 5,
            "val_percent": 0,
            "shuffle": False,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.label_kind == "image" and ds.feature_shape("train") == (5, 4, 1) and ds.label_shape == (5, 4, 1)
        assert ds.count("train") == 6 and ds.userdata["unmatched_images"]["count"] == 1
        features, targets = ds.read_all("train")
    for i, target in enumerate(targets):  # the target is the clean image, gray and squashed like its feature
        gray = Image.fromarray(sources[str(i)]).convert("L").resize((4, 5), Image.BILINEAR)
        np.testing.assert_allclose(target[:, :, 0] * 255, np.asarray(gray), atol=1.5)
    # features are the inverted images: feature + target ~ 255 everywhere (JPEG and resize tolerance)
    assert np.abs(features[:, :, :, 0].astype(float) + targets[:, :, :, 0] * 255 - 255).mean() < 6


def test_sixteen_bit_targets_scale_by_65535_and_val_folders_come_in_pairs(tmp_path, images):
    for folder in ("f", "t", "vf", "vt"):
        for i in range(2):
            images.save(tmp_path / folder / f"{i}.png", np.full((4, 4), 65535 // (i + 1), np.uint16))
    with pytest.raises(FormValidationError, match="val_label_folder"):
        create_dataset(
            "image-processing",
            {
                "feature_folder": str(tmp_path / "f"),
                "label_folder": str(tmp_path / "t"),
                "val_feature_folder": str(tmp_path / "vf"),
            },
            jobs_dir=tmp_path / "jobs",
        )
    job = create_dataset(
        "image-processing",
        {
            "feature_folder": str(tmp_path / "f"),
            "label_folder": str(tmp_path / "t"),
            "val_feature_folder": str(tmp_path / "vf"),
            "val_label_folder": str(tmp_path / "vt"),
            "image_type": "grayscale",
            "width": 4,
            "height": 4,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.count("val") == 2 and ds.feature_dtype("train") == "uint16"
        assert sorted(np.unique(ds.read_all("val")[1]).round(4).tolist()) == [0.5, 1.0]


def test_explore_shows_targets_beside_inputs_in_the_cli_sheet_and_the_web(tmp_path, images):
    from digits_core.datasets.explore import contact_sheet
    from digits_core.web import create_app

    for i in range(3):
        images.save(tmp_path / "f" / f"{i}.png", images.rgb(6, 6, i))
        images.save(tmp_path / "t" / f"{i}.png", np.full((6, 6, 3), 255, np.uint8))
    job = create_dataset(
        "image-processing",
        {
            "feature_folder": str(tmp_path / "f"),
            "label_folder": str(tmp_path / "t"),
            "width": 6,
            "height": 6,
            "val_percent": 0,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        sheet = np.asarray(contact_sheet(ds, "train", n=3, thumb=12, columns=3))
    assert (sheet[4:16, 16:28] == 255).all()  # the white target, right of the input
    client = create_app(tmp_path / "jobs", start_scheduler=False, testing=True).test_client()
    page = client.get(f"/datasets/{job.id}/explore?format=json").get_json()
    assert len(page["items"]) == 3 and all(item["mask"].startswith("data:image/png") for item in page["items"])
