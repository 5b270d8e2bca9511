"""Active-learning pools from a PACS (issue 46) against a real Orthanc (Debian's orthanc + orthanc-dicomweb, 127.0.0.1).

Synthetic cardiac MR studies (the plugin's generator, with their ground-truth SEGs) are uploaded to Orthanc. A pool
is made from it over QIDO-RS (JSON API and ``digits label`` CLI), scored by a tiny U-Net the engine trains (images
read over WADO-RS), its proposals stored as DICOM-SEG (STOW-RS) and read back with highdicom; one proposal is
accepted through the review API as proposed, one with an edit (each stored as a label SEG), and a round retrains
the U-Net on exactly those labels (read back from Orthanc). Bad input is named and stores nothing.
"""

from __future__ import annotations

import json
import os
import socket

import numpy as np
import pytest

from digits_core import registry
from digits_data_dicomweb.orthanc import OrthancServer, orthanc_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not orthanc_available() and not os.environ.get("CI"),
        reason="Orthanc is not installed (apt-get install orthanc orthanc-dicomweb)",
    ),
]

CLASSES = ["background", "lv"]


@pytest.fixture(scope="module")
def pacs(tmp_path_factory):
    from digits_data_dicomweb.source import DicomWebSource, StudyQuery
    from digits_data_dicomweb.synth import SEG_DIR, generate

    root = tmp_path_factory.mktemp("pacs-data")
    result, _ = generate(root, cases=2, size=32, slices=1)
    with OrthancServer(tmp_path_factory.mktemp("orthanc")) as server:
        server.upload(result.image_folder)
        server.upload(root / SEG_DIR)  # ground truth: SEG series that are not ours and not images
        source = DicomWebSource(
            server.dicomweb_url, username=server.username, password=server.password, cache_dir=root / "q"
        )
        series = source.find_series(StudyQuery())
        yield server, source, series


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from synthetic_plugins import SyntheticLV

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    jobs = tmp_path_factory.mktemp("pacs-al") / "jobs"
    registry.register(SyntheticLV)
    try:
        lv = create_dataset("synthetic-lv", {"count": 8, "val_count": 2, "size": 32}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticLV)
    net = train(lv.id, "unet", name="unet", epochs=1, batch_size=8, jobs_dir=jobs,
                network_params={"filters": 4, "depth": 2, "dropout": 0.3})  # fmt: skip
    return jobs, net, lv


@pytest.fixture
def env(pacs, monkeypatch, tmp_path):
    server, _, _ = pacs
    monkeypatch.setenv("DIGITS_DICOMWEB_SERVERS", f"pacs={server.dicomweb_url}")
    monkeypatch.setenv("DIGITS_DICOMWEB_PASSWORD", server.password)
    monkeypatch.setenv("DIGITS_DICOMWEB_CACHE", str(tmp_path / "cache"))


def _studies(series):
    return sorted({s.study for s in series})


def _seg(pacs, tmp_path, where):
    """A SEG stored in Orthanc, read back by a fresh client with highdicom."""
    import highdicom as hd

    from digits_data_dicomweb.source import DicomWebSource, InstanceRef

    server, _, _ = pacs
    fresh = DicomWebSource(server.dicomweb_url, username=server.username, password=server.password,
                           cache_dir=tmp_path / "readback")  # fmt: skip
    ref = InstanceRef("", where["study"], where["series"], where["sop"], "SEG", 0, "")
    return hd.seg.Segmentation.from_dataset(fresh.retrieve(ref))


