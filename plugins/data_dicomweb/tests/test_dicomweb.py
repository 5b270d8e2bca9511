"""The dicomweb-segmentation plugin against a real Orthanc (Debian's orthanc + orthanc-dicomweb) on 127.0.0.1.

One Orthanc per module, loaded with synthetic cardiac MR studies (real DICOM) and their DICOM-SEG ground
truth, plus one study without SEG. Orthanc runs with authentication on and remote access off, and the
loopback shim keeps it on 127.0.0.1 (asserted).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from digits_core import FormValidationError
from digits_core.datasets import create_dataset, open_dataset
from digits_data_dicomweb.orthanc import OrthancServer, orthanc_available
from digits_data_dicomweb.seg import SegmentationLabels, build_segmentations
from digits_data_dicomweb.source import DicomWebError, DicomWebSource, StudyQuery
from digits_data_dicomweb.synth import generate

# Without Orthanc the module skips locally; under CI=true (where `make test` installs it) it fails instead.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not orthanc_available() and not os.environ.get("CI"),
        reason="Orthanc is not installed (apt-get install orthanc orthanc-dicomweb)",
    ),
]

CASES = 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pacs-data")
    result, segs = generate(root, cases=CASES + 1, size=32, slices=1)
    return root, result, segs


@pytest.fixture(scope="module")
def pacs(data, tmp_path_factory):
    root, result, segs = data
    no_seg_case = sorted(result.cases)[-1]  # this patient's study goes up without its SEG
    with OrthancServer(tmp_path_factory.mktemp("orthanc")) as server:
        server.upload(result.image_folder)
        server.upload(*[s for s in segs if not s.name.startswith(no_seg_case + "-")])
        server.no_seg_case = no_seg_case
        yield server


def _form(pacs, cache, **extra):
    return {
        "server_url": pacs.dicomweb_url,
        "username": pacs.username,
        "password": pacs.password,
        "cache_folder": str(cache),
        "pct_val": 25,
        "seed": 0,
        **extra,
    }


def _listening_addresses(port: int) -> set[str]:
    """IPv4/IPv6 addresses with a socket listening on ``port`` (from /proc/net/tcp*)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                found.add(address)
    return found


def test_orthanc_listens_on_loopback_only(pacs):
    import requests

    assert _listening_addresses(pacs.port) == {"0100007F"}  # 127.0.0.1, nothing else
    assert requests.get(f"{pacs.url}/system", auth=(pacs.username, pacs.password), timeout=5).ok
    assert requests.get(f"{pacs.url}/system", timeout=5).status_code == 401  # authentication is on


def test_query_fetch_and_cache_hit(pacs, tmp_path):
    source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=tmp_path)
    refs = source.find_instances(StudyQuery(modality="MR", patient_ids=("SC-HF-I-1",)))
    assert {r.modality for r in refs} == {"MR", "SEG"}
    assert {r.patient for r in refs} == {"SC-HF-I-1"}
    assert sum(r.modality == "SEG" for r in refs) == 2  # end-diastole and end-systole
    images = [r for r in refs if r.modality != "SEG"]
    assert source.fetch_all(images) == {}
    assert all(source.is_cached(r) for r in images)
    # a cache hit never asks the server: with a wrong password the cached instance still reads
    offline = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password="wrong", cache_dir=tmp_path)
    assert offline.retrieve(images[0]).SOPInstanceUID == images[0].sop
    assert not list(source.cache_dir.glob(".*.part"))


def test_wrong_password_is_a_clear_error_without_secrets(pacs, tmp_path):
    source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password="not-the-password", cache_dir=tmp_path)
    with pytest.raises(DicomWebError) as info:
        source.find_studies(StudyQuery())
    message = str(info.value)
    assert "refused the credentials (HTTP 401)" in message and pacs.dicomweb_url in message
    assert "not-the-password" not in message and "not-the-password" not in repr(source)


def test_form_rejects_credentials_in_url_and_bad_dates(pacs, tmp_path):
    url = pacs.dicomweb_url.replace("http://", f"http://{pacs.username}:{pacs.password}@")
    with pytest.raises(FormValidationError, match="server_url"):
        create_dataset(
            "dicomweb-segmentation", {**_form(pacs, tmp_path), "server_url": url}, jobs_dir=tmp_path / "jobs"
        )
    with pytest.raises(FormValidationError, match="date_from"):
        create_dataset(
            "dicomweb-segmentation", {**_form(pacs, tmp_path), "date_from": "2009-01-01"}, jobs_dir=tmp_path / "jobs"
        )


