"""image-multilabel: path,labels CSVs → multi-hot uint8 labels (label kind ``multilabel``), through the real
dataset-create path; rows that cannot be used are named by file and line in the errors report."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from digits_core.datasets import create_dataset, open_dataset
from digits_core.interfaces.records import RecordError, pack_record, unpack_record
from digits_core.paths import OutsideDataRootsError, confined_to
from digits_data_images.multilabel import read_labels_csv


def _images(folder, count=6):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(np.full((8, 10, 3), 20 * i, np.uint8)).save(folder / f"{i}.png")


def test_csv_rows_become_multi_hot_vectors_and_bad_rows_are_named(tmp_path):
    _images(tmp_path / "img")
    (tmp_path / "train.csv").write_text(
        "path,labels\n0.png,cat;dog\n1.png,dog\n2.png,\n3.png,cat;bird;dog\n"
        "4.png,cat,extra\n5.png,unicorn\n# a comment\n"
    )
    (tmp_path / "val.csv").write_text("5.png,bird\nmissing.png,cat\n")
    (tmp_path / "classes.txt").write_text("cat\ndog\nbird\n")
    job = create_dataset(
        "image-multilabel",
        {
            "labels_csv": str(tmp_path / "train.csv"),
            "val_labels_csv": str(tmp_path / "val.csv"),
            "image_folder": str(tmp_path / "img"),
            "class_labels_file": str(tmp_path / "classes.txt"),
            "width": 10,
            "height": 8,
            "shuffle": False,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
        max_errors=10,
    )
    ds = open_dataset(job.path)
    assert ds.label_kind == "multilabel" and ds.class_labels == ["cat", "dog", "bird"] and ds.num_classes == 3
    features, labels = ds.read_all("train")
    assert labels.dtype == np.uint8 and labels.tolist() == [[1, 1, 0], [0, 1, 0], [0, 0, 0], [1, 1, 1]]
    assert [int(f[0, 0, 0]) for f in features] == [0, 20, 40, 60]  # each row kept its own image
    _, val = ds.read_all("val")
    assert val.tolist() == [[0, 0, 1]]
    assert ds.label_histogram("train") == [2, 3, 1]  # images carrying each class
    errors = sorted(e["error"] for e in ds.errors())
    assert len(errors) == 3
    assert any('train.csv line 6: expected 2 columns "path,labels", found 3' in e for e in errors)
    assert any('train.csv line 7: unknown class: "unicorn"' in e for e in errors)
    assert any("val.csv line 2" in e for e in errors)  # the missing image, named by its row


def test_labels_are_sorted_names_without_a_class_file_and_paths_pass_the_gate(tmp_path):
    _images(tmp_path / "img", 2)
    (tmp_path / "img" / "l.csv").write_text("0.png,zebra;ant\n1.png,ant\n")
    rows, problems = read_labels_csv(str(tmp_path / "img" / "l.csv"), None)
    assert [r[1] for r in rows] == [("zebra", "ant"), ("ant",)] and problems == []
    (tmp_path / "outside.csv").write_text("../secret.png,cat\n")
    with confined_to([tmp_path / "img"]), pytest.raises(OutsideDataRootsError, match="outside.csv line 1"):
        read_labels_csv(str(tmp_path / "outside.csv"), str(tmp_path / "img"))


def test_a_multilabel_record_holds_only_zeros_and_ones():
    image = np.zeros((4, 4, 1), np.uint8)
    data, meta, _ = pack_record(image, np.array([1, 0, 1], np.int64), "multilabel")
    _, label = unpack_record(data)
    assert label.dtype == np.uint8 and label.tolist() == [1, 0, 1]
    for bad in (np.array([0, 2, 1]), np.array([]), np.zeros((2, 2), np.uint8), 3):
        with pytest.raises(RecordError, match="multilabel"):
            pack_record(image, bad, "multilabel")


def _build(tmp_path, form, tag):
    job = create_dataset(
        "image-multilabel",
        {"width": 10, "height": 8, "shuffle": False, "val_percent": 0, **form},
        workers=1,
        jobs_dir=tmp_path / f"jobs-{tag}",
    )
    return open_dataset(job.path)


def test_tag_folders_give_an_image_linked_into_several_folders_each_label(tmp_path):
    import os

    _images(tmp_path / "pool", 3)
    tags = tmp_path / "tags"
    for name in ("cat", "dog", "sky"):
        (tags / name).mkdir(parents=True)
    os.symlink(tmp_path / "pool" / "0.png", tags / "cat" / "0.png")
    os.link(tmp_path / "pool" / "0.png", tags / "dog" / "zero.png")  # a hard link: the same image
    os.symlink(tmp_path / "pool" / "1.png", tags / "dog" / "1.png")
    (tags / "sky" / "copy.png").write_bytes((tmp_path / "pool" / "1.png").read_bytes())  # a copy: another image
    ds = _build(tmp_path, {"tag_folder": str(tags)}, "tags")
    assert ds.class_labels == ["cat", "dog", "sky"]
    features, labels = ds.read_all("train")
    assert sorted(map(tuple, labels.tolist())) == [(0, 0, 1), (0, 1, 0), (1, 1, 0)]


def test_coco_categories_become_the_labels_of_each_image(tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "annotation_fixtures", Path(__file__).with_name("annotation_fixtures.py")
    )
    fx = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(fx)  # type: ignore[union-attr]
    fx.write_images(tmp_path / "images")
    path = fx.coco(tmp_path / "coco.json")
    ds = _build(tmp_path, {"coco_annotations": str(path), "image_folder": str(tmp_path / "images")}, "coco")
    assert ds.class_labels == ["cat", "dog"]
    _, labels = ds.read_all("train")
    assert labels.tolist() == [[1, 1], [0, 1], [0, 0]]  # a.png, b.png, c.png (no annotations)


def test_exactly_one_source(tmp_path):
    from digits_core.errors import FormValidationError

    (tmp_path / "l.csv").write_text("a.png,x\n")
    with pytest.raises(FormValidationError, match="exactly one of"):
        _build(tmp_path, {"labels_csv": str(tmp_path / "l.csv"), "tag_folder": str(tmp_path)}, "two")