def test_api_pool_from_the_pacs_scored_proposed_as_segs_reviewed_with_an_edit_and_a_round_retrains_on_them(
    pacs, model, env, tmp_path
):
    from PIL import Image

    from digits_core.datasets import open_dataset
    from digits_core.inference.imageio import prepare_image
    from digits_core.inference.model import load_inference_model
    from digits_core.jobs import JobStatus, JobStore
    from digits_core.labeling import load_pool, propose, run_round, score_pool
    from digits_core.labeling.scoring import read_candidate
    from digits_core.web import create_app

    server, source, series = pacs
    jobs, net, _ = model
    study = _studies(series)[0]
    mr = sorted(s for s in series if s.study == study and s.modality == "MR")
    chosen = mr[0].series
    instances = {r.sop for r in source.series_instances(mr[0])}
    app = create_app(jobs, start_scheduler=False, testing=True, secret_key="k")
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]

    typed = client.post("/api/pools", json={"dicomweb": server.dicomweb_url, "username": server.username})
    assert typed.status_code == 400 and "--allow-url" in typed.get_data(as_text=True)  # the outbound rules: loopback
    assert client.get("/api/pools").get_json() == []  # nothing made
    made = client.post("/api/pools", json={"dicomweb_server": "pacs", "username": server.username, "name": "pacs",
                                           "studies": [study], "series": [chosen], "classes": CLASSES})  # fmt: skip
    assert made.status_code == 201, made.get_data(as_text=True)
    pool = load_pool(made.get_json()["id"], jobs)
    record = pool.record()
    assert record["source"]["kind"] == "dicomweb" and record["modality"] == "MR"
    assert "password" not in json.dumps(record["source"])
    assert {c["source"]["sop"] for c in pool.candidates()} == instances  # every image of the series, nothing else

    scored = score_pool(pool, net.id, "entropy", batch_size=4, jobs_dir=jobs)  # images over WADO-RS
    assert scored.scored == len(instances) and scored.skipped == []
    proposed = propose(pool, net.id, 2, jobs_dir=jobs)
    assert len(proposed) == 2
    for cid in proposed:
        cand = pool.candidate(cid)
        assert cand["state"] == "proposed" and "file" not in cand["proposal"]
        seg = _seg(pacs, tmp_path, cand["proposal"])
        assert str(seg.SeriesDescription) == f"DIGITS proposal by model {net.id}"
        assert [sop for *_, sop in seg.get_source_image_uids()] == [cand["source"]["sop"]]  # references its image
        assert str(seg.StudyInstanceUID) == study

    first = pool.queue()[0]
    answer = client.post(f"/api/pools/{pool.id}/candidates/{first['id']}/review",
                         json={"action": "accept", "base_version": 0})  # fmt: skip
    assert answer.status_code == 201, answer.get_data(as_text=True)
    cand = pool.candidate(first["id"])
    assert cand["state"] == "accepted" and cand["version"] == 1
    label = _seg(pacs, tmp_path, cand["labels"][0])
    assert str(label.SeriesDescription) == "DIGITS label v1 by local"
    proposal = _seg(pacs, tmp_path, cand["proposal"])

    def pixels(seg, sop):
        return np.asarray(
            seg.get_pixels_by_source_instance(source_sop_instance_uids=[sop], combine_segments=True)[0], np.uint8
        )

    accepted = {first["id"]: pixels(label, cand["source"]["sop"])}
    assert np.array_equal(accepted[first["id"]], pixels(proposal, cand["source"]["sop"]))  # accepted as proposed

    second = pool.candidate(next(c["id"] for c in pool.queue() if c["id"] != first["id"]))
    sop = second["source"]["sop"]
    edited = pixels(_seg(pacs, tmp_path, second["proposal"]), sop).copy()
    edited[2:12, 3:15] = 1 - edited[2:12, 3:15]  # the reviewer's correction: a block flipped
    edited[20:, 20:] = 0
    answer = client.post(f"/api/pools/{pool.id}/candidates/{second['id']}/review",
                         json={"action": "accept", "base_version": 0, "mask": _png_mask(edited)})  # fmt: skip
    assert answer.status_code == 201, answer.get_data(as_text=True)
    stored = _seg(pacs, tmp_path, pool.candidate(second["id"])["labels"][0])
    accepted[second["id"]] = pixels(stored, sop)
    assert np.array_equal(accepted[second["id"]], edited)  # the edit is in Orthanc, read back by highdicom

    result = run_round(pool, net.id, strategy="entropy", count=1, epochs=1, val_percent=50, jobs_dir=jobs)
    assert result.labels == 2 and result.new_model_id and result.dataset_id
    assert JobStore(jobs).get(result.new_model_id).status is JobStatus.DONE
    folder = pool.path / "rounds" / f"r{result.round}"
    assert sorted(p.stem for p in (folder / "images").iterdir()) == sorted(accepted)  # the accepted, nothing else
    for cid, mask in accepted.items():  # the training labels are the accepted versions, pixel for pixel
        assert np.array_equal(np.asarray(Image.open(folder / "labels" / f"{cid}.png")), mask)
    built, old = open_dataset(result.dataset_id, jobs), load_inference_model(net.id, jobs_dir=jobs)
    pairs = [(np.asarray(x), np.asarray(y)) for stage in ("train", "val") for x, y in zip(*built.read_all(stage))]
    scoring = [  # what scoring fed the model for each accepted image, with its accepted label
        (
            prepare_image(
                read_candidate(record["source"], pool.candidate(cid)),
                old.feature_shape,
                str(old.feature_dtype),
                old.dataset.resize_mode,
            ),
            mask,
        )  # fmt: skip
        for cid, mask in accepted.items()
    ]
    assert sorted((x.tobytes(), y.tobytes()) for x, y in pairs) == sorted(
        (x.tobytes(), y.reshape(pairs[0][1].shape).tobytes()) for x, y in scoring
    )  # exactly the accepted candidates: the values scoring saw, the accepted masks pixel for pixel
    old_w, new_w = (load_inference_model(m, jobs_dir=jobs).model.get_weights() for m in (net.id, result.new_model_id))
    assert any(not np.array_equal(a, b) for a, b in zip(old_w, new_w))  # trained from the snapshot: changed

    again = client.post("/api/pools", json={"dicomweb_server": "pacs", "username": server.username,
                                            "studies": [study], "series": [chosen]})  # fmt: skip
    assert again.status_code == 400  # SEGs of DIGITS reference the series now: no candidate left
    assert "a DICOM-SEG of DIGITS Core (DIGITS" in again.get_data(as_text=True)


