"""Active-learning pools of volumes from a PACS (issue 46) against a real Orthanc (127.0.0.1, authentication on).

The synthetic cardiac volumes (:mod:`digits_data_volumes.synth`) go up as DICOM series, one with its ground truth as
a DICOM-SEG (a series that is not an image). ``digits label pool --volumes`` lists one candidate per image series;
the session's ``unet3d`` scores each volume (read over WADO-RS and assembled by the ``dicom-series`` code); the
proposals are multi-frame DICOM-SEGs referencing the series, equal voxel for voxel to ``digits infer`` on the
same series; the review API shows a volume by slice and stores each accepted version as a new SEG series (every
version kept, the edit read back by highdicom); the listing then leaves out exactly the series DIGITS segmented.
"""

from __future__ import annotations

import io
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

CLASSES = "background,left atrium"


@pytest.fixture(scope="module")
def pacs(synth, tmp_path_factory):
    from digits_data_volumes.synth import write_seg_labels

    (truth, *_) = write_seg_labels(synth, tmp_path_factory.mktemp("seg"))
    with OrthancServer(tmp_path_factory.mktemp("orthanc")) as server:
        server.upload(synth.dicom)
        server.upload(truth)  # not ours: its series stays a candidate, the SEG series itself is no image
        yield server


@pytest.fixture
def env(pacs, monkeypatch, tmp_path):
    monkeypatch.setenv("DIGITS_DICOMWEB_SERVERS", f"pacs={pacs.dicomweb_url}")
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", pacs.password)
    monkeypatch.setenv("DIGITS_DICOMWEB_CACHE", str(tmp_path / "cache"))


def _source(pacs, cache):
    from digits_data_dicomweb.source import DicomWebSource

    return DicomWebSource(pacs.dicomweb_url, username=pacs.username, password=pacs.password, cache_dir=cache)


def _seg_stack(pacs, tmp_path, where, series):
    """A SEG read back from Orthanc by highdicom, as a slice stack in the series' order along the normal."""
    import highdicom as hd

    from digits_data_dicomweb.source import InstanceRef
    from digits_data_volumes.pool_volumes import series_files

    fresh = _source(pacs, tmp_path / "readback")
    seg = hd.seg.Segmentation.from_dataset(fresh.retrieve(InstanceRef("", where["study"], where["series"],
                                                                     where["sop"], "SEG", 0, "")))  # fmt: skip
    files, _ = series_files(fresh, series)
    sops = [files[path] for path in _ordered(fresh, series)]
    pixels = seg.get_pixels_by_source_instance(sops, combine_segments=True, skip_overlap_checks=True)
    return seg, np.asarray(pixels, np.uint8)


def _ordered(source, series):
    """The cached files of a series' slices along the normal (the dicom-series order)."""
    from digits_data_volumes.geometry import order_series, read_slice_info
    from digits_data_volumes.pool_volumes import series_files

    files, _ = series_files(source, series)
    return [s.path for s in order_series([read_slice_info(p) for p in files], "s")[0]]


def _runs(mask):
    flat = mask.ravel()
    starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
    counts = np.diff(np.r_[starts, flat.size])
    return [int(v) for pair in zip(flat[starts], counts) for v in pair]


