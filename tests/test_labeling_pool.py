"""The pool record (digits_core.labeling.pool): states, the review queue, claims and label versions."""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest

from digits_core.jobs import JobStore
from digits_core.labeling.pool import (
    ACCEPTED,
    IN_REVIEW,
    PROPOSED,
    REJECTED,
    ClaimedError,
    PoolError,
    StaleLabelError,
    candidate_id,
    create_pool,
    load_pool,
    read_mask,
)


def _pool(tmp_path, n=3):
    sources = [{"path": f"img{i}.png"} for i in range(n)]
    return create_pool("p", {"kind": "folder", "root": str(tmp_path)}, sources, jobs_dir=tmp_path / "jobs")


def test_pool_is_a_job_with_stable_candidate_ids(tmp_path):
    pool = _pool(tmp_path)
    job = JobStore(tmp_path / "jobs").get(pool.id, kind="pool")
    assert job.status.value == "Done" and job.data["pool"]["source"]["kind"] == "folder"
    ids = [c["id"] for c in pool.candidates()]
    assert sorted(ids) == sorted(candidate_id({"path": f"img{i}.png"}) for i in range(3))
    assert pool.add_candidates([{"path": "img0.png"}, {"path": "new.png"}]) == 1  # known ones kept
    assert pool.counts()["unlabelled"] == 4


def test_queue_claim_and_versions(tmp_path):
    pool = _pool(tmp_path)
    a, b, c = (cand["id"] for cand in pool.candidates())
    pool.record_scores({a: 0.1, b: 0.9, c: 0.5}, "entropy")
    for cid in (a, b):
        pool.record_proposal(cid, {"file": f"proposals/{cid}.png", "model_id": "m"})
    assert [x["id"] for x in pool.queue(user="ann")] == [b, a]  # highest score first, unproposed left out
    pool.claim(b, "ann")
    assert pool.candidate(b)["state"] == IN_REVIEW
    assert [x["id"] for x in pool.queue(user="bob")] == [a]  # ann holds b
    with pytest.raises(ClaimedError, match="in review by ann"):
        pool.claim(b, "bob")
    mask = np.zeros((4, 5), np.uint8)
    mask[1:3, 2:4] = 1
    entry = pool.store_label(b, mask, user="ann", base_version=0)
    assert entry["version"] == 1 and entry["by"] == "ann"
    assert pool.candidate(b)["state"] == ACCEPTED
    np.testing.assert_array_equal(read_mask(pool.label_file(b)), mask)
    # a second reviewer who loaded version 0 is told, and version 1 stays as it was
    with pytest.raises(StaleLabelError, match="version 1 was saved meanwhile by ann"):
        pool.store_label(b, np.ones((4, 5), np.uint8), user="bob", base_version=0)
    np.testing.assert_array_equal(read_mask(pool.label_file(b)), mask)
    assert [e["version"] for e in pool.candidate(b)["labels"]] == [1]
    pool.claim(b, "bob")
    pool.store_label(b, np.ones((4, 5), np.uint8), user="bob", base_version=1)
    assert read_mask(pool.label_file(b, 1)).sum() == 4 and read_mask(pool.label_file(b)).sum() == 20  # both kept
    pool.claim(a, "bob")
    assert pool.release(a, "bob", REJECTED)["state"] == REJECTED
    with pytest.raises(PoolError, match="score and propose it first"):
        pool.claim(a, "bob")
    assert pool.accepted()[0]["label"]["version"] == 2
    with pytest.raises(PoolError, match='no candidate "nope"'):
        pool.candidate("nope")


def _save(path, cid, who, barrier, results):
    pool = load_pool(path.name, jobs_dir=path.parent)
    barrier.wait()
    try:
        pool.store_label(cid, np.full((3, 3), 1 if who == "a" else 2, np.uint8), user=who, base_version=0)
        results.put(who)
    except StaleLabelError:
        results.put("stale")


def test_two_processes_saving_one_version_one_wins(tmp_path):
    pool = _pool(tmp_path, 1)
    cid = pool.candidates()[0]["id"]
    pool.record_proposal(cid, {"file": "x"})
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_save, args=(pool.path, cid, who, barrier, results)) for who in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    outcome = sorted(results.get(timeout=5) for _ in procs)
    assert outcome[1] == "stale" and outcome[0] in ("a", "b")
    record = json.loads((pool.path / "pool.json").read_text())
    labels = record["candidates"][cid]["labels"]
    assert len(labels) == 1 and labels[0]["by"] == outcome[0]
    assert read_mask(pool.label_file(cid)).max() == (1 if outcome[0] == "a" else 2)
    assert record["candidates"][cid]["state"] == ACCEPTED and PROPOSED != ACCEPTED


def test_not_a_pool(tmp_path):
    from digits_core.submit.records import create_job_record

    job = create_job_record("evaluation", "e", jobs_dir=tmp_path)
    with pytest.raises(PoolError, match="not a pool"):
        load_pool(job.id, jobs_dir=tmp_path)
    with pytest.raises(PoolError, match="holds no candidate"):
        create_pool("p", {"kind": "folder", "root": "/x"}, [], jobs_dir=tmp_path)


def test_a_damaged_pool_record_is_named_and_not_rewritten(tmp_path):
    pool = _pool(tmp_path, 2)
    path = pool.path / "pool.json"
    record = json.loads(path.read_text())
    cid = next(iter(record["candidates"]))
    record["candidates"][cid]["state"] = "lost"
    path.write_text(json.dumps(record))
    before = path.read_bytes()
    with pytest.raises(PoolError, match=f'pool.json is damaged \\(candidate "{cid}" has an unknown state'):
        pool.claim(cid, "ann")
    record["candidates"][cid] = {"id": cid, "state": "proposed"}
    path.write_text(json.dumps(record))
    with pytest.raises(PoolError, match='has no valid "source"'):
        pool.queue()
    path.write_text('{"candidates": []}')
    with pytest.raises(PoolError, match='"source" and "candidates" must be objects'):
        pool.counts()
    assert before != path.read_bytes()  # (the test wrote it; the pool never did)


def test_a_proposal_of_a_cropping_model_is_placed_back_at_the_crop():
    from types import SimpleNamespace

    from digits_core.engine.preprocessing import center_crop_offsets
    from digits_core.labeling.scoring import _uncropped

    crop = np.arange(1, 17, dtype=np.uint8).reshape(4, 4)
    full = _uncropped(crop, SimpleNamespace(feature_shape=(9, 10, 1)))
    top, left = center_crop_offsets(9, 10, 4)
    assert full.shape == (9, 10) and (full[top : top + 4, left : left + 4] == crop).all() and full.sum() == crop.sum()