def _png_mask(mask):
    """A mask as the review page posts it: an 8-bit PNG of class indices, base64."""
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(mask, np.uint8)).save(buffer, format="PNG")
    return {"encoding": "png", "data": base64.b64encode(buffer.getvalue()).decode()}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_cli_pool_bad_input_is_named_and_stores_nothing(pacs, model, env, tmp_path, capsys):
    from digits_core.cli import main
    from digits_core.inference.model import clear_model_cache
    from digits_core.labeling import list_pools, load_pool, score_pool
    from digits_core.labeling.jobs import prepare_run, run_pool_job
    from digits_core.labeling.pool import PoolError

    server, source, series = pacs
    jobs, net, lv = model
    study = _studies(series)[1]
    seg_series = next(s for s in series if s.study == study and s.modality == "SEG")
    base = ["--jobs-dir", str(jobs), "label", "pool", "--username", server.username]
    before = {p.id for p in list_pools(jobs)}

    assert main([*base, "--dicomweb", server.dicomweb_url, "--series", seg_series.series]) != 0
    assert f"series {seg_series.series} (SEG" in capsys.readouterr().err  # not an image: refused, named
    dead = f"http://127.0.0.1:{_closed_port()}/dicom-web"
    assert main([*base, "--dicomweb", dead]) != 0
    assert dead.rsplit("/", 1)[0] in capsys.readouterr().err  # the unreachable server is named
    assert {p.id for p in list_pools(jobs)} == before  # nothing stored

    assert main([*base, "--dicomweb", server.dicomweb_url, "--study", study, "--modality", "mr", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    pool = load_pool(made["id"], jobs)
    images = [s for s in series if s.study == study and s.modality == "MR"]
    want = {r.sop for s in images for r in source.series_instances(s)}
    assert {c["source"]["sop"] for c in pool.candidates()} == want  # the SEG series left out
    assert pool.record()["modality"] == "MR"

    info_path = next(p for p in (jobs / lv.id).rglob("dataset.json"))
    original = info_path.read_text()
    info = json.loads(original)
    info.setdefault("userdata", {})["modality"] = "CT"
    info_path.write_text(json.dumps(info))
    clear_model_cache()  # the loaded model keeps its dataset's userdata
    try:
        with pytest.raises(PoolError, match="holds MR images.*trained on CT"):
            score_pool(pool, net.id, "entropy", jobs_dir=jobs)
    finally:
        info_path.write_text(original)
        clear_model_cache()
    assert all(c["score"] is None and c["state"] == "unlabelled" for c in pool.candidates())

    # the PACS goes away after the pool was made: scoring names it and the pool's record keeps what it had
    score_pool(pool, net.id, "entropy", jobs_dir=jobs)
    kept = {c["id"]: (c["score"], c["state"]) for c in pool.candidates()}
    dead = f"http://127.0.0.1:{_closed_port()}/dicom-web"
    with pool.changing() as record:
        record["source"]["url"] = dead
    job = prepare_run(pool, "score", {"model": net.id, "strategy": "entropy"})  # as the web and API queue it
    with pytest.raises(PoolError, match=f"none of the {len(kept)} candidates to score could be read") as refused:
        run_pool_job(job)  # the worker's side: the job ends failed with this message, shown on the pool page
    assert f"Cannot reach the DICOMweb server {dead}" in str(refused.value)
    assert {c["id"]: (c["score"], c["state"]) for c in pool.candidates()} == kept  # nothing stored is lost
    assert all(dead in c["error"] for c in pool.candidates())  # each candidate names why it was not scored


def test_a_plugin_without_the_pool_capability_is_named(tmp_path):
    from digits_core.labeling.pacs import create_dicomweb_pool
    from digits_core.labeling.pool import PoolError

    with pytest.raises(PoolError, match="cannot list active-learning pools"):
        create_dicomweb_pool("x", url="http://127.0.0.1:9/dicom-web", plugin="image-classification", jobs_dir=tmp_path)
    assert not (tmp_path / "jobs").exists() and not any(tmp_path.iterdir())
