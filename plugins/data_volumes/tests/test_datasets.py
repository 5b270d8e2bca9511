"""Volume datasets built through the real dataset job path: msd-volumes, dicom-series and nifti-volumes agree."""

from __future__ import annotations

import json

import numpy as np
import pytest

from digits_core import DatasetError
from digits_core.datasets import create_dataset
from digits_core.datasets.volumes import VolumeStageReader


def _build(plugin, form, jobs_dir, workers=1):
    job = create_dataset(plugin, form, jobs_dir=jobs_dir, workers=workers)
    folder = job.path / "dataset"
    return folder, json.loads((folder / "dataset.json").read_text())


def _cases(folder, info, stage):
    reader = VolumeStageReader(folder / stage)
    try:
        return [reader.case(i) for i in range(info["stages"][stage]["count"])]
    finally:
        reader.close()


@pytest.fixture(scope="module")
def built(synth, tmp_path_factory):
    jobs = tmp_path_factory.mktemp("jobs")
    msd = _build("msd-volumes", {"data_folder": str(synth.task)}, jobs)
    dicom = _build(
        "dicom-series",
        {"series_folder": str(synth.dicom), "label_folder": str(synth.task / "labelsTr")},
        jobs,
        workers=2,
    )
    return msd, dicom


def test_dicom_series_and_msd_build_identical_datasets_record_for_record(built):
    (fa, ia), (fb, ib) = built
    assert ia["userdata"]["split"] == ib["userdata"]["split"]
    for stage in ("train", "val"):
        assert ia["stages"][stage]["count"] == ib["stages"][stage]["count"] > 0
        for (va, la), (vb, lb) in zip(_cases(fa, ia, stage), _cases(fb, ib, stage)):
            assert va.name == vb.name
            assert va.array.dtype == vb.array.dtype == np.float32  # z-scored (MR)
            assert np.array_equal(va.array, vb.array)
            assert np.array_equal(la, lb)
            assert np.array_equal(va.affine, vb.affine)
            assert va.spacing == vb.spacing


def test_dataset_json_says_dhwc_median_spacing_and_voxel_histogram(built, synth):
    (folder, info), _ = built
    assert info["layout"] == "DHWC" and info["feature"]["layout"] == "DHWC"
    assert info["label"]["kind"] == "volume"
    assert info["median_spacing"] == [2.5, 1.25, 1.25]  # five of six cases; the coarse one is resampled to it
    assert info["class_labels"] == ["background", "left atrium"]
    voxels = 0
    foreground = 0
    for stage in ("train", "val"):
        for volume, label in _cases(folder, info, stage):
            assert volume.spacing == (2.5, 1.25, 1.25)
            voxels += label.size
            foreground += int((label == 1).sum())
    assert info["label_histogram"] == [voxels - foreground, foreground]
    coarse = [s for st in info["stages"].values() for s in st["shapes"]]
    assert all(s[:3] == [12, 24, 24] for s in coarse)  # 10×20×20 at 3.0/1.5 mm covers the same 30×30 mm


def test_flipped_affine_gives_the_same_anatomy_as_unflipped(synth):
    import nibabel as nib

    from digits_data_volumes.geometry import read_nifti

    flipped = synth.task / "imagesTr" / "heart_001.nii.gz"  # every third case from 1 is stored mirrored
    assert nib.load(str(flipped)).affine[0, 0] < 0
    volume = read_nifti(flipped)
    assert volume.affine[0, 0] > 0 and np.allclose(np.diag(volume.affine)[:3], [1.25, 1.25, 2.5])
    raw = np.asanyarray(nib.load(str(flipped)).dataobj)
    assert np.array_equal(volume.array[..., 0], np.swapaxes(raw[::-1], 0, 2))


def test_patch_reads_touch_only_their_slabs_and_match_the_case(synth, tmp_path, monkeypatch):
    import shutil

    import lmdb

    from digits_core.datasets import volumes

    monkeypatch.setattr(volumes, "SLAB_BYTES", 24 * 24 * 4 * 3)  # 3 slices per slab: 4 slabs per case
    folder, info = _build(
        "nifti-volumes",
        {"image_folder": str(synth.task / "imagesTr"), "label_folder": str(synth.task / "labelsTr")},
        tmp_path,
    )
    assert info["stages"]["train"]["count"] + info["stages"]["val"]["count"] == 6
    reader = VolumeStageReader(folder / "train")
    volume, label = reader.case(0)
    assert reader.meta(0).slab == 3
    reader.close()
    damaged = tmp_path / "damaged"
    shutil.copytree(folder / "train", damaged)
    env = lmdb.open(str(damaged))
    with env.begin(write=True) as txn:  # slabs 0 and 3 gone: a patch of slices 4..8 needs only slabs 1 and 2
        for key in (b"00000000/f00000", b"00000000/l00000", b"00000000/f00003", b"00000000/l00003"):
            assert txn.delete(key)
    env.close()
    reader = VolumeStageReader(damaged)
    image, patch_label = reader.patch(0, (4, 5, 6), (5, 8, 8))
    assert np.array_equal(image, volume.array[4:9, 5:13, 6:14])
    assert np.array_equal(patch_label, label[4:9, 5:13, 6:14])
    with pytest.raises(DatasetError, match="case 0 lacks slab 0; the stage is damaged"):  # slice 0 needs slab 0
        reader.patch(0, (0, 0, 0), (2, 2, 2))
    reader.close()
    edge, _ = VolumeStageReader(folder / "train").patch(0, (10, 20, 20), (8, 8, 8))  # clipped at the far corner
    assert edge.shape == (2, 4, 4, 1)


def test_dicom_series_labels_from_a_dicom_seg_give_the_same_records(built, synth, tmp_path):
    from digits_data_volumes.synth import write_seg_labels

    labels = tmp_path / "seg-labels"
    write_seg_labels(synth, labels)
    folder, info = _build("dicom-series", {"series_folder": str(synth.dicom), "label_folder": str(labels)}, tmp_path)
    (fa, ia), _ = built
    for stage in ("train", "val"):
        for (va, la), (vb, lb) in zip(_cases(fa, ia, stage), _cases(folder, info, stage)):
            assert va.name == vb.name and np.array_equal(la, lb) and np.array_equal(va.array, vb.array)


def test_plugin_check_takes_a_volume_label_as_a_volume(synth):
    """A DHWC plugin's D×H×W label is no undeclared raw label (issue 43: the check warned falsely)."""
    from digits_core import registry
    from digits_core.plugins.testing import check_plugin

    report = check_plugin(
        registry.get_data_ingestion("msd-volumes"), form_values={"data_folder": str(synth.task)}, entries=1
    )
    assert report.ok and "label kind" not in str(report) and "raw array" not in str(report), str(report)
