"""image-classification end to end on real PNG/JPEG/16-bit files, with 2 worker processes."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from digits_core.cli import main
from digits_core.datasets import create_dataset, open_dataset
from digits_core.errors import FormValidationError
from digits_data_images.classification import ImageClassificationIngestion


def test_folders_with_bad_files_and_an_empty_class(tmp_path, images):
    root = tmp_path / "train"
    for i in range(6):
        images.save(root / "cat" / f"{i}.png", images.rgb(12, 16, i))
        images.save(root / "dog" / f"{i}.jpg", images.rgb(20, 10, 100 + i), "JPEG", quality=95)
    images.truncated(root / "cat" / "cut.png", images.rgb(12, 16, 50))
    (root / "dog" / "notes.png").write_text("this is not an image")
    (root / "empty").mkdir()
    (root / "cat" / "readme.txt").write_text("ignored: no image extension")
    job = create_dataset(
        "image-classification",
        {"folder": str(root), "width": 8, "height": 6},
        name="pets",
        workers=2,
        jobs_dir=tmp_path / "jobs",
        max_errors=2,
    )
    ds = open_dataset(job.id, jobs_dir=tmp_path / "jobs")
    assert ds.class_labels == ["cat", "dog"]
    assert ds.userdata["dropped_classes"] == ["empty (0 images < 2)"]
    assert ds.userdata["images_per_class"] == {"train": [5, 5], "val": [2, 2]}  # 7 files each, 25 % rounded
    assert ds.count("train") + ds.count("val") == 12
    errors = {e["entry"]: e["error"] for e in ds.errors()}
    assert len(errors) == 2
    cut = next(v for k, v in errors.items() if "cut.png" in k)
    notes = next(v for k, v in errors.items() if "notes.png" in k)
    assert "cut.png" in cut and "decode" in cut
    assert "notes.png" in notes and "not an image" in notes
    features, labels = ds.read_all("train")
    assert features.shape == (ds.count("train"), 6, 8, 3) and features.dtype == np.uint8
    assert Counter(labels.tolist()) == Counter({0: ds.count("train") - (labels == 1).sum(), 1: (labels == 1).sum()})
    assert ds.info["stages"]["train"]["encodings"] == {"png": ds.count("train")}
    assert ds.mean().shape == (6, 8, 3)


def test_split_is_per_class_seeded_and_proportional(tmp_path, images):
    root = tmp_path / "train"
    for k, (c, n) in enumerate((("a", 40), ("b", 20))):
        for i in range(n):
            images.save(root / c / f"{i:03d}.png", images.gray(4, 4, 1000 * k + i))
    form = {
        "folder": str(root),
        "width": 4,
        "height": 4,
        "image_type": "grayscale",
        "val_percent": 25,
        "test_percent": 10,
        "encoding": "none",
    }
    job = create_dataset("image-classification", form, workers=2, jobs_dir=tmp_path / "jobs")
    ds = open_dataset(job.path)
    assert ds.userdata["images_per_class"] == {"train": [26, 13], "val": [10, 5], "test": [4, 2]}
    for stage, expected in (("train", {0: 26, 1: 13}), ("val", {0: 10, 1: 5}), ("test", {0: 4, 1: 2})):
        assert Counter(ds.read_all(stage)[1].tolist()) == expected
    # the split is a function of the seed: same seed -> same records, another seed -> others
    again = open_dataset(create_dataset("image-classification", form, workers=1, jobs_dir=tmp_path / "jobs").path)
    other = open_dataset(
        create_dataset("image-classification", {**form, "seed": 1}, workers=2, jobs_dir=tmp_path / "jobs").path
    )
    assert again.read_records("val", 0, 15) == ds.read_records("val", 0, 15)
    assert other.read_records("val", 0, 15) != ds.read_records("val", 0, 15)
    all_train = {f.tobytes() for f in ds.read_all("train")[0]}
    assert not all_train & {f.tobytes() for f in ds.read_all("val")[0]}


def test_passthrough_keeps_original_bytes_and_16_bit_png_stays_uint16(tmp_path, images):
    root = tmp_path / "train"
    values = {}
    for i in range(3):
        arr = (np.random.default_rng(i).integers(0, 65536, (6, 5))).astype(np.uint16)
        values[i] = arr
        images.save(root / "deep" / f"{i}.png", arr)
        images.save(root / "shallow" / f"{i}.png", (arr >> 8).astype(np.uint8))
    # a 16-bit dataset: grayscale, no resize -> pass-through bytes, bit-exact uint16 pixels
    deep_only = tmp_path / "deep"
    for i in range(3):
        images.save(deep_only / "x" / f"{i}.png", values[i])
        images.save(deep_only / "y" / f"{i}.png", values[i][::-1].copy())
    for encoding in ("passthrough", "png", "none"):
        job = create_dataset(
            "image-classification",
            {
                "folder": str(deep_only),
                "image_type": "grayscale",
                "width": 5,
                "height": 6,
                "val_percent": 0,
                "encoding": encoding,
                "shuffle": False,
            },
            workers=2,
            jobs_dir=tmp_path / "jobs",
        )
        ds = open_dataset(job.path)
        features, labels = ds.read_all("train")
        assert features.dtype == np.uint16 and features.shape == (6, 6, 5, 1)
        expected = [values[i] for i in range(3)] + [values[i][::-1] for i in range(3)]
        assert all(np.array_equal(f[:, :, 0], e) for f, e in zip(features, expected)), encoding
        if encoding != "none":  # a PNG of the target size is kept as is (png: after a decode check)
            raw, _ = ds.read_batch("train", 0, 1, decode=False)
            assert raw[0] == (deep_only / "x" / "0.png").read_bytes()
            assert ds.info["mean"]["exact"] and ds.info["mean"]["images"] == 6
    # JPEG pass-through: stored bytes are the file; a file of another size is re-encoded as PNG
    rgb = tmp_path / "rgb"
    for i in range(2):
        images.save(rgb / "p" / f"{i}.jpg", images.rgb(6, 5, i), "JPEG")
        images.save(rgb / "q" / f"{i}.jpg", images.rgb(6, 5, 10 + i), "JPEG")
    images.save(rgb / "q" / "big.jpg", images.rgb(12, 10, 99), "JPEG")
    job = create_dataset(
        "image-classification",
        {"folder": str(rgb), "width": 5, "height": 6, "val_percent": 0, "encoding": "passthrough", "shuffle": False},
        workers=2,
        jobs_dir=tmp_path / "jobs",
    )
    ds = open_dataset(job.path)
    assert ds.feature_encodings("train") == {"jpg": 4, "png": 1}
    raw, _ = ds.read_batch("train", 0, 5, decode=False)
    assert raw[0] == (rgb / "p" / "0.jpg").read_bytes()
    assert raw[4].startswith(b"\x89PNG")  # q/big.jpg (sorted last) was resized and re-encoded
    features, _ = ds.read_all("train")
    assert features.shape == (5, 6, 5, 3)


def test_list_files_with_labels_file(tmp_path, images):
    for i in range(8):
        images.save(tmp_path / "imgs" / f"{i}.png", images.gray(5, 5, i))
    (tmp_path / "train.txt").write_text("\n".join(f"imgs/{i}.png {i % 2}" for i in range(6)) + "\n")
    (tmp_path / "val.txt").write_text("imgs/6.png 0\nimgs/7.png 1\n")
    (tmp_path / "labels.txt").write_text("zero\none\n")
    job = create_dataset(
        "image-classification",
        {
            "train_list": str(tmp_path / "train.txt"),
            "val_list": str(tmp_path / "val.txt"),
            "labels_file": str(tmp_path / "labels.txt"),
            "image_type": "grayscale",
            "width": 5,
            "height": 5,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    ds = open_dataset(job.path)
    assert ds.class_labels == ["zero", "one"] and ds.count("train") == 6 and ds.count("val") == 2
    assert sorted(ds.read_all("val")[1].tolist()) == [0, 1]


def test_list_ids_are_kept_even_for_small_classes(tmp_path, images):
    for i in range(7):
        images.save(tmp_path / f"{i}.png", images.gray(3, 3, i))
    (tmp_path / "train.txt").write_text("0.png 0\n1.png 0\n2.png 1\n3.png 1\n4.png 3\n5.png 1\n6.png 0\n")
    job = create_dataset(
        "image-classification",
        {
            "train_list": str(tmp_path / "train.txt"),
            "val_percent": 0,
            "image_type": "grayscale",
            "width": 3,
            "height": 3,
            "shuffle": False,
        },
        workers=1,
        jobs_dir=tmp_path / "jobs",
    )
    ds = open_dataset(job.path)
    assert ds.class_labels == ["0", "1", "2", "3"]
    assert ds.userdata["small_classes"] == ["2 (0 images < 2)", "3 (1 images < 2)"]
    assert sorted(ds.read_all("train")[1].tolist()) == [0, 0, 0, 1, 1, 1, 3]


def test_form_errors_name_the_field(tmp_path):
    with pytest.raises(FormValidationError) as info:
        create_dataset("image-classification", {}, jobs_dir=tmp_path)
    assert "folder" in info.value.errors
    with pytest.raises(FormValidationError) as info:
        create_dataset(
            "image-classification",
            {
                "folder": str(tmp_path / "missing"),
                "val_percent": 80,
                "test_percent": 30,
                "resize_mode": "stretch",
                "width": -1,
            },
            jobs_dir=tmp_path,
        )
    errors = info.value.errors
    assert "does not exist" in errors["folder"][0]
    assert "must be under 100" in errors["val_percent"][0]
    assert set(errors) >= {"folder", "val_percent", "resize_mode", "width"}


def test_cli_options_come_from_the_form(capsys):
    with pytest.raises(SystemExit):
        main(["dataset", "create", "image-classification", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in (
        "--folder FOLDER",
        "--resize-mode {squash,crop,fill,half_crop}",
        "--encoding {png,jpg,none,passthrough}",
        "--image-type {color,grayscale}",
        "--val-percent VAL_PERCENT",
        "--shuffle, --no-shuffle",
    ):
        assert option in out, option
    assert "Width. Image width in pixels after resizing (default: 256)" in out
    assert "(default: squash)" in out and "(default: 25.0)" in out


def test_inference_mode_lists_and_encodes_images(tmp_path, images):
    path = images.save(tmp_path / "one.png", images.rgb(10, 20, 3))
    for i in range(3):
        images.save(tmp_path / "many" / f"{i}.jpg", images.rgb(8, 8, i), "JPEG")
    userdata = {"image_type": "color", "width": 6, "height": 4, "resize_mode": "crop", "class_labels": ["a"]}
    plugin = ImageClassificationIngestion(
        is_inference_db=True, **userdata, image_path=str(path), image_folder=str(tmp_path / "many")
    )
    entries = plugin.itemize_entries("test")
    assert len(entries) == 4 and plugin.itemize_entries("train") == []
    feature, label = plugin.encode_entry(entries[0])
    assert feature.shape == (4, 6, 3) and feature.dtype == np.uint8 and label is None
    # an uploaded file (bytes or a file object) is read once and listed by name
    upload = ImageClassificationIngestion(is_inference_db=True, **userdata, image_file=path.read_bytes())
    (entry,) = upload.itemize_entries("test")
    assert entry == ("upload:image", None)
    assert np.array_equal(upload.encode_entry(entry)[0], feature)


def test_plugin_modules_do_not_import_tensorflow():
    code = (
        "import sys, digits_data_images.classification, digits_data_images.segmentation, "
        "digits_core.datasets.create, digits_core.cli.dataset_cmd; "
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_workers_come_from_a_forkserver_when_tensorflow_is_loaded(tmp_path, images, monkeypatch):
    import types

    from digits_core.datasets.create import _mp_context

    for c in ("a", "b"):
        for i in range(4):
            images.save(tmp_path / "train" / c / f"{i}.png", images.gray(5, 5, i + (10 if c == "b" else 0)))
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    assert _mp_context().get_start_method() == "forkserver"  # forking a TensorFlow process is unsafe
    job = create_dataset(
        "image-classification",
        {"folder": str(tmp_path / "train"), "image_type": "grayscale", "width": 5, "height": 5, "val_percent": 0},
        workers=2,
        jobs_dir=tmp_path / "jobs",
    )
    assert open_dataset(job.path).count("train") == 8


def test_digits_command_in_a_real_process(tmp_path, images):
    for c in ("a", "b"):
        for i in range(6):
            images.save(tmp_path / "train" / c / f"{i}.png", images.rgb(9, 7, i + (50 if c == "b" else 0)))
    jobs = tmp_path / "jobs"
    cmd = [
        sys.executable,
        "-m",
        "digits_core",
        "--jobs-dir",
        str(jobs),
        "dataset",
        "create",
        "image-classification",
        "--name",
        "ab",
        "--folder",
        str(tmp_path / "train"),
        "--width",
        "7",
        "--height",
        "9",
        "--workers",
        "2",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "records: train 8, val 4" in done.stdout and "100%" in done.stderr  # summary and progress bar
    bad = subprocess.run(cmd[:-6] + ["--width", "7", "--height", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "height: Number must be between 1 and 16384" in bad.stderr
    assert "Traceback" not in bad.stderr
