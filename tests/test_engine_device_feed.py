"""Input batches fed to the device ahead of the step (``prefetch_to_device``): same batches, same losses.

This machine has no GPU, so the path a GPU takes (``/gpu:0``) is exercised by
feeding to ``/cpu:0`` through the same code: a seeded run fed that way must
log exactly the losses of a run fed as on a CPU (where nothing is added).
"""

from __future__ import annotations

import numpy as np
import pytest

from digits_core.plugins.testing import build_dataset

pytestmark = pytest.mark.slow  # TensorFlow


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import SyntheticShapes

    jobs = tmp_path_factory.mktemp("device-feed")
    dataset = build_dataset(SyntheticShapes, {"count": 96, "val_count": 32, "size": 16}, jobs_dir=jobs)
    return dataset.id, jobs


def test_feed_is_a_no_op_on_a_cpu_and_keeps_every_batch_in_order():
    import tensorflow as tf

    from digits_core.engine.distribute import StrategyInfo, feed_to_device, input_device

    default = StrategyInfo(tf.distribute.get_strategy(), "default")
    assert not tf.config.list_physical_devices("GPU")
    assert input_device(default) is None
    ds = tf.data.Dataset.range(10).batch(3).map(lambda x: (tf.cast(x, tf.float32) * 0.5, x))
    assert feed_to_device(ds, None) is ds
    fed = list(feed_to_device(ds, "/cpu:0"))
    plain = list(ds)
    assert len(fed) == len(plain) == 4
    for (a, b), (c, d) in zip(fed, plain):
        np.testing.assert_array_equal(a.numpy(), c.numpy())
        np.testing.assert_array_equal(b.numpy(), d.numpy())


@pytest.mark.parametrize("preload", ["true", "false"])
def test_a_run_fed_to_a_device_logs_the_same_losses(shapes, preload, monkeypatch):
    from digits_core.engine import distribute, read_metrics, train

    dataset_id, jobs = shapes

    def run():
        job = train(
            dataset_id,
            "lenet",
            jobs_dir=jobs,
            epochs=2,
            seed=5,
            batch_size=16,
            validation_interval=1,
            preload=preload,
            snapshot_interval=0,
        )
        return [(p["name"], p["value"]) for p in read_metrics(job) if p["name"] in ("loss", "val_loss")]

    plain = run()
    fed_to = []
    real = distribute.feed_to_device

    def to_cpu(dataset, device):
        fed_to.append(device)
        return real(dataset, "/cpu:0")

    monkeypatch.setattr(distribute, "feed_to_device", to_cpu)
    fed = run()
    assert fed_to == [None, None]  # train and validation pipelines, no GPU here
    assert len(plain) == 14 and fed == plain
