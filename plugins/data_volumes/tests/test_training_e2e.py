"""From the command line: a synthetic Decathlon task → msd-volumes → unet3d / unet2.5d → digits infer → NIfTI / DICOM-SEG.

Real TensorFlow training on tiny volumes (12×24×24), short runs: these check that the pieces work and
learn, not the default-options figure (docs/medical-imaging.md, "3-D volumes", has that, with its command).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from digits_core.cli import main

pytestmark = pytest.mark.slow


def _metrics(job_folder):
    points = [json.loads(line) for line in (job_folder / "metrics.jsonl").read_text().splitlines()]
    return {p["name"]: p["value"] for p in points}  # the last value of each name


def _hd95_by_distance_transform(pred: np.ndarray, truth: np.ndarray, spacing) -> float:
    """HD95 in mm from scipy's Euclidean distance transforms (digits_core's own uses a KD-tree of surface points)."""
    from scipy import ndimage

    def surface(mask):
        return mask & ~ndimage.binary_erosion(mask, structure=ndimage.generate_binary_structure(3, 1), border_value=0)

    a, b = surface(pred), surface(truth)
    if not a.any() and not b.any():
        return 0.0
    if not a.any() or not b.any():
        return float("inf")
    to_b = ndimage.distance_transform_edt(~b, sampling=spacing)[a]
    to_a = ndimage.distance_transform_edt(~a, sampling=spacing)[b]
    return float(max(np.percentile(to_b, 95), np.percentile(to_a, 95)))


def test_unet3d_trains_from_the_cli_and_logs_per_case_dice_and_hd95(trained):
    import keras

    from digits_core.datasets.volumes import VolumeStageReader
    from digits_core.engine.volume_loop import predict_volume

    _, dataset, model = trained
    info = json.loads((model / "model.json").read_text())
    assert info["kind"] == "volume" and info["network"] == "unet3d"
    assert info["volume"]["patch"] == [8, 16, 16]  # ¾ of 12×24×24, divisible by 4
    metrics = _metrics(model)
    assert metrics["val_dice"] > 0.6, metrics
    assert len(info["val_cases"]) == 2  # per case, as the Decathlon reports
    assert metrics["val_dice"] == pytest.approx(np.mean([c["dice"] for c in info["val_cases"]]))
    # HD95 per case and class, in mm, recomputed from the final model's predictions of the validation cases:
    # a distance in voxels (spacing ignored), the maximum instead of the 95th percentile, or the wrong class differ.
    net = keras.saving.load_model(model / "model.keras", compile=False)
    config, classes = info["volume"], int(info["num_outputs"])
    logged = {case["case"]: case for case in info["val_cases"]}
    reader = VolumeStageReader(dataset / "dataset" / "val")
    try:
        for index in range(len(logged)):
            volume, label = reader.case(index)
            probs = predict_volume(
                net,
                volume.array.astype(np.float32),
                config["network"],
                config["patch"],
                classes,
                overlap=config["overlap"],
                adjacent=config["adjacent_slices"],
                unit=2 ** (config["levels"] - 1),
            )
            predicted = np.argmax(probs, axis=-1)
            expected = [
                _hd95_by_distance_transform(predicted == c, label == c, volume.spacing) for c in range(1, classes)
            ]
            assert logged[volume.name]["hd95_per_class"] == pytest.approx(expected, rel=1e-6), volume.name
    finally:
        reader.close()
    finite = [h for case in info["val_cases"] for h in case["hd95_per_class"] if np.isfinite(h)]
    assert finite and metrics["val_hd95"] == pytest.approx(np.mean(finite))
    epochs = sorted(
        {
            json.loads(line)["epoch"]
            for line in (model / "metrics.jsonl").read_text().splitlines()
            if '"val_dice"' in line
        }
    )
    assert epochs == [3.0, 6.0]  # validation every 3 epochs


def test_infer_writes_nifti_with_the_source_affine_and_a_seg_for_a_series(trained, synth, tmp_path, capsys):
    import highdicom as hd
    import nibabel as nib

    jobs, _, model = trained
    flipped = synth.task / "imagesTr" / "heart_001.nii.gz"  # stored with a mirrored i axis
    series = synth.dicom / "heart_001"
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "infer",
                "--model",
                model.name,
                str(flipped),
                str(series),
                "--out",
                str(tmp_path),
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    source = nib.load(str(flipped))
    result = nib.load(report[0]["files"][0])
    assert np.array_equal(result.affine, source.affine) and result.shape == source.shape
    truth = np.asanyarray(nib.load(str(synth.task / "labelsTr" / "heart_001.nii.gz")).dataobj)
    pred = np.asanyarray(result.dataobj)
    assert 2 * np.logical_and(pred == 1, truth == 1).sum() / ((pred == 1).sum() + (truth == 1).sum()) > 0.5
    assert report[0]["volumes_ml"]["left atrium"] > 0
    seg = hd.seg.segread(report[1]["files"][1])
    assert seg.number_of_frames == 12  # one frame per source slice, multi-frame
    from digits_data_volumes.geometry import read_series

    _, ordered = read_series(series)
    sop_uids = [str(__import__("pydicom").dcmread(s.path, stop_before_pixels=True).SOPInstanceUID) for s in ordered]
    series_nifti = np.asanyarray(nib.load(report[1]["files"][0]).dataobj)  # i, j, k of the series
    frames = seg.get_pixels_by_source_instance(sop_uids, combine_segments=True, skip_overlap_checks=True)
    assert np.array_equal(frames, np.transpose(series_nifti, (2, 1, 0)))  # voxel for voxel, slice by slice
    assert report[1]["files"][0].endswith("heart_001_2_seg.nii.gz")  # not over the NIfTI input's result
    from_series = nib.as_closest_canonical(nib.load(report[1]["files"][0]))  # same place in RAS, both ways
    from_nifti = nib.as_closest_canonical(result)
    assert np.allclose(from_series.affine, from_nifti.affine)
    assert np.array_equal(np.asanyarray(from_series.dataobj), np.asanyarray(from_nifti.dataobj))


def test_a_2d_image_given_to_a_3d_network_is_a_clear_error(trained, tmp_path, capsys):
    from PIL import Image

    jobs, _, model = trained
    picture = tmp_path / "slice.png"
    Image.fromarray(np.zeros((24, 24), np.uint8)).save(picture)
    assert main(["--jobs-dir", str(jobs), "infer", "--model", model.name, str(picture), "--out", str(tmp_path)]) != 0
    assert "slice.png: is a 2-D image; a volume network needs a 3-D volume" in capsys.readouterr().err


def test_unet25d_trains_on_the_same_dataset(trained):
    jobs, dataset, _ = trained
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "train",
                "--dataset",
                dataset.name,
                "--network",
                "unet2.5d",
                "--quiet",
                "--epochs",
                "3",
                "--validation-interval",
                "3",
                "--network-param",
                "steps_per_epoch=10",
            ]
        )
        == 0
    )
    (model,) = [
        p
        for p in jobs.iterdir()
        if (p / "model.json").is_file() and json.loads((p / "model.json").read_text()).get("network") == "unet2.5d"
    ]
    assert json.loads((model / "model.json").read_text())["volume"]["patch"][0] == 1
    assert 0.0 <= _metrics(model)["val_dice"] <= 1.0


def test_a_2d_network_on_a_volume_dataset_is_refused(trained, capsys):
    jobs, dataset, _ = trained
    before = sorted(path.name for path in jobs.iterdir())
    assert main(["--jobs-dir", str(jobs), "train", "--dataset", dataset.name, "--network", "lenet", "--quiet"]) != 0
    err = capsys.readouterr().err
    assert 'network "lenet" is not a volume network' in err and "choose unet3d or unet2.5d" in err, err
    assert f"dataset {dataset.name} is a volume (3-D) dataset" in err
    assert sorted(path.name for path in jobs.iterdir()) == before  # refused before any job exists


def test_volume_settings_are_declared_options_checked_before_training(trained, capsys):
    from digits_core.engine.option_specs import BY_NAME

    jobs, dataset, _ = trained
    assert BY_NAME["volume_patch"].group == BY_NAME["volume_overlap"].group == "Volumes (unet3d, unet2.5d)"
    before = set(jobs.iterdir())
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "train",
                "--dataset",
                dataset.name,
                "--network",
                "unet3d",
                "--quiet",
                "--volume-patch",
                "6,16,16",
            ]
        )
        != 0
    )
    assert "volume_patch: patch must be D,H,W voxels divisible by 4, not [6, 16, 16]" in capsys.readouterr().err
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "train",
                "--dataset",
                dataset.name,
                "--network",
                "unet3d",
                "--quiet",
                "--volume-overlap",
                "0.95",
            ]
        )
        != 0
    )
    assert "volume_overlap" in capsys.readouterr().err
    assert set(jobs.iterdir()) == before  # refused before any job folder exists


def test_a_volume_run_writes_tensorboard_hparams_data(trained):
    """Issue 42: a volume run's TensorBoard HParams session holds its network, dataset and volume settings, and
    its final figures (the last logged value of each metric) as float64 scalars, read back with TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata
    from tensorboard.util import tensor_util

    _, dataset, model = trained
    info = json.loads((model / "model.json").read_text())
    acc = EventAccumulator(str(model / "tb"), size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    hparams = {name: getattr(value, value.WhichOneof("kind")) for name, value in start.hparams.items()}
    assert start.group_name == model.name
    assert hparams["network"] == "unet3d"
    assert hparams["dataset"] == info["dataset_id"] and json.loads(hparams["volume_patch"]) == info["volume"]["patch"]
    finals = {
        tag[len("final/") :]: float(tensor_util.make_ndarray(acc.Tensors(tag)[-1].tensor_proto))
        for tag in acc.Tags()["tensors"]
        if tag.startswith("final/")
    }
    assert finals == {name: float(value) for name, value in _metrics(model).items()}