def test_a_pacs_pool_of_volumes_scored_proposed_as_segs_and_reviewed_by_slice(
    pacs, env, trained, synth, tmp_path, capsys
):
    import pydicom
    from PIL import Image

    from digits_core.cli import main
    from digits_core.engine.volume_infer import infer_volume
    from digits_core.labeling import load_pool, propose, score_pool
    from digits_core.labeling.jobs import model_problem
    from digits_core.web import create_app
    from digits_data_dicomweb.source import StudyQuery
    from digits_data_volumes.pacs import DicomWebVolumesIngestion

    jobs, _, model = trained
    source = _source(pacs, tmp_path / "q")
    series = source.find_series(StudyQuery())
    images = sorted(s.series for s in series if s.modality == "MR")
    seg_series = next(s.series for s in series if s.modality == "SEG")
    base = ["--jobs-dir", str(jobs), "label", "pool", "--dicomweb-server", "pacs", "--username", pacs.username]

    assert main([*base, "--volumes", "--series", seg_series]) != 0  # a SEG is no volume: refused, named
    assert f"series {seg_series} (SEG" in capsys.readouterr().err
    assert main([*base, "--volumes", "--classes", CLASSES, "--name", "vols", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    pool = load_pool(made["id"], jobs)
    record = pool.record()
    assert record["dimensions"] == 3 and record["source"]["plugin"] == "dicomweb-volumes"
    assert sorted(c["source"]["series"] for c in pool.candidates()) == images  # one candidate per image series
    assert any(seg_series in line and "not an image series" in line for line in made["listing"]["skipped"])

    assert model_problem(pool, model.name) is None  # the web's run check takes a volume model for it
    scored = score_pool(pool, model.name, "entropy", jobs_dir=jobs)
    assert scored.scored == len(images) and scored.skipped == []
    scores = [c["score"] for c in pool.candidates()]
    assert len(set(scores)) == len(images) and all(s > 0 for s in scores)  # one score per volume
    proposed = propose(pool, model.name, 2, jobs_dir=jobs)
    assert len(proposed) == 2
    first = pool.candidate(proposed[0])
    assert first["score"] == max(scores)
    seg, stack = _seg_stack(pacs, tmp_path, first["proposal"], first["source"])
    assert str(seg.SeriesDescription) == f"DIGITS proposal by model {model.name}"
    assert {uid for _, uid, _ in seg.get_source_image_uids()} == {first["source"]["series"]}  # the series, whole
    assert int(seg.NumberOfFrames) == stack.shape[0] == 12
    (inferred,) = infer_volume(model.name, ["dicomweb:" + first["source"]["series"]], jobs_dir=jobs,
                               form_data={"dicomweb_server": "pacs", "dicomweb_username": pacs.username})  # fmt: skip
    assert inferred.label.any()
    assert np.array_equal(stack, np.transpose(inferred.label, (2, 1, 0)))  # the model's segmentation, voxel for voxel

    volume = DicomWebVolumesIngestion.pool_image(record["source"], first["source"])
    assert np.array_equal(volume, np.stack([pydicom.dcmread(p).pixel_array for p in _ordered(source, first["source"])]))

    app = create_app(jobs, start_scheduler=False, testing=True, secret_key="k")
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    nxt = client.post(f"/api/pools/{pool.id}/review/next", json={}).get_json()
    assert nxt["candidate"] == first["id"] and nxt["kind"] == "volume" and nxt["shape"] == list(stack.shape)
    runs = nxt["label"]["runs"]
    shown = np.repeat(runs[0::2], runs[1::2]).reshape(stack.shape)
    assert np.array_equal(shown, stack)  # the proposal, as the page draws it
    png = client.get(f"/pools/{pool.id}/candidates/{first['id']}/image.png?slice=5")
    assert png.status_code == 200 and Image.open(io.BytesIO(png.data)).size == (stack.shape[2], stack.shape[1])
    assert client.get(f"/pools/{pool.id}/candidates/{first['id']}/image.png?slice=12").status_code == 400

    edited = stack.copy()
    edited[5, 2:6, 2:6] = 1  # a brush stroke on slice 5
    url = f"/api/pools/{pool.id}/candidates/{first['id']}/review"
    mask = {"encoding": "rle", "shape": list(stack.shape), "runs": _runs(edited)}
    answer = client.post(url, json={"action": "accept", "base_version": 0, "mask": mask})
    assert answer.status_code == 201, answer.get_data(as_text=True)
    stale = client.post(url, json={"action": "accept", "base_version": 0, "mask": mask})
    assert stale.status_code == 409  # a second save over version 0: told, nothing stored
    cand = pool.candidate(first["id"])
    assert cand["state"] == "accepted" and [v["version"] for v in cand["labels"]] == [1]
    label, read = _seg_stack(pacs, tmp_path, cand["labels"][0], first["source"])
    assert str(label.SeriesDescription) == "DIGITS label v1 by local"
    assert np.array_equal(read, edited)  # the edit is in Orthanc, read back by highdicom
    again = client.post(url, json={"action": "accept", "base_version": 1,
                                   "mask": {**mask, "runs": _runs(stack)}})  # fmt: skip
    assert again.status_code == 201, again.get_data(as_text=True)
    versions = pool.candidate(first["id"])["labels"]
    assert [v["version"] for v in versions] == [1, 2] and versions[0]["series"] != versions[1]["series"]
    assert np.array_equal(_seg_stack(pacs, tmp_path, versions[0], first["source"])[1], edited)  # v1 kept

    assert main([*base, "--volumes", "--json"]) == 0  # the series DIGITS segmented are left out, the rest listed
    relisted = load_pool(json.loads(capsys.readouterr().out)["id"], jobs)
    assert sorted(c["source"]["series"] for c in relisted.candidates()) == sorted(
        set(images) - {pool.candidate(cid)["source"]["series"] for cid in proposed}
    )


def test_a_round_on_a_pacs_pool_of_volumes_retrains_on_the_accepted_label_segs(pacs, env, trained, tmp_path):
    """Two series get a reviewed label SEG (the left half of every slice: unlike any proposal) over a proposal;
    the round builds a ``dicomweb-volumes`` dataset of exactly those two series with those labels (resampled to the
    model's spacing: the label's share of voxels is kept), and continues the model from its weights."""
    from digits_core.datasets.volumes import VolumeStageReader
    from digits_core.engine.volume_train import volume_dataset_folder
    from digits_core.labeling import load_pool, propose, run_round, score_pool
    from digits_core.labeling.pacs import create_dicomweb_pool
    from digits_core.web import create_app
    from digits_data_volumes.pacs import DicomWebVolumesIngestion

    jobs, _, model = trained
    pool = create_dicomweb_pool("v", named_server="pacs", username=pacs.username, plugin="dicomweb-volumes",
                                class_labels=CLASSES.split(","), jobs_dir=jobs)  # fmt: skip
    client = create_app(jobs, start_scheduler=False, testing=True, secret_key="k").test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    made = client.post("/api/pools", json={"dicomweb_server": "pacs", "username": pacs.username, "volumes": True})
    assert made.status_code == 201, made.get_data(as_text=True)
    assert load_pool(made.get_json()["id"], jobs).record()["dimensions"] == 3  # the JSON API's door
    wrong = client.post("/api/pools", json={"folder": str(tmp_path), "volumes": True})
    assert wrong.status_code == 400 and str(tmp_path) in wrong.get_data(as_text=True)  # a folder outside the roots

    score_pool(pool, model.name, "entropy", jobs_dir=jobs)
    proposed = propose(pool, model.name, 2, jobs_dir=jobs)
    record = pool.record()
    shares = {}
    for cid in proposed:
        cand = pool.candidate(cid)
        stack = DicomWebVolumesIngestion.review_label(record["source"], cand["source"], cand["proposal"])
        label = np.zeros_like(stack)
        label[:, :, : stack.shape[2] // 2] = 1
        shares[cid] = (float(label.mean()), float(stack.mean()))
        mask = {"encoding": "rle", "shape": list(label.shape), "runs": _runs(label)}
        answer = client.post(f"/api/pools/{pool.id}/candidates/{cid}/review",
                             json={"action": "accept", "base_version": 0, "mask": mask})  # fmt: skip
        assert answer.status_code == 201, answer.get_data(as_text=True)

    result = run_round(pool, model.name, strategy="tta", count=1, epochs=1, val_percent=50, jobs_dir=jobs)
    assert result.scored == len(pool.candidates()) - 2 and len(result.proposed) == 1
    assert result.new_model_id and result.dataset_id
    folder = volume_dataset_folder(result.dataset_id, jobs)
    published = json.loads((folder / "dataset.json").read_text())
    assert (
        published["userdata"]["target_spacing_mm"]
        == json.loads((model / "model.json").read_text())["target_spacing_mm"]
    )
    seen = []
    for stage in ("train", "val"):
        reader = VolumeStageReader(folder / stage)
        try:
            seen += [float(reader.case(i)[1].mean()) for i in range(published["stages"][stage]["count"])]
        finally:
            reader.close()
    assert len(seen) == 2  # the two reviewed series, not the one with a proposal only, not the others
    for share in seen:  # the reviewed label's half, never a proposal's share
        assert share == pytest.approx(0.5, abs=0.06), (share, shares)
    (entry,) = load_pool(pool.id, jobs).record()["rounds"]
    assert entry["new_model_id"] == result.new_model_id and isinstance(entry["val_dice"], float)
    new = json.loads((jobs / result.new_model_id / "model.json").read_text())
    assert new["kind"] == "volume" and new["pretrained"] == str(model / "model.keras")
