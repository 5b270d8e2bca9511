"""End to end: a real dataset job (2 worker processes, LMDB) from the synthetic Sunnybrook set."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from pydicom.data import get_testdata_file

from digits_data_sunnybrook.contours import rasterize_polygon, read_contour
from digits_data_sunnybrook.ingestion import SunnybrookIngestion
from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR

pytestmark = pytest.mark.slow


def test_dataset_job_with_bad_files_in_the_errors_report(synth_copy, tmp_path):
    from digits_core.datasets import create_dataset, open_dataset

    values = {
        "image_folder": str(synth_copy / IMAGES_DIR),
        "contour_folder": str(synth_copy / CONTOURS_DIR),
        "pct_val": 34,
        "seed": 0,
    }
    # damage two contoured images of one case: a text file and an RT structure set
    probe = SunnybrookIngestion(**values)
    entries = probe.itemize_entries("train") + probe.itemize_entries("val")
    text_entry, rt_entry = entries[0], entries[3]
    Path(text_entry.image).write_text("not a DICOM file\n")
    shutil.copy(get_testdata_file("rtstruct.dcm"), rt_entry.image)

    job = create_dataset(
        "image-sunnybrook", values, name="sunnybrook", workers=2, jobs_dir=tmp_path / "jobs", max_errors=5
    )
    ds = open_dataset(job.id, jobs_dir=tmp_path / "jobs")
    assert ds.plugin_id == "image-sunnybrook"
    assert ds.feature_dtype() == "uint16" and ds.feature_shape() == (64, 64, 1)
    assert ds.label_kind == "mask" and ds.label_shape == (64, 64)
    assert ds.class_labels == ["background", "left ventricle"] and len(ds.color_palette) == 2
    split = ds.userdata["split"]
    assert not set(split["train"]) & set(split["val"]) and split == probe.userdata["split"]
    assert ds.count("train") + ds.count("val") == len(entries) - 2

    errors = ds.errors()
    assert len(errors) == 2
    reported = {e["entry"].split(" (contour")[0]: e["error"] for e in errors}
    assert set(reported) == {text_entry.image, rt_entry.image}
    assert "DicomReadError" in reported[text_entry.image] and text_entry.image in reported[text_entry.image]
    assert "RT Structure Set Storage" in reported[rt_entry.image]

    # records are written in entry order: each mask equals its rasterized contour, pixels are bit-exact
    for stage in ("train", "val"):
        good = [e for e in probe.itemize_entries(stage) if e not in (text_entry, rt_entry)]
        features, labels = ds.read_all(stage)
        assert features.dtype == np.uint16 and labels.shape == (len(good), 64, 64)
        for i, entry in enumerate(good):
            np.testing.assert_array_equal(labels[i], rasterize_polygon(read_contour(entry.contour), (64, 64)))
            feature, _ = probe.encode_entry(entry)
            np.testing.assert_array_equal(features[i], feature)
    mean = ds.mean()
    assert mean is not None and mean.dtype == np.float32 and mean.max() > 255  # not squashed to uint8


def test_missing_decoder_fails_the_job_before_it_starts(synth_copy, tmp_path):
    from pydicom.pixels import get_decoder
    from pydicom.uid import JPEGLSLossless

    from digits_core.datasets import create_dataset
    from digits_core.errors import DigitsError

    if get_decoder(JPEGLSLossless).is_available:
        pytest.skip("a JPEG-LS decoder is installed here")
    values = {"image_folder": str(synth_copy / IMAGES_DIR), "contour_folder": str(synth_copy / CONTOURS_DIR)}
    entry = SunnybrookIngestion(**values).itemize_entries("train")[0]
    shutil.copy(get_testdata_file("MR_small_jpeg_ls_lossless.dcm"), entry.image)
    with pytest.raises(DigitsError, match=r"digits-data-sunnybrook\[codecs\]"):
        create_dataset("image-sunnybrook", values, workers=2, jobs_dir=tmp_path / "jobs")
    from digits_core.jobs import JobStore

    (job,) = JobStore(tmp_path / "jobs").list(kind="dataset")
    assert job.status.value == "Error" and "digits-data-sunnybrook[codecs]" in job.error
    assert not list((tmp_path / "jobs").rglob("dataset.json"))  # nothing published