def test_dataset_over_dicomweb_equals_the_one_from_files(pacs, data, tmp_path):
    root, result, _ = data
    jobs = tmp_path / "jobs"
    patients = ",".join(sorted(result.cases)[:CASES])
    remote = create_dataset(
        "dicomweb-segmentation", _form(pacs, tmp_path / "cache", patient_ids=patients), jobs_dir=jobs, workers=1
    )
    # the same patients from the files on disk
    contours = root / "Sunnybrook Cardiac MR Database ContoursPart3" / "TrainingDataContours"
    for case_dir in contours.iterdir():
        if case_dir.name.replace("-0", "-") not in patients.split(","):
            import shutil

            shutil.rmtree(case_dir)
    local = create_dataset(
        "image-sunnybrook",
        {
            "image_folder": str(result.image_folder),
            "contour_folder": str(root / "Sunnybrook Cardiac MR Database ContoursPart3"),
            "pct_val": 25,
            "seed": 0,
        },
        jobs_dir=jobs,
        workers=1,
    )
    a, b = open_dataset(remote.id, jobs), open_dataset(local.id, jobs)
    assert a.userdata["split"] == b.userdata["split"]
    assert a.class_labels == b.class_labels == ["background", "left ventricle"]
    for stage in ("train", "val"):
        assert a.count(stage) == b.count(stage) > 0
        fa, la = a.read_all(stage)
        fb, lb = b.read_all(stage)
        assert fa.dtype == fb.dtype == np.uint16
        np.testing.assert_array_equal(fa, fb)
        np.testing.assert_array_equal(la, lb)
        assert la.max() == 1  # the left ventricle is there
    # the password never reached the job folder
    for path in (jobs / remote.id).rglob("*.json"):
        assert pacs.password not in path.read_text()
    # the study without SEG was skipped and said so
    skipped = " ".join(a.userdata["skipped_studies"])
    assert skipped == "" or "has no DICOM-SEG" in skipped


def test_study_without_seg_is_skipped_with_a_reason(pacs, tmp_path):
    job = create_dataset(
        "dicomweb-segmentation", _form(pacs, tmp_path / "cache", pct_val=0), jobs_dir=tmp_path / "jobs", workers=1
    )
    ds = open_dataset(job.id, tmp_path / "jobs")
    assert any(pacs.no_seg_case in s and "has no DICOM-SEG" in s for s in ds.userdata["skipped_studies"])
    assert pacs.no_seg_case not in ds.userdata["split"]["train"]
    assert len(ds.userdata["split"]["train"]) == CASES


def test_an_instance_the_server_refuses_goes_to_the_errors_report(pacs, data, tmp_path):
    import requests

    _, result, _ = data
    source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=tmp_path / "c")
    patient = sorted(result.cases)[0]
    refs = source.find_instances(StudyQuery(patient_ids=(patient,)))
    seg = SegmentationLabels(source.retrieve(next(r for r in refs if r.modality == "SEG")))
    victim = seg.source_sop_uids[0]
    # delete that image from the server (its SEG still references it)
    found = requests.post(
        f"{pacs.url}/tools/find",
        json={"Level": "Instance", "Query": {"SOPInstanceUID": victim}},
        auth=(pacs.username, pacs.password),
        timeout=10,
    ).json()
    assert len(found) == 1
    requests.delete(
        f"{pacs.url}/instances/{found[0]}", auth=(pacs.username, pacs.password), timeout=10
    ).raise_for_status()
    try:
        job = create_dataset(
            "dicomweb-segmentation",
            _form(pacs, tmp_path / "cache", pct_val=0, patient_ids=patient),
            jobs_dir=tmp_path / "jobs",
            workers=1,
            max_errors=5,
        )
        ds = open_dataset(job.id, tmp_path / "jobs")
        errors = ds.errors()
        assert len(errors) == 1
        text = str(errors[0])
        assert victim in text and "HTTP 404" in text
        assert ds.count("train") == len(seg.source_sop_uids) * 2 - 1  # both SEGs' images but the missing one
    finally:
        pacs.upload(result.image_folder)  # put it back for the other tests


