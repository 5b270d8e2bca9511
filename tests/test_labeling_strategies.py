"""Aggregating an uncertainty map per case (issue 46): the mean, or the mean of the ``top_fraction`` most uncertain
pixels, and the one gate every door asks about ``top_fraction``.

Probability arrays made by hand (numpy only); the CLI through its own ``main``, the JSON API through the Flask app
with real pool and model records. No TensorFlow: a refused value is refused before a model is read.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from labeling_support import model_record, three_image_pool
from labeling_support import top_fraction_reference as reference

from digits_core.cli import main as digits
from digits_core.jobs import JobStatus, JobStore
from digits_core.labeling.strategies import DEFAULT_TOP_FRACTION, aggregate, disagreement, entropy
from digits_core.labeling.volume_scoring import _running_disagreement

BAD = [0, 1.5, "nan", -1]


def _entropy_map(probs: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(probs, np.float64), 1e-12, 1.0)
    return -(p * np.log(p)).sum(axis=-1)


def _two_cases() -> np.ndarray:
    """``[2, 20, 20, 2]``: case 0 sure (0.999) but for a 4×4 region at 0.5; case 1 mildly unsure (0.9) everywhere."""
    probs = np.empty((2, 20, 20, 2))
    probs[0, ..., 0], probs[1, ..., 0] = 0.999, 0.9
    probs[0, 8:12, 8:12, 0] = 0.5
    probs[..., 1] = 1.0 - probs[..., 0]
    return probs


def _two_cases_passes() -> np.ndarray:
    """``[4, 2, 20, 20, 2]`` passes: case 0 agrees but for a 4×4 region flipping 1/0; case 1 wavers 0.65/0.35."""
    runs = np.empty((4, 2, 20, 20, 2))
    for t in range(4):
        runs[t, 0, ..., 0] = 1.0
        runs[t, 0, 8:12, 8:12, 0] = t % 2
        runs[t, 1, ..., 0] = 0.65 if t % 2 else 0.35
    runs[..., 1] = 1.0 - runs[..., 0]
    return runs


def test_top_fraction_1_is_the_plain_mean_bit_for_bit():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet([1.0, 1.0, 1.0], size=(3, 7, 5))
    runs = rng.dirichlet([1.0, 1.0], size=(4, 3, 7, 5))
    assert DEFAULT_TOP_FRACTION == 1.0
    old_entropy = _entropy_map(probs).reshape(3, -1).mean(axis=1)  # the aggregation before the option
    old_var = runs.var(axis=0).sum(axis=-1).reshape(3, -1).mean(axis=1)
    assert np.array_equal(entropy(probs), old_entropy) and np.array_equal(entropy(probs, 1.0), old_entropy)
    assert np.array_equal(disagreement(runs), old_var) and np.array_equal(disagreement(runs, 1), old_var)


def test_a_small_very_uncertain_region_outranks_mild_uncertainty_everywhere_only_at_a_top_fraction():
    probs = _two_cases()
    mean, top = entropy(probs), entropy(probs, 0.05)
    assert mean[1] > mean[0]  # by the mean, the mildly unsure image first
    assert top[0] > top[1]  # by its 5 % most uncertain pixels (20 of 400: the 16 of the region and 4 more), the other
    np.testing.assert_allclose(top, reference(_entropy_map(probs), 0.05), rtol=0, atol=1e-15)
    np.testing.assert_allclose(top[0], (16 * np.log(2) + 4 * _entropy_map(probs)[0, 0, 0]) / 20, rtol=1e-12)

    runs = _two_cases_passes()
    mean, top = disagreement(runs), disagreement(runs, 0.05)
    assert mean[1] > mean[0] and top[0] > top[1]
    np.testing.assert_allclose(top, reference(runs.var(axis=0).sum(axis=-1), 0.05), rtol=0, atol=1e-15)
    assert top[0] == pytest.approx(16 * 0.5 / 20)


def test_k_rounds_as_the_reference_at_tiny_images():
    per_pixel = np.array([[[0.1, 0.4], [0.3, 0.2]]])  # 4 pixels
    assert aggregate(per_pixel, 0.05)[0] == pytest.approx(0.4)  # round(0.2) = 0: at least one pixel
    assert aggregate(per_pixel, 0.375)[0] == pytest.approx(0.35)  # round(1.5) = 2
    assert aggregate(per_pixel, 0.625)[0] == pytest.approx(0.35)  # round(2.5) = 2 (half to even), not 3
    assert aggregate(per_pixel, 0.7)[0] == pytest.approx(0.3)  # round(2.8) = 3
    assert aggregate(np.array([[7.0]]), 0.01)[0] == 7.0  # one pixel
    rng = np.random.default_rng(1)
    for shape in ((3, 1, 1), (2, 3, 3), (4, 5, 7), (2, 64, 64)):
        maps = rng.random(shape)
        for fraction in (0.01, 0.05, 0.1, 0.25, 0.5, 0.9, 1.0):
            np.testing.assert_allclose(aggregate(maps, fraction), reference(maps, fraction), rtol=1e-12)


def test_the_volume_scorers_running_variance_honours_top_fraction():
    runs = _two_cases_passes()[:, 0]  # one "volume" 20×20 (its slices do not matter to the aggregation)
    volume = np.stack([runs] * 3, axis=1)  # [T, D=3, 20, 20, 2]
    passes = [lambda t=t: volume[t] for t in range(len(volume))]
    var = volume.var(axis=0).sum(axis=-1)
    assert _running_disagreement(passes) == pytest.approx(var.mean(), rel=1e-12)
    assert _running_disagreement(passes, 1.0) == _running_disagreement(passes)
    top = _running_disagreement(passes, 0.05)
    assert top == pytest.approx(reference(var[None], 0.05)[0], rel=1e-12)
    assert top == pytest.approx(48 * 0.5 / 60) and var.mean() < 0.05  # top 5 %: 60 of 1200 voxels, the region's 48


@pytest.fixture
def pool_and_model(tmp_path):
    pool, jobs, _ = three_image_pool(tmp_path)
    return pool, model_record(jobs, "unet", {"task": "segmentation"}), jobs


@pytest.mark.parametrize("bad", BAD)
def test_the_cli_refuses_a_bad_top_fraction_and_stores_nothing(pool_and_model, bad, capsys, tmp_path):
    pool, model, jobs = pool_and_model
    before = (pool.path / "pool.json").read_bytes()
    common = ["--jobs-dir", str(jobs), "label"]
    runs = [
        [*common, "score", "--pool", pool.id, "--model", model.id, "--strategy", "entropy"],
        [*common, "round", "--pool", pool.id, "--model", model.id, "--strategy", "tta", "--no-retrain"],
        [*common, "simulate", "--dataset", model.id, "--out", str(tmp_path / "sim")],
    ]
    for argv in runs:
        assert digits([*argv, "--top-fraction", str(bad)]) == 2, argv
        err = capsys.readouterr().err
        assert "top_fraction: a number greater than 0 and at most 1" in err and f"not {bad}" in err, err
    assert (pool.path / "pool.json").read_bytes() == before  # no score, no round, no proposal
    assert not (tmp_path / "sim").exists()


def test_the_json_api_refuses_a_bad_top_fraction_and_records_a_good_one(pool_and_model, tmp_path):
    from digits_core.web.app import create_app

    pool, model, jobs = pool_and_model
    app = create_app(jobs, start_scheduler=False, testing=True, secret_key="k", data_roots=[tmp_path / "roots"])
    client = app.test_client()
    client.environ_base["HTTP_X_CSRFTOKEN"] = client.get("/api/csrf-token").get_json()["csrf_token"]
    url = f"/api/pools/{pool.id}/runs"
    for bad in [*BAD, True, None]:
        answer = client.post(url, json={"action": "score", "model": model.id, "top_fraction": bad})
        assert answer.status_code == 400, bad
        errors = answer.get_json()
        assert "top_fraction: a number greater than 0 and at most 1" in json.dumps(errors), (bad, errors)
        job = JobStore(jobs).get(pool.id)
        assert job.status is JobStatus.DONE and not job.data.get("pool_run")  # nothing queued
    nan = client.post(url, data='{"model": "%s", "top_fraction": NaN}' % model.id, content_type="application/json")
    assert nan.status_code == 400 and "top_fraction" in nan.get_data(as_text=True)
    assert not JobStore(jobs).get(pool.id).data.get("pool_run")

    queued = client.post(url, json={"action": "round", "model": model.id, "top_fraction": 0.05})
    assert queued.status_code == 202, queued.get_data(as_text=True)
    job = JobStore(jobs).get(pool.id)
    assert job.status is JobStatus.WAITING and job.data["pool_run"]["top_fraction"] == 0.05
    job.finish(JobStatus.DONE)
    plain = client.post(url, json={"action": "score", "model": model.id})
    assert plain.status_code == 202 and JobStore(jobs).get(pool.id).data["pool_run"]["top_fraction"] == 1.0
