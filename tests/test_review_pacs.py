"""Reviewing a PACS pool (issue 46 item 3) against a real Orthanc (Debian's orthanc + orthanc-dicomweb, 127.0.0.1).

The pool's candidates are synthetic cardiac MR images on the server, their proposals DICOM-SEG objects there.
A reviewer draws a stroke in headless Chromium on a real ``digits serve``; the corrected label is a new SEG
series in Orthanc, read back with highdicom with the stroke in it. A stale save of the same candidate answers
409 and stores no SEG: the first version stays the only one. The first reviewer goes on to the next candidate and
corrects it too; then a round retrains a U-Net the engine trains on exactly those two label SEGs, read back from
Orthanc (issue 46's Done-when: the next round's model trains on the browser's edit).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from digits_data_dicomweb.orthanc import OrthancServer, orthanc_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(
        not orthanc_available() and not os.environ.get("CI"),
        reason="Orthanc is not installed (apt-get install orthanc orthanc-dicomweb)",
    ),
]

CLASSES = ["background", "left ventricle"]


@pytest.fixture(scope="module")
def pacs(tmp_path_factory):
    from digits_data_dicomweb.synth import generate

    root = tmp_path_factory.mktemp("pacs-data")
    result, _ = generate(root, cases=2, size=32, slices=1)
    with OrthancServer(tmp_path_factory.mktemp("orthanc")) as server:
        server.upload(result.image_folder)
        yield server


def _source(pacs, cache):
    from digits_data_dicomweb.source import DicomWebSource

    return DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=cache)


@pytest.fixture
def pool(pacs, tmp_path):
    """A DICOMweb pool of one image of each synthetic study, each with a proposal SEG stored in Orthanc."""
    from digits_core.labeling import create_pool
    from digits_data_dicomweb.seg import build_segmentations
    from digits_data_dicomweb.source import StudyQuery

    source = _source(pacs, tmp_path / "setup-cache")
    first_series = {}
    for series in sorted(source.find_series(StudyQuery())):
        if series.modality == "MR":
            first_series.setdefault(series.study, series)
    images = [source.series_instances(s)[0] for s in first_series.values()]
    assert len(images) == 2
    pool = create_pool(
        "pacs hearts",
        {"kind": "dicomweb", "named_server": "pacs", "username": pacs.username, "cache_folder": str(tmp_path / "c")},
        [{"study": r.study, "series": r.series, "sop": r.sop} for r in images],
        class_labels=CLASSES,
        jobs_dir=tmp_path / "jobs",
    )
    for score, ref in zip((0.9, 0.1), images):
        dataset = source.retrieve(ref)
        proposal = np.zeros((int(dataset.Rows), int(dataset.Columns)), np.uint8)
        proposal[4:8, 4:8] = 1
        (seg,) = build_segmentations([dataset], proposal[None], CLASSES, series_description="DIGITS proposal")
        source.store([seg])
        cand = next(c for c in pool.candidates() if c["source"]["sop"] == ref.sop)
        where = {"study": seg.StudyInstanceUID, "series": seg.SeriesInstanceUID, "sop": seg.SOPInstanceUID}
        pool.record_proposal(cand["id"], {**where, "model_id": "m1"})
        pool.record_scores({cand["id"]: score}, "entropy")
    return pool, source


def _labels_back(pacs, tmp_path, entry, sop):
    """The label map of a stored label SEG, read from Orthanc with highdicom, and its series description."""
    import highdicom as hd

    from digits_data_dicomweb.source import InstanceRef

    fresh = _source(pacs, tmp_path / "readback")
    seg = hd.seg.Segmentation.from_dataset(
        fresh.retrieve(InstanceRef("", entry["study"], entry["series"], entry["sop"], "SEG", 0, ""))
    )
    pixels = seg.get_pixels_by_source_instance(source_sop_instance_uids=[sop], combine_segments=True)
    return np.asarray(pixels[0]), str(seg.SeriesDescription)


def _seg_series(pacs, tmp_path, study) -> set[str]:
    from digits_data_dicomweb.source import StudyQuery

    found = _source(pacs, tmp_path / "query").find_series(StudyQuery(study_uids=(study,)))
    return {s.series for s in found if s.modality == "SEG"}


def _open(chromium, server, pool, cid):
    page = chromium.new_page(viewport={"width": 1000, "height": 900})
    page.goto(server.url + f"/pools/{pool.id}/review")
    page.locator(f'#review[data-candidate="{cid}"][data-ready="1"]').wait_for(timeout=30_000)
    return page


def _stroke(page, points, size_steps=4):
    box = page.locator("#review-canvas").bounding_box()
    width = int(page.get_attribute("#review-canvas", "width"))
    height = int(page.get_attribute("#review-canvas", "height"))

    def at(x, y):
        return box["x"] + (x + 0.5) * box["width"] / width, box["y"] + (y + 0.5) * box["height"] / height

    for _ in range(size_steps):
        page.keyboard.press("[")  # brush 5 -> 1 px
    page.mouse.move(*at(*points[0]))
    page.mouse.down()
    for point in points[1:]:
        page.mouse.move(*at(*point))
    page.mouse.up()


def _unet(jobs):
    """A tiny U-Net the engine trains on synthetic LV images of the pool's size (32 px), in the pool's jobs folder."""
    from synthetic_plugins import SyntheticLV

    from digits_core import registry
    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    registry.register(SyntheticLV)
    try:
        lv = create_dataset("synthetic-lv", {"count": 8, "val_count": 2, "size": 32}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticLV)
    return train(lv.id, "unet", name="unet", epochs=1, batch_size=8, jobs_dir=jobs,
                 network_params={"filters": 4, "depth": 2, "dropout": 0.3})  # fmt: skip


def test_a_stroke_drawn_in_the_browser_is_a_new_seg_in_orthanc_and_a_stale_save_stores_nothing(
    chromium, pacs, pool, tmp_path, monkeypatch
):
    from live_server import running_server
    from PIL import Image

    from digits_core.inference.model import load_inference_model
    from digits_core.jobs import JobStatus, JobStore
    from digits_core.labeling import run_round

    pool, _ = pool
    second = min(pool.candidates(), key=lambda c: c["score"])
    first = max(pool.candidates(), key=lambda c: c["score"])
    study = first["source"]["study"]
    before = _seg_series(pacs, tmp_path, study)
    assert before == {first["proposal"]["series"]}
    env = {"DIGITS_DICOMWEB_SERVERS": f"pacs={pacs.dicomweb_url}", "DIGITS_DICOMWEB_PASSWORD": pacs.password}
    with running_server(tmp_path / "jobs", env=env) as server:
        one = _open(chromium, server, pool, first["id"])  # two reviewers open the same proposal (version 0)
        two = _open(chromium, server, pool, first["id"])
        try:
            assert int(one.get_attribute("#review", "data-labelled")) == 16  # the proposal SEG, read from Orthanc
            _stroke(one, [(12, 20), (16, 20), (24, 20)])
            one.keyboard.press("a")
            one.locator(f'#review[data-saved="{first["id"]}:accept:1"]').wait_for(timeout=30_000)
            _stroke(two, [(2, 28), (30, 28)])
            two.keyboard.press("a")
            two.locator('#review[data-error="409"]').wait_for(timeout=30_000)
            assert "version 1 was saved meanwhile by local" in two.inner_text("#review-status")
            assert two.get_attribute("#review", "data-candidate") == first["id"]  # the editor keeps the work
            # the first reviewer's page went on to the next candidate: a stroke there, accepted too
            one.locator(f'#review[data-candidate="{second["id"]}"][data-ready="1"]').wait_for(timeout=30_000)
            _stroke(one, [(26, 2), (26, 10)], size_steps=0)  # the brush is still 1 px
            one.keyboard.press("a")
            one.locator(f'#review[data-saved="{second["id"]}:accept:1"]').wait_for(timeout=30_000)
        finally:
            one.close()
            two.close()

    cand = pool.candidate(first["id"])
    assert cand["state"] == "accepted" and cand["version"] == 1 and len(cand["labels"]) == 1
    entry = cand["labels"][0]
    assert entry["by"] == "local" and "file" not in entry
    assert _seg_series(pacs, tmp_path, study) == before | {entry["series"]}  # one new series; the stale save none
    labels, description = _labels_back(pacs, tmp_path, entry, first["source"]["sop"])
    assert description == "DIGITS label v1 by local"
    assert (labels[20, 12:25] == 1).all()  # the stroke
    assert (labels[4:8, 4:8] == 1).all() and int(labels.sum()) == 16 + 13  # the proposal kept, nothing else
    second_entry = pool.candidate(second["id"])["labels"][0]
    second_labels, _ = _labels_back(pacs, tmp_path, second_entry, second["source"]["sop"])
    assert (second_labels[2:11, 26] == 1).all() and (second_labels[4:8, 4:8] == 1).all()  # stroke and proposal
    assert int(second_labels.sum()) == 16 + 9

    # the next round trains on the labels the browser stored: read back from Orthanc, pixel for pixel
    monkeypatch.setenv("DIGITS_DICOMWEB_SERVERS", env["DIGITS_DICOMWEB_SERVERS"])
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", pacs.password)
    jobs = tmp_path / "jobs"
    net = _unet(jobs)
    result = run_round(pool, net.id, strategy="entropy", count=1, epochs=1, val_percent=50, jobs_dir=jobs)
    assert result.labels == 2 and result.new_model_id
    assert JobStore(jobs).get(result.new_model_id).status is JobStatus.DONE
    folder = pool.path / "rounds" / f"r{result.round}" / "labels"
    assert np.array_equal(np.asarray(Image.open(folder / f"{first['id']}.png")), labels)
    assert np.array_equal(np.asarray(Image.open(folder / f"{second['id']}.png")), second_labels)
    old_w, new_w = (load_inference_model(m, jobs_dir=jobs).model.get_weights() for m in (net.id, result.new_model_id))
    assert any(not np.array_equal(a, b) for a, b in zip(old_w, new_w))  # trained from the snapshot on them
