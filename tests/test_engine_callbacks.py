"""The Keras callback contract of the engine, seen by a spy callback (real TensorFlow training)."""

from __future__ import annotations

import pytest

from digits_core.jobs import JobStatus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    from synthetic_plugins import build_small_shapes_dataset

    jobs = tmp_path_factory.mktemp("callback-jobs")
    return build_small_shapes_dataset(jobs), jobs


def _spy():
    import keras

    class Spy(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.calls = []

        def set_model(self, model):
            super().set_model(model)
            self.calls.append(("set_model", model is not None))

        def set_params(self, params):
            super().set_params(params)
            self.calls.append(("set_params", dict(params)))

    for name in ("on_train_begin", "on_train_end", "on_test_begin", "on_test_end"):
        setattr(Spy, name, lambda self, logs=None, _n=name: self.calls.append((_n, dict(logs or {}))))
    for name in (
        "on_epoch_begin",
        "on_epoch_end",
        "on_train_batch_begin",
        "on_train_batch_end",
        "on_test_batch_begin",
        "on_test_batch_end",
    ):
        setattr(Spy, name, lambda self, i, logs=None, _n=name: self.calls.append((_n, i, dict(logs or {}))))
    return Spy()


def test_every_documented_method_in_order_with_keras_logs(shapes):
    from digits_core.engine import train

    dataset, jobs = shapes
    spy = _spy()
    job = train(dataset, "lenet", jobs_dir=jobs, epochs=2, batch_size=32, seed=1, callbacks=[spy])
    assert job.status is JobStatus.DONE
    names = [c[0] for c in spy.calls]
    assert names[:2] == ["set_model", "set_params"] and spy.calls[0][1] is True
    assert spy.calls[1][1] == {"verbose": 0, "epochs": 2, "steps": 3}
    assert names[2:4] == ["on_train_begin", "on_epoch_begin"] and names[-1] == "on_train_end"
    epoch0 = names[3 : names.index("on_epoch_end") + 1]
    assert epoch0 == (
        ["on_epoch_begin"]
        + ["on_train_batch_begin", "on_train_batch_end"] * 3
        + ["on_test_begin"]
        + ["on_test_batch_begin", "on_test_batch_end"] * 2
        + ["on_test_end", "on_epoch_end"]
    )
    batch_ends = [c for c in spy.calls if c[0] == "on_train_batch_end"]
    assert [c[1] for c in batch_ends] == [0, 1, 2, 0, 1, 2]
    assert all({"loss", "accuracy"} <= set(c[2]) for c in batch_ends)
    test_end = next(c for c in spy.calls if c[0] == "on_test_end")
    assert {"loss", "accuracy"} <= set(test_end[1]) and not any(k.startswith("val_") for k in test_end[1])
    epoch_ends = [c for c in spy.calls if c[0] == "on_epoch_end"]
    assert [c[1] for c in epoch_ends] == [0, 1]
    for _, _, logs in epoch_ends:
        assert {"loss", "accuracy", "val_loss", "val_accuracy", "lr"} <= set(logs)
    # an epoch's loss is the mean of its batches: the running mean at its last batch
    assert epoch_ends[1][2]["loss"] == pytest.approx(batch_ends[-1][2]["loss"])
    last_test_end = [c for c in spy.calls if c[0] == "on_test_end"][-1][1]
    assert epoch_ends[1][2]["val_loss"] == last_test_end["loss"] == spy.calls[-1][1]["val_loss"]


def test_abort_from_progress_ends_epoch_and_training(shapes):
    from digits_core.engine import train

    dataset, jobs = shapes
    spy = _spy()

    def progress(info):
        if info["phase"] == "train" and info["step"] == 4:
            raise RuntimeError("stop please")

    job = train(dataset, "lenet", jobs_dir=jobs, epochs=3, batch_size=32, seed=1, callbacks=[spy], progress=progress)
    assert job.status is JobStatus.ABORTED
    assert "progress callback raised RuntimeError: stop please" in job.error
    names = [c[0] for c in spy.calls]
    assert names[-2:] == ["on_epoch_end", "on_train_end"]
    assert spy.calls[-2][1] == 1 and "loss" in spy.calls[-2][2]  # the interrupted epoch 1 (one step ran)
    assert names.count("on_epoch_end") == 2 and names.count("on_train_batch_end") == 4
    assert spy.model.stop_training is True


def test_jit_trains_and_mixed_precision_is_refused_without_a_gpu(shapes):
    import tensorflow as tf

    from digits_core.engine import train
    from digits_core.errors import FormValidationError
    from digits_core.jobs import JobStore

    dataset, jobs = shapes
    with pytest.raises(FormValidationError, match="jit: XLA has no deterministic"):
        train(dataset, "lenet", name="jit", jobs_dir=jobs, epochs=1, seed=1, jit=True)
    job = train(dataset, "lenet", name="jit", jobs_dir=jobs, epochs=1, batch_size=32, jit=True)
    assert job.status is JobStatus.DONE
    info = (job.path / "model.json").read_text()
    assert '"jit": true' in info
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU: mixed precision is allowed")
    before = len(JobStore(jobs).list(kind="model"))
    with pytest.raises(FormValidationError, match="mixed_precision: needs a GPU"):
        train(dataset, "lenet", name="fp16", jobs_dir=jobs, epochs=1, mixed_precision=True)
    assert len(JobStore(jobs).list(kind="model")) == before  # nothing created
