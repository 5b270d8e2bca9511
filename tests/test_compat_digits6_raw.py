"""A DIGITS 6 plugin whose labels are raw arrays (the bAbI idiom) trains with a network of the user's own.

The fixture plugin writes what DIGITS 6's bAbI plugin wrote: a ``2×story×sentence``
float feature (story and question as word ids) and a float ``1×story×sentence``
answer label, stored ``raw`` with that shape. The ``raw`` task feeds the labels
to the network's own loss in that shape (the loss below indexes
``y_true[:, 0, 0, 0]``, the answer's first word, as a bAbI network does).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import digits  # noqa: F401  (installs flask.ext.wtf)
from digits.extensions.data.interface import DataIngestionInterface
from digits.utils import constants, override, subclass
from digits_core.plugins.testing import build_dataset

from flask.ext.wtf import Form  # noqa: E402  (served by digits6-compat, as for DIGITS 6 plugins)

pytestmark = pytest.mark.slow  # TensorFlow training

STORY, SENTENCE, WORDS = 3, 5, 4  # 5 words a sentence: the shape that used to be taken for N×5 boxes

NETWORK = '''
import keras
from keras import ops

DEFAULTS = {"mean_subtraction": "none", "scale": "none", "solver": "adam", "learning_rate": 0.05,
            "lr_policy": "fixed"}


def build_model(input_shape, num_outputs, **params):
    inputs = keras.Input(shape=input_shape, name="story_question")
    x = keras.layers.Dense(16, activation="relu")(keras.layers.Flatten()(inputs))
    outputs = keras.layers.Dense(%d, activation="softmax", name="answer")(x)

    def answer_loss(y_true, y_pred):  # the raw label in its stored shape: N x 1 x story x sentence
        return keras.losses.sparse_categorical_crossentropy(ops.cast(y_true[:, 0, 0, 0], "int32"), y_pred)

    return keras.Model(inputs, outputs), answer_loss, []
''' % (WORDS + 1)


@subclass
class Stories(DataIngestionInterface):
    """bAbI's layout: the answer word is the first word of the story's first sentence."""

    @override
    def encode_entry(self, entry):
        word = entry % WORDS + 1
        feature = np.zeros((2, STORY, SENTENCE))  # float64, as bAbI's np.zeros
        feature[0, 0, 0] = word
        feature[1, 0, 0] = 1
        answer = np.zeros((STORY, SENTENCE))
        answer[0, 0] = word
        return feature, answer[np.newaxis, :]

    @override
    def itemize_entries(self, stage):
        return {constants.TRAIN_DB: list(range(32)), constants.VAL_DB: list(range(32, 40))}.get(stage, [])

    @staticmethod
    def get_id():
        return "stories6-raw"

    @staticmethod
    def get_title():
        return "Stories (DIGITS 6, raw labels)"

    @staticmethod
    def get_dataset_form():
        return Form()

    @staticmethod
    def get_dataset_template(form):
        return "", {}


def test_raw_labels_train_with_the_networks_own_loss_in_their_stored_shape(tmp_path):
    from digits_core.engine import read_metrics, train
    from digits_core.jobs import JobStatus

    jobs = tmp_path / "jobs"
    dataset = build_dataset(Stories, {}, jobs_dir=jobs)
    assert (dataset.label_kind, dataset.label_dtype, dataset.label_shape) == ("raw", "float32", (1, STORY, SENTENCE))
    network = tmp_path / "story_net.py"
    network.write_text(NETWORK)

    job = train(dataset.id, str(network), name="stories", jobs_dir=jobs, epochs=6, batch_size=8, seed=0)
    info = json.loads((job.path / "model.json").read_text())
    assert job.status is JobStatus.DONE, job.data.get("error")
    assert info["task"] == "raw" and info["options"]["mean_subtraction"] == "none"
    losses = [p["value"] for p in read_metrics(job) if p["name"] == "val_loss"]
    assert losses[-1] < 0.5 * losses[0], losses  # it learns the answer word (chance: ln 5 = 1.61)


FLAT_NETWORK = '''
import keras

DEFAULTS = {"mean_subtraction": "none", "scale": "none"}


def build_model(input_shape, num_outputs, **params):  # one output per label value: the raw task's standard output
    inputs = keras.Input(shape=input_shape)
    return keras.Model(inputs, keras.layers.Dense(num_outputs)(keras.layers.Flatten()(inputs)))
'''


def test_raw_labels_train_a_flat_output_network_with_mse_and_need_a_network(tmp_path):
    from digits_core.engine import train
    from digits_core.errors import FormValidationError

    jobs = tmp_path / "jobs"
    dataset = build_dataset(Stories, {}, jobs_dir=jobs, name="flat")
    with pytest.raises(FormValidationError, match="raw labels have no default network"):
        train(dataset.id, None, name="none", jobs_dir=jobs, epochs=1)
    network = tmp_path / "flat_net.py"
    network.write_text(FLAT_NETWORK)
    job = train(dataset.id, str(network), name="flat", jobs_dir=jobs, epochs=1, batch_size=8, seed=0)
    info = json.loads((job.path / "model.json").read_text())
    assert info["task"] == "raw" and info["num_outputs"] == STORY * SENTENCE and info["loss"] == "mse"
    assert "val_mae" in info["final_metrics"], info["final_metrics"]
