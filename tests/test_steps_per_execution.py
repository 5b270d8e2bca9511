"""``steps_per_execution``: several train steps per call of the compiled step, the same run as one at a time.

Two seeded LeNet runs on a tiny real LMDB set, one step per call and three, must log the same points with
the same values and end with the same weights: validation, logging and snapshots happen at the same steps
with the same weights, because no execution runs past one of them (``TrainingLoop._chunk``).
"""

from __future__ import annotations

import numpy as np
import pytest

from digits_core import registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    from digits_core.datasets import create_dataset

    jobs = tmp_path_factory.mktemp("spe-jobs")
    registry.register(SyntheticShapes)
    try:
        job = create_dataset("synthetic-shapes", {"count": 160, "val_count": 32, "size": 16}, workers=1, jobs_dir=jobs)
    finally:
        registry.unregister(SyntheticShapes)
    return job.id, jobs


def test_three_steps_per_call_log_and_learn_what_one_step_per_call_does(shapes, monkeypatch):
    import digits_core.engine.loop as loop
    from digits_core.engine import load_snapshot, read_metrics, train

    chunks: list[int] = []
    real = loop.make_multi_step

    def recording(spec):
        run = real(spec)

        def counted(iterator, n, stop):
            chunks.append(int(n))
            return run(iterator, n, stop)

        return counted

    monkeypatch.setattr(loop, "make_multi_step", recording)
    dataset, jobs = shapes
    # 10 steps an epoch (batch 16): validation every 5 steps, logs every 5, a snapshot per epoch
    options = dict(epochs=2, seed=3, batch_size=16, validation_interval=0.5, log_every=2, solver="adam")
    one = train(dataset, "lenet", name="one-per-call", jobs_dir=jobs, **options)
    assert chunks == []  # the default: one step per call, as before
    three = train(dataset, "lenet", name="three-per-call", jobs_dir=jobs, steps_per_execution=3, **options)
    assert sum(chunks) == 20 and max(chunks) == 3 and len(chunks) == 8  # 3+2 per 5-step interval
    points = [(m["step"], m["name"]) for m in read_metrics(one) if m["name"] != "images_per_sec"]
    assert points == [(m["step"], m["name"]) for m in read_metrics(three) if m["name"] != "images_per_sec"]
    assert {name for _, name in points} >= {"loss", "accuracy", "val_loss", "val_accuracy"}
    for a, b in zip(read_metrics(one), read_metrics(three)):
        if a["name"] != "images_per_sec":
            assert a["value"] == pytest.approx(b["value"], rel=1e-5, abs=1e-6), (a, b)
    for wa, wb in zip(load_snapshot(one).get_weights(), load_snapshot(three).get_weights()):
        np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-6)
