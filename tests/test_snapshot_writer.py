"""Snapshots written off the training thread (digits_core.engine.snapshot_writer).

Real Keras models and real ``.keras`` / ``.npz`` files: a background write
holds the weights of the moment it was asked for, whatever training does
meanwhile; it is listed only once complete; its error reaches the training
thread; a network Keras cannot clone is saved synchronously.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # imports TensorFlow


def _model_folder(tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "model.json").write_text(json.dumps({"snapshots": []}), encoding="utf-8")
    return folder


def _network():
    import keras

    inputs = keras.Input((6, 6, 1), name="image")
    x = keras.layers.Conv2D(4, 3, name="conv")(inputs)
    x = keras.layers.BatchNormalization(name="bn")(x)
    x = keras.layers.Flatten(name="flat")(x)
    model = keras.Model(inputs, keras.layers.Dense(3, name="dense")(x), name="tiny")
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _listed(folder):
    return [(s["epoch"], s["step"], s["file"]) for s in json.loads((folder / "model.json").read_text())["snapshots"]]


def _scramble(variables, value):
    for variable in variables:
        variable.assign(np.full(tuple(variable.shape), value, dtype=variable.dtype))


def test_a_background_snapshot_holds_the_weights_of_its_moment(tmp_path):
    import keras

    from digits_core.engine.snapshot_writer import SnapshotWriter

    folder = _model_folder(tmp_path)
    model, optimizer = _network()
    _scramble(optimizer.variables[2:], 0.25)  # some Adam state to find again
    weights = [np.array(v.numpy()) for v in model.variables]
    state = [np.array(v.numpy()) for v in optimizer.variables]
    writer = SnapshotWriter(folder, model, optimizer)
    writer.save(1, 10)
    _scramble(model.variables, 7.0)  # training goes on while the file is written
    _scramble(optimizer.variables[2:], 9.0)
    writer.wait()
    assert writer.background, "a functional network is written in the background"
    assert _listed(folder) == [(1, 10, "epoch-001.keras")]
    loaded = keras.models.load_model(folder / "snapshots" / "epoch-001.keras", compile=False)
    assert loaded.name == "tiny" and [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]
    for saved, expected in zip(loaded.variables, weights):
        np.testing.assert_array_equal(saved.numpy(), expected)  # not 7.0: the moment of save()
    npz = np.load(folder / "snapshots" / "epoch-001.state.npz")
    assert int(npz["step"]) == 10 and int(npz["count"]) == len(state)
    for i, expected in enumerate(state):
        np.testing.assert_array_equal(npz[f"opt_{i}"], expected)

    writer.save(2, 20, last=True)  # the last one is on disk and listed when save() returns
    assert _listed(folder)[-1] == (2, 20, "epoch-002.keras")
    final = keras.models.load_model(folder / "snapshots" / "epoch-002.keras", compile=False)
    assert all(np.all(v.numpy() == 7.0) for v in final.variables)
    assert not list((folder / "snapshots").glob(".tmp-*"))


def test_a_failed_background_write_raises_on_the_training_thread_and_lists_nothing(tmp_path):
    from digits_core.engine.snapshot_writer import SnapshotWriter

    folder = _model_folder(tmp_path)
    (folder / "snapshots").write_text("not a folder", encoding="utf-8")  # the write cannot make its folder
    model, optimizer = _network()
    writer = SnapshotWriter(folder, model, optimizer)
    writer.save(1, 10)  # returns: the failure happens in the writer thread
    with pytest.raises(FileExistsError):
        writer.save(2, 20)  # ...and is raised here, before the next snapshot
    assert _listed(folder) == []
    writer.save(3, 30)  # nothing pending any more: this one is attempted afresh
    with pytest.raises(FileExistsError):
        writer.close()
    writer.save(4, 40)
    writer.close(quiet=True)  # a run ending on another error is not masked by this one
    assert _listed(folder) == []


def test_a_network_keras_cannot_clone_as_it_is_is_saved_on_the_training_thread(tmp_path):
    import keras

    from digits_core.engine.snapshot_writer import SnapshotWriter

    class Subclassed(keras.Model):  # Keras clones it unbuilt: the clone has no variables to write from
        def __init__(self, width, **kwargs):
            super().__init__(**kwargs)
            self.width = width
            self.dense = keras.layers.Dense(width)

        def call(self, x):
            return self.dense(x)

        def get_config(self):
            return {"width": self.width, "name": self.name}

    model = Subclassed(2, name="subclassed")
    model(np.zeros((1, 3), np.float32))
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    folder = _model_folder(tmp_path)
    writer = SnapshotWriter(folder, model, optimizer)
    writer.save(1, 5)
    assert not writer.background
    assert _listed(folder) == [(1, 5, "epoch-001.keras")]  # listed at once: written synchronously
