"""Volumes and a real Orthanc (Debian's orthanc + orthanc-dicomweb, 127.0.0.1, authentication on).

One Orthanc per module holds the synthetic cases as DICOM series with their labels as DICOM-SEG:
``dicomweb-volumes`` builds the dataset ``msd-volumes`` builds from the NIfTI files, record for record;
``digits infer --dicomweb-series UID --store`` writes the result's multi-frame SEG back, and highdicom
reads it from the server voxel for voxel.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from digits_data_dicomweb.orthanc import OrthancServer, orthanc_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not orthanc_available() and not os.environ.get("CI"),
        reason="Orthanc is not installed (apt-get install orthanc orthanc-dicomweb)",
    ),
]


@pytest.fixture(scope="module")
def pacs(synth, tmp_path_factory):
    from digits_data_volumes.synth import write_seg_labels

    segs = write_seg_labels(synth, tmp_path_factory.mktemp("seg"))
    with OrthancServer(tmp_path_factory.mktemp("orthanc")) as server:
        server.upload(synth.dicom)
        server.upload(*[s for s in segs if s.stem != synth.cases[-1]])  # the last case's series has no SEG
        yield server


def _source(pacs, cache):
    from digits_data_dicomweb.source import DicomWebSource

    return DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=cache)


def _series_uid(pacs, tmp_path, patient):
    from digits_data_dicomweb.source import StudyQuery

    (series,) = [
        s for s in _source(pacs, tmp_path / "q").find_series(StudyQuery(patient_ids=(patient,))) if s.modality == "MR"
    ]
    return series.series


def _cases(folder, stage):
    from digits_core.datasets.volumes import VolumeStageReader

    count = json.loads((folder / "dataset.json").read_text())["stages"][stage]["count"]
    reader = VolumeStageReader(folder / stage)
    try:
        return [reader.case(i) for i in range(count)]
    finally:
        reader.close()


def test_dicomweb_volumes_builds_the_msd_dataset_record_for_record(pacs, synth, tmp_path):
    from digits_core.datasets import create_dataset

    jobs = tmp_path / "jobs"
    remote = create_dataset(
        "dicomweb-volumes",
        {
            "server_url": pacs.dicomweb_url,
            "username": pacs.username,
            "password": pacs.password,
            "cache_folder": str(tmp_path / "c"),
            "pct_val": 34,
        },
        jobs_dir=jobs,
        workers=2,
    )
    msd = create_dataset("msd-volumes", {"data_folder": str(synth.task), "pct_val": 34}, jobs_dir=jobs, workers=1)
    a, b = remote.path / "dataset", msd.path / "dataset"
    ia, ib = (json.loads((f / "dataset.json").read_text()) for f in (a, b))
    *others, unlabelled = synth.cases
    assert ia["userdata"]["skipped_series"] == [
        f"series {_series_uid(pacs, tmp_path, unlabelled)} (patient {unlabelled}) has no DICOM-SEG"
    ]
    assert sorted(ia["userdata"]["split"]["train"] + ia["userdata"]["split"]["val"]) == others
    assert ia["class_labels"] == ib["class_labels"] == ["background", "left atrium"]
    assert ia["median_spacing"] == ib["median_spacing"]
    cases_b = {v.name: (v, l) for stage in ("train", "val") for v, l in _cases(b, stage)}
    for stage in ("train", "val"):
        for volume, label in _cases(a, stage):
            same, same_label = cases_b[volume.name]
            assert np.array_equal(volume.array, same.array) and np.array_equal(label, same_label)
            assert np.array_equal(volume.affine, same.affine) and volume.spacing == same.spacing
    for path in (jobs / remote.id).rglob("*.json"):  # the password never reaches the job folder
        assert pacs.password not in path.read_text()


def test_infer_a_dicomweb_series_and_store_its_seg(pacs, trained, synth, tmp_path, capsys, monkeypatch):
    """`digits infer --dicomweb-series UID --store`: the stored multi-frame SEG equals the written result."""
    import highdicom as hd
    import nibabel as nib

    from digits_core.cli import main

    jobs, _, model = trained
    series = _series_uid(pacs, tmp_path, "heart_001")  # stored with a mirrored axis
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", pacs.password)  # never on the command line
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "infer",
                "--model",
                model.name,
                "--dicomweb-series",
                series,
                "--dicomweb-url",
                pacs.dicomweb_url,
                "--dicomweb-username",
                pacs.username,
                "--store",
                "--out",
                str(tmp_path / "out"),
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    (report,) = json.loads(captured.out)
    assert "Stored the DICOM-SEG (12 frames)" in captured.err and pacs.dicomweb_url in captured.err
    nifti, written_seg = report["files"]
    label_ijk = np.asanyarray(nib.load(nifti).dataobj)
    assert label_ijk.any()
    seg_uid = hd.seg.segread(written_seg).SeriesInstanceUID
    source = _source(pacs, tmp_path / "fresh")
    from digits_data_dicomweb.source import StudyQuery

    (stored,) = [
        r for r in source.find_instances(StudyQuery(patient_ids=("heart_001",)), modality="SEG") if r.series == seg_uid
    ]
    back = hd.seg.Segmentation.from_dataset(source.retrieve(stored))
    images = source.series_instances(source.locate_series(series))
    import pydicom

    from digits_data_volumes.geometry import read_series_files

    _, ordered = read_series_files([source.fetch(r) for r in images], series)
    sop_uids = [str(pydicom.dcmread(s.path, stop_before_pixels=True).SOPInstanceUID) for s in ordered]
    assert back.number_of_frames == len(sop_uids) == 12  # one multi-frame object, every slice referenced
    frames = back.get_pixels_by_source_instance(sop_uids, combine_segments=True, skip_overlap_checks=True)
    assert np.array_equal(frames, np.transpose(label_ijk, (2, 1, 0)))  # voxel for voxel, slice by slice
    # the same series from its folder gives the same label (the server's copy is read as dicom-series reads),
    # and --store sends that SEG to the server named on the command line
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "infer",
                "--model",
                model.name,
                str(synth.dicom / "heart_001"),
                "--dicomweb-url",
                pacs.dicomweb_url,
                "--dicomweb-username",
                pacs.username,
                "--store",
                "--out",
                str(tmp_path / "local"),
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    local, local_seg = json.loads(captured.out)[0]["files"]
    assert np.array_equal(np.asanyarray(nib.load(local).dataobj), label_ijk)
    assert np.array_equal(nib.load(local).affine, nib.load(nifti).affine)
    local_uid = hd.seg.segread(local_seg).SeriesInstanceUID
    assert f"as series {local_uid} on {pacs.dicomweb_url}" in captured.err
    (stored_local,) = [
        r
        for r in source.find_instances(StudyQuery(patient_ids=("heart_001",)), modality="SEG")
        if r.series == local_uid
    ]
    again = hd.seg.Segmentation.from_dataset(source.retrieve(stored_local))
    assert np.array_equal(
        again.get_pixels_by_source_instance(sop_uids, combine_segments=True, skip_overlap_checks=True), frames
    )


def test_a_series_missing_on_the_server_is_a_clear_error(pacs, trained, tmp_path, capsys, monkeypatch):
    from digits_core.cli import main

    jobs, _, model = trained
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", pacs.password)
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "infer",
                "--model",
                model.name,
                "--dicomweb-series",
                "1.2.3.4",
                "--dicomweb-url",
                pacs.dicomweb_url,
                "--dicomweb-username",
                pacs.username,
            ]
        )
        != 0
    )
    err = capsys.readouterr().err
    assert "dicomweb:1.2.3.4" in err and "has no series 1.2.3.4" in err and pacs.password not in err


def test_a_series_with_a_missing_slice_fails_alone_naming_it(pacs, synth, tmp_path):
    import pydicom
    import requests

    from digits_core.datasets import create_dataset, open_dataset
    from digits_data_volumes.geometry import read_series

    victim = _series_uid(pacs, tmp_path, "heart_002")
    _, ordered = read_series(synth.dicom / "heart_002")
    middle = str(pydicom.dcmread(ordered[5].path, stop_before_pixels=True).SOPInstanceUID)
    auth = (pacs.username, pacs.password)
    found = requests.post(
        f"{pacs.url}/tools/find", json={"Level": "Instance", "Query": {"SOPInstanceUID": middle}}, auth=auth, timeout=10
    ).json()
    requests.delete(f"{pacs.url}/instances/{found[0]}", auth=auth, timeout=10).raise_for_status()
    try:
        job = create_dataset(
            "dicomweb-volumes",
            {
                "server_url": pacs.dicomweb_url,
                "username": pacs.username,
                "password": pacs.password,
                "cache_folder": str(tmp_path / "c"),
                "pct_val": 0,
            },
            jobs_dir=tmp_path / "jobs",
            workers=1,
            max_errors=1,
        )
        errors = [str(e) for e in open_dataset(job.id, tmp_path / "jobs").errors()]
        assert len(errors) == 1 and victim in errors[0]
        assert "1 missing slice(s)" in errors[0], errors[0]
    finally:
        pacs.upload(synth.dicom / "heart_002")  # put it back
