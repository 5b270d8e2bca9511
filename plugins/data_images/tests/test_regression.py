"""image-regression: targets files (CSV / JSON lines) and datasets of float32 target vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import DigitsError, FormValidationError
from digits_data_images.targets import read_targets


def write_images(folder, n, images, size=(12, 10)):
    for i in range(n):
        images.save(folder / f"img{i:02d}.png", images.rgb(size[0], size[1], i))


def test_csv_header_names_targets_and_paths_start_at_root(tmp_path):
    (tmp_path / "t.csv").write_text("path,x, y\n# a comment\na.png,1.5,-2\n\nsub/b.png,3,4e-1\n")
    names, rows = read_targets(str(tmp_path / "t.csv"), "/data")
    assert names == ["x", "y"]
    assert rows == [("/data/a.png", (1.5, -2.0)), ("/data/sub/b.png", (3.0, 0.4))]


def test_jsonl_named_keys_and_targets_list(tmp_path):
    (tmp_path / "t.jsonl").write_text(
        json.dumps({"path": "a.png", "age": 3, "w": 1.0})
        + "\n"
        + json.dumps({"path": "b.png", "age": 5, "w": 2})
        + "\n"
    )
    names, rows = read_targets(str(tmp_path / "t.jsonl"))
    assert names == ["age", "w"] and rows[1] == (str(tmp_path / "b.png"), (5.0, 2.0))
    (tmp_path / "u.jsonl").write_text('{"path": "a.png", "targets": [1, 2, 3]}\n')
    assert read_targets(str(tmp_path / "u.jsonl"))[0] == ["t1", "t2", "t3"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("file,x\na.png,1\n", "header row must be path"),
        ("path,x\na.png,one\n", ":2: 'one' is not a number"),
        ("path,x,y\na.png,1\n", ":2: 2 columns, the header has 3"),
        ("path,x\na.png,nan\n", "finite"),
        ("path,x\n", "lists no images"),
        ("path,x,x\na.png,1,2\n", "repeat"),
    ],
)
def test_bad_csv_names_file_and_line(tmp_path, text, message):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_targets(str(tmp_path / "t.csv"))
    assert "t.csv" in str(info.value)


def test_dataset_float32_vectors_split_and_target_names(tmp_path, images):
    write_images(tmp_path / "imgs", 12, images)
    rows = ["path,cx,cy"] + [f"img{i:02d}.png,{i / 4},{-i}" for i in range(12)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    job = create_dataset(
        "image-regression",
        {
            "image_folder": str(tmp_path / "imgs"),
            "targets_file": str(tmp_path / "t.csv"),
            "width": 8,
            "height": 6,
            "val_percent": 25,
            "image_type": "grayscale",
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.label_kind == "regression" and ds.label_dtype == "float32" and ds.label_shape == (2,)
        assert ds.userdata["target_names"] == ["cx", "cy"]
        assert ds.count("train") == 9 and ds.count("val") == 3
        features, labels = ds.read_all("train")
        assert features.shape == (9, 6, 8, 1)
        # every label is the row of its image: cy = -4 * cx
        np.testing.assert_allclose(labels[:, 1], -4 * labels[:, 0])
        assert len({float(v) for v in labels[:, 1]}) == 9


def test_separate_validation_file_must_name_the_same_targets(tmp_path, images):
    write_images(tmp_path / "imgs", 4, images)
    (tmp_path / "t.csv").write_text("path,a\nimg00.png,1\nimg01.png,2\n")
    (tmp_path / "v.csv").write_text("path,b\nimg02.png,1\n")
    with pytest.raises(DigitsError, match="names the targets"):
        create_dataset(
            "image-regression",
            {
                "image_folder": str(tmp_path / "imgs"),
                "targets_file": str(tmp_path / "t.csv"),
                "val_targets_file": str(tmp_path / "v.csv"),
                "width": 4,
                "height": 4,
            },
            workers=1,
            jobs_dir=tmp_path / "jobs",
        )
    (tmp_path / "v.csv").write_text("path,a\nimg02.png,1\nimg03.png,7\n")
    job = create_dataset(
        "image-regression",
        {
            "image_folder": str(tmp_path / "imgs"),
            "targets_file": str(tmp_path / "t.csv"),
            "val_targets_file": str(tmp_path / "v.csv"),
            "width": 4,
            "height": 4,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    with open_dataset(job.path) as ds:
        assert ds.count("train") == 2 and sorted(ds.read_all("val")[1][:, 0].tolist()) == [1.0, 7.0]


def test_form_requires_the_targets_file(tmp_path):
    with pytest.raises(FormValidationError, match="targets_file"):
        create_dataset("image-regression", {"image_folder": str(tmp_path)}, jobs_dir=tmp_path / "jobs")


def test_inference_folder_and_targets_file_count_each_image_once(tmp_path, images):
    """What a user fills in: the image folder and the targets file of the same images (issue 27)."""
    from digits_data_images.regression import ImageRegressionIngestion

    folder = tmp_path / "imgs"
    folder.mkdir()
    write_images(folder, 3, images)
    (tmp_path / "other.png").write_bytes((folder / "img00.png").read_bytes())
    (tmp_path / "t.csv").write_text("path,x\nimgs/img00.png,1\nimgs/img02.png,3\nother.png,9\n")
    plugin = ImageRegressionIngestion(
        is_inference_db=True, image_folder=str(folder), targets_file=str(tmp_path / "t.csv")
    )
    entries = sorted((str(e), e.label) for e in plugin.itemize_entries("test"))
    assert entries == sorted(
        [
            (str(folder / "img00.png"), (1.0,)),
            (str(folder / "img01.png"), None),
            (str(folder / "img02.png"), (3.0,)),
            (str(tmp_path / "other.png"), (9.0,)),
        ]
    )
