"""PACS pools judged per series, and proposals told from labels (issue 46), against a real Orthanc on 127.0.0.1.

Synthetic cardiac MR studies (the plugin's generator: per study a short-axis cine series with ground-truth SEGs,
a long-axis decoy and a localizer) are uploaded to Orthanc. A DIGITS proposal SEG on one study's short-axis series
leaves out that series only (read from the SEG's WADO-RS metadata), not the study's other series; past the cap on
metadata reads a study is left out whole and the listing says so. The ``dicomweb-segmentation`` dataset reads
accepted labels only: a proposal labels nothing, a reviewer's newest label version wins over older ones and over
the ground truth.
"""

from __future__ import annotations

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

CLASSES = ["background", "left ventricle"]


@pytest.fixture(scope="module")
def pacs(tmp_path_factory):
    import pydicom

    from digits_data_dicomweb.seg import SegmentationLabels
    from digits_data_dicomweb.source import DicomWebSource, StudyQuery
    from digits_data_dicomweb.synth import SEG_DIR, generate

    root = tmp_path_factory.mktemp("pacs-series")
    result, segs = generate(root, cases=2, size=32, slices=1)
    contoured = {sop for path in segs for sop in SegmentationLabels(pydicom.dcmread(path)).source_sop_uids}
    with OrthancServer(tmp_path_factory.mktemp("orthanc")) as server:
        server.upload(result.image_folder)
        server.upload(root / SEG_DIR)
        source = DicomWebSource(
            server.dicomweb_url, username=server.username, password=server.password, cache_dir=root / "q"
        )
        series = source.find_series(StudyQuery())
        yield server, source, series, contoured


def _cine(source, series, study):
    """The study's short-axis cine series (the one the ground truth segments) and its instances."""
    images = [s for s in series if s.study == study and s.modality == "MR"]
    cine = max(images, key=lambda s: len(source.series_instances(s)))
    return cine, source.series_instances(cine)


def _where(ref):
    return {"study": ref.study, "series": ref.series, "sop": ref.sop}


def test_a_digits_seg_leaves_out_the_series_it_references_not_its_study_and_the_reads_are_capped(pacs):
    from digits_data_dicomweb.pools import list_candidates, store_proposal
    from digits_data_dicomweb.review import store_label
    from digits_data_dicomweb.source import StudyQuery

    server, source, series, _ = pacs
    study_a, study_b = sorted({s.study for s in series})
    cine_a, instances_a = _cine(source, series, study_a)
    cine_b, instances_b = _cine(source, series, study_b)
    store_proposal(source, _where(instances_a[0]), np.zeros((32, 32), np.uint8), CLASSES, model_id="m1")
    store_label(source, _where(instances_b[0]), np.zeros((32, 32), np.uint8), CLASSES, version=1, user="ann")
    fresh = source.find_series(StudyQuery())

    found = list_candidates(source, {"studies": [study_a]})
    others = [s for s in fresh if s.study == study_a and s.modality == "MR" and s.series != cine_a.series]
    assert others  # the long-axis decoy and the localizer
    want = {r.sop for s in others for r in source.series_instances(s)}
    assert {c["sop"] for c in found["candidates"]} == want  # the study's other series stay candidates
    assert any(cine_a.series in line and "DIGITS proposal by model m1" in line for line in found["skipped"])
    assert found["seg_reads"] == 1

    capped = list_candidates(source, {"seg_reads": 1})
    assert capped["seg_reads"] == 1  # two SEG series of DIGITS Core on the server, one read
    assert any("1 SEG series of DIGITS Core not read" in line and "1 study left out whole" in line
               for line in capped["skipped"])  # fmt: skip
    studies = {c["study"] for c in capped["candidates"]}
    assert len(studies) == 1  # one study judged per series, the other left out whole
    segmented = cine_a.series if studies.pop() == study_a else cine_b.series
    assert segmented not in {c["series"] for c in capped["candidates"]}
    full = list_candidates(source, {})
    assert {c["study"] for c in full["candidates"]} == {study_a, study_b} and full["seg_reads"] == 2


def test_the_segmentation_dataset_reads_accepted_labels_only_the_newest_version_first(pacs, tmp_path):
    from digits_core import TRAIN, VAL
    from digits_data_dicomweb.ingestion import DicomWebSegmentationIngestion
    from digits_data_dicomweb.pools import store_proposal
    from digits_data_dicomweb.review import store_label

    server, source, series, contoured = pacs
    study = sorted({s.study for s in series})[0]
    _, instances = _cine(source, series, study)
    free = [r for r in instances if r.sop not in contoured]  # phases the ground truth leaves unlabelled
    truth = next(r for r in instances if r.sop in contoured)
    square = np.zeros((32, 32), np.uint8)
    square[4:12, 4:12] = 1
    v1, v2 = square.copy(), np.roll(square, 9, axis=1)
    store_proposal(source, _where(free[1]), square, CLASSES, model_id="m2")  # a proposal: labels nothing
    store_label(source, _where(free[2]), v1, CLASSES, version=1, user="ann")
    store_label(source, _where(free[2]), v2, CLASSES, version=2, user="bob")  # the newest version
    store_label(source, _where(truth), v1, CLASSES, version=1, user="ann")  # a reviewer corrected the truth

    plugin = DicomWebSegmentationIngestion(
        server_url=server.dicomweb_url, username=server.username, password=server.password,
        cache_folder=str(tmp_path / "cache"), pct_val=0, seed=0, study_uids=study,
    )  # fmt: skip
    entries = {e.image.sop: e for stage in (TRAIN, VAL) for e in plugin.itemize_entries(stage)}
    assert free[1].sop not in entries  # the proposal's image is no labelled image
    assert any("DIGITS proposal by model m2" in line for line in plugin.userdata["skipped_studies"])
    assert np.array_equal(plugin.encode_entry(entries[free[2].sop])[1], v2)
    assert np.array_equal(plugin.encode_entry(entries[truth.sop])[1], v1)
    assert contoured & set(entries)  # the rest of the ground truth still labels its images
