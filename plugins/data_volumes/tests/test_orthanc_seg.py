"""A volume's DICOM-SEG through a real Orthanc (STOW-RS in, WADO-RS out): highdicom reads it back voxel for voxel."""

from __future__ import annotations

import os

import numpy as np
import pytest

from digits_data_dicomweb.orthanc import OrthancServer, orthanc_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not orthanc_available() and not os.environ.get("CI"),
                       reason="Orthanc is not installed (apt-get install orthanc orthanc-dicomweb)"),
]


def test_volume_seg_round_trips_through_orthanc(synth, tmp_path):
    import highdicom as hd
    import nibabel as nib
    import pydicom

    from digits_data_dicomweb.source import DicomWebSource, StudyQuery
    from digits_data_volumes.results import load_source, to_source, write_results

    series = synth.dicom / "heart_002"
    volume, context = load_source(series)
    truth = nib.as_closest_canonical(nib.load(str(synth.task / "labelsTr" / "heart_002.nii.gz")))
    label = np.swapaxes(np.asanyarray(truth.dataobj), 0, 2)  # canonical D×H×W, the volume's voxels
    ijk = to_source(label, volume.spacing, context)
    files = write_results(ijk, context, tmp_path / "out", ["background", "left atrium"])
    seg = pydicom.dcmread(files[1])
    sop_uids = [str(pydicom.dcmread(p, stop_before_pixels=True).SOPInstanceUID) for p in context["slices"]]
    with OrthancServer(tmp_path / "orthanc") as pacs:
        pacs.upload(series)
        source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password,
                                cache_dir=tmp_path / "cache")
        source.store([seg])
        stored = [r for r in source.find_instances(StudyQuery(patient_ids=("heart_002",)))
                  if r.series == seg.SeriesInstanceUID]
        assert len(stored) == 1  # one multi-frame SEG object for the whole series
        back = hd.seg.Segmentation.from_dataset(source.retrieve(stored[0]))
    assert back.number_of_frames == len(sop_uids) == 12
    frames = back.get_pixels_by_source_instance(sop_uids, combine_segments=True, skip_overlap_checks=True)
    assert np.array_equal(frames, np.transpose(ijk, (2, 1, 0)))  # voxel for voxel, slice by slice
    assert frames.sum() == label.sum() > 0
