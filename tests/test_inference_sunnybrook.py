"""Inference through the Sunnybrook data plugin's inference form: real DICOM files, 16-bit inputs.

A synthetic Sunnybrook set (real DICOM files in the real layout) becomes a
dataset, a U-Net trains for one epoch, then ``infer`` takes a validation
record (with its contour as ground truth) or a DICOM file, through the API
and ``digits infer --dicom-file``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sunnybrook_model(tmp_path_factory):
    pytest.importorskip("digits_data_sunnybrook")
    from digits_core.datasets import create_dataset
    from digits_core.engine import train
    from digits_data_sunnybrook.synth import CONTOURS_DIR, IMAGES_DIR, generate

    root = tmp_path_factory.mktemp("sunnybrook-infer")
    synth = generate(root / "synth", cases=2, size=48, seed=1, slices=2)
    jobs_dir = root / "jobs"
    values = {
        "image_folder": str(synth.root / IMAGES_DIR),
        "contour_folder": str(synth.root / CONTOURS_DIR),
        "pct_val": 50,
        "seed": 0,
    }
    ds_job = create_dataset("image-sunnybrook", values, name="sb", workers=1, jobs_dir=jobs_dir)
    model = train(ds_job.id, "unet", name="lv", epochs=1, batch_size=4, jobs_dir=jobs_dir)
    return jobs_dir, model, synth.root / IMAGES_DIR


def test_validation_record_has_ground_truth_and_16bit_input(sunnybrook_model):
    from digits_core.inference import infer

    jobs_dir, model, _ = sunnybrook_model
    result = infer(model.id, form_data={"validation_record": "0"}, jobs_dir=jobs_dir)
    sample = result.samples[0]
    assert sample.input_data.dtype == np.uint16 and sample.input_data.shape == (48, 48, 1)
    assert sample.ground_truth.shape == (48, 48) and sample.ground_truth.max() == 1
    import json

    from digits_core.datasets import open_dataset

    # Record 0 of the validation stage, as stored: its 16-bit image went in and its contour mask is the truth.
    dataset_id = json.loads((model.path / "model.json").read_text())["dataset_id"]
    with open_dataset(dataset_id, jobs_dir=jobs_dir) as ds:
        features, labels = ds.read_batch("val", 0, 1)
    assert np.array_equal(sample.input_data, np.asarray(features[0]).reshape(48, 48, 1))
    assert np.array_equal(sample.ground_truth, np.asarray(labels[0]).reshape(48, 48))
    data = result.to_json()
    assert data["view"] == "image-segmentation"
    # The view scores this output against that truth (a missing or misaligned truth gives other counts).
    predicted = np.argmax(sample.output, axis=-1)
    scores = {s["class"]: s for s in data["samples"][0]["view"]["scores"]}
    assert sorted(scores) == sorted(int(c) for c in np.union1d(predicted, sample.ground_truth))
    for c, s in scores.items():
        t, p = sample.ground_truth == c, predicted == c
        assert (s["truth_pixels"], s["predicted_pixels"]) == (int(t.sum()), int(p.sum()))
        assert s["dice"] == pytest.approx(2 * (t & p).sum() / (t.sum() + p.sum()))
    assert scores[1]["truth_pixels"] > 0  # the ventricle is in this record's truth
    assert [item["label"] for item in data["view_header"]["legend"]][:1] == ["background"]


def test_dicom_file_from_the_command_line(sunnybrook_model, tmp_path):
    from digits_core.cli import main

    jobs_dir, model, images = sunnybrook_model
    dicom = sorted(images.rglob("*.dcm"))[0]
    out = tmp_path / "lv.html"
    assert (
        main(["--jobs-dir", str(jobs_dir), "infer", "--model", model.id, "--dicom-file", str(dicom), "--out", str(out)])
        == 0
    )
    page = out.read_text()
    assert page.count('class="dsv-sample"') == 1 and "data:image/png;base64," in page
    assert f'data-input-id="{dicom}"' in page  # the input id is the DICOM file, never empty
    assert (
        main(["--jobs-dir", str(jobs_dir), "infer", "--model", model.id, "--validation-record", "999", "--json"]) != 0
    )


def test_a_dicom_file_given_as_a_plain_input_points_at_the_plugin_option(sunnybrook_model, capsys):
    """The generic reader cannot take a DICOM file: the error names the model's own --dicom-file (issue 27)."""
    from digits_core.cli import main

    jobs_dir, model, images = sunnybrook_model
    dicom = sorted(images.rglob("*.dcm"))[0]
    assert main(["--jobs-dir", str(jobs_dir), "infer", "--model", model.id, str(dicom)]) != 0
    err = capsys.readouterr().err
    assert "neither an image" in err and "--dicom-file" in err and '"image-sunnybrook"' in err, err
