"""Fast tests of the dicomweb-segmentation plugin's pieces that need no server."""

from __future__ import annotations

import numpy as np
import pytest

from digits_core import FormValidationError
from digits_core.forms import validate_values
from digits_data_dicomweb.forms import DicomWebDatasetForm, DicomWebInferenceForm, split_list
from digits_data_dicomweb.seg import SegmentationError, SegmentationLabels, _position_groups, build_segmentations
from digits_data_dicomweb.source import DicomWebError, DicomWebSource, StudyQuery, public_url


def test_public_url_drops_credentials():
    assert public_url("http://user:pw@host:8042/dicom-web") == "http://host:8042/dicom-web"


def test_study_query_filters_combine_patients_and_studies():
    query = StudyQuery(modality="MR", date_from="20090101", patient_ids=("A", "B"), study_uids=("1.2",))
    assert query.study_filters() == [
        {"ModalitiesInStudy": "MR", "StudyDate": "20090101-", "PatientID": "A", "StudyInstanceUID": "1.2"},
        {"ModalitiesInStudy": "MR", "StudyDate": "20090101-", "PatientID": "B", "StudyInstanceUID": "1.2"},
    ]
    assert StudyQuery().study_filters() == [{}]


def test_split_list():
    assert split_list(" a, b  c,,") == ("a", "b", "c")


def test_source_rejects_non_http_urls_and_hides_password():
    with pytest.raises(DicomWebError, match="not an http"):
        DicomWebSource("ftp://x/dicom-web")
    source = DicomWebSource("http://127.0.0.1:1/dicom-web", username="u", password="hunter2", cache_dir="/tmp/x")
    assert "hunter2" not in repr(source)


def test_unreachable_server_names_the_url(tmp_path):
    source = DicomWebSource("http://127.0.0.1:9/dicom-web", cache_dir=tmp_path, timeout=2)  # port 9: discard, closed
    with pytest.raises(DicomWebError, match=r"Cannot reach the DICOMweb server http://127.0.0.1:9/dicom-web"):
        source.find_studies(StudyQuery())


def test_dataset_form_checks_fields():
    good = {"server_url": "http://127.0.0.1:8042/dicom-web", "study_uids": "1.2.3, 1.2.4", "date_to": "20100101"}
    values = validate_values(DicomWebDatasetForm, good, "dataset form")
    assert values["pct_val"] == 10 and values["max_parallel"] == 4
    for field, value in (
        ("study_uids", "1.2.x"),
        ("date_to", "2010"),
        ("server_url", "http://u:p@h/dicom-web"),
        ("max_parallel", "0"),
    ):
        with pytest.raises(FormValidationError, match=field):
            validate_values(DicomWebDatasetForm, {**good, field: value}, "dataset form")
    with pytest.raises(FormValidationError, match="dicomweb_series"):
        validate_values(DicomWebInferenceForm, {"dicomweb_series": "1.2 1.3"}, "inference form")


def _image(sop: str, position):
    from pydicom.dataset import Dataset

    ds = Dataset()
    ds.SOPInstanceUID = sop
    ds.ImagePositionPatient = list(position)
    return ds


def test_cine_phases_at_one_position_go_to_separate_segs():
    images = [_image("1", (0, 0, 0)), _image("2", (0, 0, 0)), _image("3", (0, 0, 10)), _image("4", (0, 0, 10))]
    assert _position_groups(images) == [[0, 2], [1, 3]]


def test_build_segmentations_checks_masks():
    images = [_image("1", (0, 0, 0))]
    with pytest.raises(SegmentationError, match="one H x W mask per source"):
        build_segmentations(images, np.zeros((2, 4, 4)), ["background", "x"])
    with pytest.raises(SegmentationError, match=r"0\.\.1"):
        build_segmentations(images, np.full((1, 4, 4), 2), ["background", "x"])


def test_seg_round_trip_in_memory():
    """A SEG written from masks on real pydicom MR images gives back the same label maps."""
    import pydicom
    from pydicom.data import get_testdata_file
    from pydicom.uid import generate_uid

    base = pydicom.dcmread(get_testdata_file("MR_small.dcm"))
    images = []
    for k in range(2):
        ds = pydicom.dcmread(get_testdata_file("MR_small.dcm"))
        ds.SOPInstanceUID = generate_uid()
        ds.ImagePositionPatient = [0, 0, 5.0 * k]
        images.append(ds)
    masks = np.zeros((2, base.Rows, base.Columns), np.uint8)
    masks[0, 10:20, 10:30] = 1
    masks[1, 30:40, 5:15] = 2
    segs = build_segmentations(images, masks, ["background", "a", "b"])
    assert len(segs) == 1 and segs[0].Modality == "SEG"
    labels = SegmentationLabels(segs[0])
    assert labels.class_labels == ["background", "a", "b"]
    for image, mask in zip(images, masks):
        np.testing.assert_array_equal(labels.label_map(image.SOPInstanceUID), mask)
    with pytest.raises(SegmentationError, match="not SEG"):
        SegmentationLabels(base)
