"""Active learning's loop on real parts: a tiny U-Net trained by the engine, a folder pool of PNGs,
every strategy scoring it in batches, proposals as label PNGs, reviewed labels and a retraining round."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from digits_core import registry

pytestmark = pytest.mark.slow

#: Image size: large enough that a pool's images or passes held at once would show in the process's peak memory.
SIZE = 64


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from synthetic_plugins import SyntheticLV, lv_image

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    root = tmp_path_factory.mktemp("al")
    jobs = root / "jobs"
    registry.register(SyntheticLV)
    try:
        lv = create_dataset("synthetic-lv", {"count": 8, "val_count": 2, "size": SIZE}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticLV)
    model = train(
        lv.id,
        "unet",
        name="unet",
        epochs=1,
        batch_size=8,
        jobs_dir=jobs,
        network_params={"filters": 4, "depth": 2, "dropout": 0.3},
    )
    folder = root / "unlabelled"
    (folder / "sub").mkdir(parents=True)
    rng = np.random.default_rng(5)
    truth = {}
    for i in range(7):
        img, mask = lv_image(SIZE, rng)
        rel = f"sub/case{i}.png" if i % 2 else f"case{i}.png"
        Image.fromarray(img).save(folder / rel)
        truth[rel] = mask
    return jobs, model, folder, truth


def test_scores_proposals_review_and_a_round(trained):
    from digits_core.labeling import create_folder_pool, run_round, score_pool
    from digits_core.labeling.masks import read_mask
    from digits_core.labeling.pool import ACCEPTED, PROPOSED, StaleLabelError

    jobs, model, folder, truth = trained
    pool = create_folder_pool("pool", folder, jobs_dir=jobs)
    assert len(pool.candidates()) == 7
    seen = {}
    for strategy in ("random", "entropy", "variance", "tta"):
        result = score_pool(pool, model.id, strategy, batch_size=3, passes=3, jobs_dir=jobs)
        assert result.scored == 7 and not result.skipped
        scores = [c["score"] for c in pool.candidates()]
        assert all(s is not None and np.isfinite(s) and s >= 0 for s in scores)
        seen[strategy] = scores
    assert len({tuple(v) for v in seen.values()}) == 4  # four different orders of business
    # the same scoring in one batch or in batches of 2 gives the same scores (per-image aggregation)
    a = score_pool(pool, model.id, "entropy", batch_size=7, jobs_dir=jobs)
    one = {c["id"]: c["score"] for c in pool.candidates()}
    score_pool(pool, model.id, "entropy", batch_size=2, jobs_dir=jobs)
    two = {c["id"]: c["score"] for c in pool.candidates()}
    assert a.scored == 7 and all(abs(one[k] - two[k]) < 1e-5 for k in one)

    first = run_round(pool, model.id, strategy="entropy", count=3, jobs_dir=jobs)
    assert first.round == 1 and len(first.proposed) == 3 and first.new_model_id is None  # nothing accepted yet
    ranked = sorted(pool.candidates(), key=lambda c: -c["score"])
    assert [c["id"] for c in ranked[:3]] == first.proposed
    queue = pool.queue(user="ann")
    assert [c["id"] for c in queue] == first.proposed and all(c["state"] == PROPOSED for c in queue)
    proposal = read_mask(pool.file(queue[0]["proposal"]["file"]))
    assert proposal.shape == (SIZE, SIZE) and set(np.unique(proposal)) <= {0, 1}
    # a reviewer accepts the true masks of the three proposals
    for cand in queue:
        pool.claim(cand["id"], "ann")
        pool.store_label(cand["id"], truth[cand["source"]["path"]], user="ann", base_version=cand["version"])
    with pytest.raises(StaleLabelError):
        pool.store_label(queue[0]["id"], truth[queue[0]["source"]["path"]], user="bob", base_version=0)
    assert pool.counts()[ACCEPTED] == 3

    second = run_round(pool, model.id, strategy="variance", count=2, epochs=1, passes=3, jobs_dir=jobs)
    assert second.round == 2 and second.labels == 3 and second.new_model_id
    assert second.scored == 4  # accepted ones are not scored again
    from digits_core.jobs import JobStore

    new = JobStore(jobs).get(second.new_model_id, kind="model")
    info = new.model_record()
    assert info["fine_tune"] and second.val_dice is not None and info["train_count"] + info["val_count"] == 3
    history = pool.record()["rounds"]
    assert [r["round"] for r in history] == [1, 2] and history[1]["new_model_id"] == second.new_model_id


def test_bad_input_is_named_and_nothing_is_lost(trained, tmp_path):
    from digits_core.inference.model import clear_model_cache
    from digits_core.labeling import create_folder_pool, score_pool
    from digits_core.labeling.pool import PoolError
    from digits_core.labeling.strategies import StrategyError

    jobs, model, folder, _truth = trained
    bad = tmp_path / "bad"
    bad.mkdir()
    Image.fromarray(np.zeros((16, 16), np.uint8)).save(bad / "good.png")
    (bad / "notanimage.png").write_bytes(b"this is text, not a PNG")
    pool = create_folder_pool("bad", bad, jobs_dir=jobs)
    result = score_pool(pool, model.id, "entropy", jobs_dir=jobs)
    assert result.scored == 1 and len(result.skipped) == 1
    assert "notanimage.png" in result.skipped[0]["error"]
    broken = next(c for c in pool.candidates() if c["source"]["path"] == "notanimage.png")
    assert "notanimage.png" in broken["error"] and broken["state"] == "unlabelled"
    # a network without dropout cannot do MC-dropout; an unknown strategy is named
    from digits_core.engine.networks import resolve_network
    from digits_core.labeling.strategies import Scorer

    plain = resolve_network("unet").build((SIZE, SIZE, 1), 2, filters=2, depth=2)
    with pytest.raises(StrategyError, match='network "unet" has no dropout layer'):
        Scorer(plain, "variance")
    before = (pool.path / "pool.json").read_bytes()
    with pytest.raises(StrategyError, match='Unknown strategy "vibes"'):
        score_pool(pool, model.id, "vibes", jobs_dir=jobs)
    assert (pool.path / "pool.json").read_bytes() == before  # refused before anything was written
    # a pool of another modality than the model's dataset
    info = jobs / model.dataset_id / "dataset" / "dataset.json"
    data = json.loads(info.read_text())
    data.setdefault("userdata", {})["modality"] = "MR"
    info.write_text(json.dumps(data))
    clear_model_cache()  # the loaded model keeps its dataset's metadata
    with pool.changing() as record:
        record["modality"] = "CT"
    before = (pool.path / "pool.json").read_bytes()
    try:
        with pytest.raises(PoolError, match=f"Pool {pool.id} holds CT images; model {model.id} was trained on MR"):
            score_pool(pool, model.id, "entropy", jobs_dir=jobs)
        assert (pool.path / "pool.json").read_bytes() == before
    finally:
        data["userdata"].pop("modality")
        info.write_text(json.dumps(data))
        clear_model_cache()


def _pool_of(folder, count, seed=0):
    from synthetic_plugins import lv_image

    folder.mkdir()
    rng = np.random.default_rng(seed)
    for i in range(count):
        Image.fromarray(lv_image(SIZE, rng)[0]).save(folder / f"img{i:04d}.png")


PEAK = """
import sys
from digits_core.labeling import load_pool, score_pool
pool = load_pool(sys.argv[1], jobs_dir=sys.argv[2])
result = score_pool(pool, sys.argv[3], "variance", batch_size=8, passes=2, jobs_dir=sys.argv[2])
assert result.scored == int(sys.argv[4]), result
# this process's own peak (Linux keeps ru_maxrss across exec; VmHWM is this image's)
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1]
print("PEAK", int(peak))
"""


def test_scoring_memory_does_not_grow_with_the_pool(trained, tmp_path):
    import subprocess
    import sys

    from digits_core.labeling import create_folder_pool

    jobs, model, _folder, _truth = trained
    peaks = {}
    for count in (20, 200):
        _pool_of(tmp_path / f"p{count}", count)
        pool = create_folder_pool(f"p{count}", tmp_path / f"p{count}", jobs_dir=jobs)
        done = subprocess.run(
            [sys.executable, "-c", PEAK, pool.id, str(jobs), model.id, str(count)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        peaks[count] = int(done.stdout.split("PEAK")[-1])
    # the 200 candidates scored at once would add ~0.5 GiB of activations (1.8 GiB at 128 px); a batch of 8 is constant
    assert peaks[200] <= peaks[20] * 1.10, peaks


def test_scoring_as_a_job_aborts_and_resumes(trained, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from digits_core.executors.worker import run_job
    from digits_core.jobs import Job, JobStatus
    from digits_core.labeling import create_folder_pool
    from digits_core.labeling.jobs import prepare_resume, prepare_run

    jobs, model, _folder, _truth = trained
    _pool_of(tmp_path / "big", 12, seed=3)
    pool = create_folder_pool("big", tmp_path / "big", jobs_dir=jobs)
    with pytest.raises(Exception, match="passes: an integer from 2 to 64"):
        prepare_run(pool, "score", {"model": model.id, "passes": 1000})
    assert Job.load(pool.path).status is JobStatus.DONE  # a refused request queues nothing
    job = prepare_run(pool, "score", {"model": model.id, "strategy": "variance", "batch_size": 1, "passes": 16})
    assert job.status is JobStatus.WAITING
    worker = subprocess.Popen(
        [sys.executable, "-m", "digits_core.scheduler", "run", str(pool.path)], start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and (Job.load(pool.path).data.get("pool_progress") or {}).get("done", 0) < 2:
            assert worker.poll() is None, "the worker ended before it was stopped"
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(60)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
    stopped = Job.load(pool.path)
    assert stopped.status is JobStatus.ABORTED
    run = stopped.data["pool_run"]["run"]
    first = [c for c in pool.candidates() if c.get("scored_in") == run]
    assert 2 <= len(first) < 12  # the batches scored before the stop are kept
    prepare_resume(pool)
    assert run_job(pool.path) == 0
    done = Job.load(pool.path)
    assert done.status is JobStatus.DONE
    assert done.data["pool_result"]["scored"] == 12 - len(first)  # the resumed run skipped what it had scored
    assert all(c.get("scored_in") == run for c in pool.candidates())


def test_mc_dropout_keeps_batch_norm_in_inference_mode():
    import keras

    from digits_core.labeling.strategies import Scorer, mc_dropout_model

    inputs = keras.Input((4, 4, 2))
    x = keras.layers.BatchNormalization(name="bn")(inputs)
    x = keras.layers.Dropout(0.5, name="drop")(x)
    model = keras.Model(inputs, x)
    bn = model.get_layer("bn")
    bn.moving_mean.assign([5.0, 5.0])
    bn.moving_variance.assign([4.0 - bn.epsilon] * 2)
    feats = np.random.default_rng(0).normal(3, 3, (6, 4, 4, 2)).astype(np.float32)
    twin = mc_dropout_model(model)
    runs = [np.asarray(twin(feats, training=False)) for _ in range(4)]
    inference = (feats - 5.0) / 2.0  # batch norm with its moving statistics, not the batch's
    for out in runs:  # each value dropped (0) or kept and scaled by 1 / (1 - 0.5)
        assert np.all(np.isclose(out, 0, atol=1e-5) | np.isclose(out, 2 * inference, atol=1e-4))
    assert not np.allclose(runs[0], runs[1])  # dropout samples anew at every pass
    assert np.allclose(np.asarray(model(feats, training=False)), inference, atol=1e-4)  # the model is untouched
    probs_model = keras.Sequential([model, keras.layers.Softmax()])  # the dropout sits in a nested model
    scores, _ = Scorer(probs_model, "variance", passes=4).score(["a"] * 6, feats)
    assert np.all(scores > 0)


def test_top_fraction_scores_each_image_by_its_most_uncertain_pixels(trained, tmp_path):
    """The job path (request, worker) and a round score with the option and record it; the numbers are the
    reference formula's on the model's own probabilities (entropy), its flips and turns mapped back (tta) and its
    MC-dropout passes (variance, the same masks by the same seed)."""
    import keras
    from labeling_support import top_fraction_reference as reference

    from digits_core.executors.worker import run_job
    from digits_core.inference.model import load_inference_model
    from digits_core.jobs import Job
    from digits_core.labeling import create_folder_pool, run_round, score_pool
    from digits_core.labeling.jobs import prepare_run
    from digits_core.labeling.scoring import _batches
    from digits_core.labeling.strategies import Scorer, tta_transforms

    jobs, model, _folder, _truth = trained
    _pool_of(tmp_path / "few", 4, seed=9)
    pool = create_folder_pool("few", tmp_path / "few", jobs_dir=jobs)
    loaded = load_inference_model(model.id, jobs_dir=jobs)
    record = pool.record()
    ((ids, features, _),) = list(_batches(record["source"], pool.candidates(), loaded, 16, []))
    net = lambda x: np.asarray(loaded.model(np.ascontiguousarray(x), training=False), np.float64)  # noqa: E731
    probs = np.clip(net(features), 1e-12, 1.0)
    entropy_map = -(probs * np.log(probs)).sum(axis=-1)

    prepare_run(pool, "score", {"model": model.id, "strategy": "entropy", "top_fraction": 0.05})
    assert run_job(pool.path) == 0
    done = Job.load(pool.path)
    assert done.data["pool_run"]["top_fraction"] == 0.05 and done.data["pool_result"]["top_fraction"] == 0.05
    top = np.array([pool.candidate(cid)["score"] for cid in ids])
    np.testing.assert_allclose(top, reference(entropy_map, 0.05), rtol=1e-5)
    mean = score_pool(pool, model.id, "entropy", jobs_dir=jobs)
    assert mean.top_fraction == 1.0
    plain = np.array([pool.candidate(cid)["score"] for cid in ids])
    np.testing.assert_allclose(plain, entropy_map.reshape(len(ids), -1).mean(axis=1), rtol=1e-5)
    assert np.all(top > plain)  # the top 5 % of each image, above its mean (a one-epoch model is unsure everywhere)

    result = run_round(pool, model.id, strategy="tta", count=1, retrain_model=False, top_fraction=0.1, jobs_dir=jobs)
    assert result.top_fraction == 0.1 and pool.record()["rounds"][-1]["top_fraction"] == 0.1
    runs = np.stack([inverse(net(forward(features))) for forward, inverse in tta_transforms(SIZE, SIZE)])
    tta = np.array([pool.candidate(cid)["score"] for cid in ids])
    np.testing.assert_allclose(tta, reference(runs.var(axis=0).sum(axis=-1), 0.1), rtol=1e-4)

    keras.utils.set_random_seed(3)  # the same dropout masks for the passes read here and the scorer's
    passes = Scorer(loaded.model, "variance", passes=3)
    runs = np.stack([np.asarray(passes._forward(features), np.float64) for _ in range(3)])
    keras.utils.set_random_seed(3)
    variance, _ = Scorer(loaded.model, "variance", passes=3, top_fraction=0.05).score(ids, features)
    np.testing.assert_allclose(variance, reference(runs.var(axis=0).sum(axis=-1), 0.05), rtol=1e-4)