def test_seg_round_trip_through_stow(pacs, data, tmp_path):
    import pydicom

    _, result, _ = data
    patient = sorted(result.cases)[1]
    source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=tmp_path)
    refs = [r for r in source.find_instances(StudyQuery(patient_ids=(patient,))) if r.modality == "MR"][:3]
    images = [source.retrieve(r) for r in refs]
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 3, size=(len(images), 32, 32)).astype(np.uint8)
    segs = build_segmentations(images, masks, ["background", "blood", "muscle"], series_number=9100)
    source.store(segs)
    series = segs[0].SeriesInstanceUID
    stored = [r for r in source.find_instances(StudyQuery(patient_ids=(patient,))) if r.series == series]
    assert len(stored) == len(segs)
    fresh = DicomWebSource(
        pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=tmp_path / "fresh"
    )
    back = [SegmentationLabels(fresh.retrieve(r)) for r in stored]
    assert back[0].class_labels == ["background", "blood", "muscle"]
    for image, mask in zip(images, masks):
        holder = next(b for b in back if image.SOPInstanceUID in b.source_sop_uids)
        np.testing.assert_array_equal(holder.label_map(image.SOPInstanceUID), mask)
    assert isinstance(images[0], pydicom.Dataset)


def test_train_from_the_pacs_and_store_predictions_as_seg(pacs, data, tmp_path):
    """Dataset from Orthanc -> default U-Net -> `digits infer --dicomweb-series UID --store` -> SEG read back."""
    import subprocess
    import sys

    from digits_core.engine import train
    from digits_core.inference import infer

    _, result, _ = data
    jobs = tmp_path / "jobs"
    patients = ",".join(sorted(result.cases)[:CASES])
    dataset = create_dataset(
        "dicomweb-segmentation", _form(pacs, tmp_path / "cache", patient_ids=patients), jobs_dir=jobs, workers=1
    )
    model = train(dataset.id, jobs_dir=jobs, epochs=2, batch_size=4)
    assert model.status == "Done"
    # a validation patient's image series
    ds = open_dataset(dataset.id, jobs)
    val_patient = ds.userdata["split"]["val"][0]
    source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=tmp_path / "q")
    series = next(
        s
        for s in source.find_series(StudyQuery(patient_ids=(val_patient,)))
        if s.series_description == "FIESTA CINE SAX"
    )
    # the reference prediction through the Python API (nothing stored)
    reference = infer(
        model.id, form_data={"dicomweb_series": series.series, "dicomweb_password": pacs.password}, jobs_dir=jobs
    )
    assert reference.notes == [] and len(reference.samples) == 20  # 1 slice x 20 phases
    expected = {s.input_id: np.argmax(s.output, axis=-1).astype(np.uint8) for s in reference.samples}
    assert any(m.any() for m in expected.values()), "the model predicts some left ventricle"
    # the CLI stores the prediction; the password comes from the environment, never from the command line
    env = {**os.environ, "DIGITS_DICOMWEB_PASSWORD": pacs.password, "DIGITS_JOBS_DIR": str(jobs)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "digits_core",
            "infer",
            "--model",
            model.id,
            "--dicomweb-series",
            series.series,
            "--store",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Stored" in done.stderr and "DICOM-SEG" in done.stderr
    seg_series = [
        s
        for s in source.find_series(StudyQuery(patient_ids=(val_patient,)))
        if s.modality == "SEG" and s.series_description.startswith("DIGITS Core prediction")
    ]
    assert len(seg_series) == 1
    stored = [
        r
        for r in source.find_instances(StudyQuery(patient_ids=(val_patient,)), modality="SEG")
        if r.series == seg_series[0].series
    ]
    back = [SegmentationLabels(source.retrieve(r)) for r in stored]
    assert back[0].class_labels == ["background", "left ventricle"]
    sops = {sop for b in back for sop in b.source_sop_uids}
    assert len(sops) == 20
    for input_id, mask in expected.items():
        sop = input_id.split()[1]
        holder = next(b for b in back if sop in b.source_sop_uids)
        np.testing.assert_array_equal(holder.label_map(sop), mask)


@pytest.mark.parametrize("name", ["MR_small_RLE.dcm", "MR_small_implicit.dcm", "CT_small.dcm"])
def test_other_transfer_syntaxes_decode_like_the_local_file(pacs, tmp_path, name):
    """Real pydicom test files (RLE, implicit VR, CT with rescale) through Orthanc decode as the files do."""
    import pydicom
    from pydicom.data import get_testdata_file

    from digits_data_sunnybrook.dicom import dataset_to_image, read_dicom_image

    path = get_testdata_file(name)
    local = pydicom.dcmread(path)
    pacs.upload(path)
    source = DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=tmp_path)
    refs = [
        r
        for r in source.find_instances(StudyQuery(study_uids=(str(local.StudyInstanceUID),)))
        if r.sop == str(local.SOPInstanceUID)
    ]
    assert len(refs) == 1
    fetched = source.retrieve(refs[0])
    np.testing.assert_array_equal(dataset_to_image(fetched, name=str(refs[0])), read_dicom_image(path))
