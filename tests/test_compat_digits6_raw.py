"""A DIGITS 6 plugin whose labels are raw arrays (the bAbI idiom) trains with a network of the user's own.

The fixture plugin ``tests/digits6_plugins/data_stories`` writes what DIGITS
6's bAbI plugin wrote: a ``2×story×sentence`` float feature (story and
question as word ids) and a float ``1×story×sentence`` answer label, stored
``raw`` with that shape; and, like bAbI, it prints as it goes. The ``raw``
task feeds the labels to the network's own loss in that shape (the loss below
indexes ``y_true[:, 0, 0, 0]``, the answer's first word, as a bAbI network
does). The first tests build it in process; the last one pip-installs it and
runs it through ``digits dataset create``, ``digits train``, ``digits infer``
(``--json`` and the wrapped DIGITS 6 built-in view ``raw-output6``) and the
web UI's model page.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import pip_install_target
from test_compat_digits6_plugins import _dataset_json, on_path  # noqa: F401  (fixture)

import digits  # noqa: F401  (installs flask.ext.wtf)
from digits_core.plugins.testing import build_dataset

FIXTURES = Path(__file__).resolve().parent / "digits6_plugins"
sys.path.insert(0, str(FIXTURES / "data_stories"))  # the fixture plugin's source, for the in-process tests

from digits6StoriesData import DataIngestion as Stories  # noqa: E402
from digits6StoriesData.data import PLACES, SENTENCE_SIZE, STORY_SIZE, WORDS  # noqa: E402

pytestmark = pytest.mark.slow  # TensorFlow training

NETWORK = """
import keras
from keras import ops

DEFAULTS = {"mean_subtraction": "none", "scale": "none", "solver": "adam", "learning_rate": 0.05,
            "lr_policy": "fixed"}


def build_model(input_shape, num_outputs, **params):
    inputs = keras.Input(shape=input_shape, name="story_question")  # word ids: story x sentence x 2
    words = keras.layers.Embedding(%d, 8)(ops.cast(inputs, "int32"))
    x = keras.layers.Dense(16, activation="relu")(keras.layers.Flatten()(words))
    outputs = keras.layers.Dense(%d, activation="softmax", name="answer")(x)  # one probability a word id

    def answer_loss(y_true, y_pred):  # the raw label in its stored shape: N x 1 x story x sentence
        return keras.losses.sparse_categorical_crossentropy(ops.cast(y_true[:, 0, 0, 0], "int32"), y_pred)

    return keras.Model(inputs, outputs), answer_loss, []
""" % (len(WORDS) + 1, len(WORDS) + 1)


def test_raw_labels_train_with_the_networks_own_loss_in_their_stored_shape(tmp_path):
    from digits_core.engine import read_metrics, train
    from digits_core.jobs import JobStatus

    jobs = tmp_path / "jobs"
    dataset = build_dataset(Stories, {}, jobs_dir=jobs)
    assert (dataset.label_kind, dataset.label_dtype, dataset.label_shape) == (
        "raw",
        "float32",
        (1, STORY_SIZE, SENTENCE_SIZE),
    )
    network = tmp_path / "story_net.py"
    network.write_text(NETWORK)

    job = train(dataset.id, str(network), name="stories", jobs_dir=jobs, epochs=6, batch_size=8, seed=0)
    info = json.loads((job.path / "model.json").read_text())
    assert job.status is JobStatus.DONE, job.data.get("error")
    assert info["task"] == "raw" and info["options"]["mean_subtraction"] == "none"
    losses = [p["value"] for p in read_metrics(job) if p["name"] == "val_loss"]
    assert losses[-1] < 0.5 * losses[0], losses  # it learns the answer word (chance: ln 12 = 2.48)


FLAT_NETWORK = """
import keras

DEFAULTS = {"mean_subtraction": "none", "scale": "none"}


def build_model(input_shape, num_outputs, **params):  # one output per label value: the raw task's standard output
    inputs = keras.Input(shape=input_shape)
    return keras.Model(inputs, keras.layers.Dense(num_outputs)(keras.layers.Flatten()(inputs)))
"""


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
    assert info["task"] == "raw" and info["num_outputs"] == STORY_SIZE * SENTENCE_SIZE and info["loss"] == "mse"
    assert "val_mae" in info["final_metrics"], info["final_metrics"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> list[Path]:
    """The stories data plugin and the DIGITS 6 built-in view rawOutput6 (wrap-digits6), really pip-installed."""
    from digits_core.scaffold.digits6 import wrap_digits6

    root = tmp_path_factory.mktemp("digits6-stories")
    stories = shutil.copytree(FIXTURES / "data_stories", root / "src" / "data_stories")
    view = wrap_digits6(FIXTURES / "builtin_view" / "rawOutput6", root / "src").folder
    return [pip_install_target(stories, root / "stories"), pip_install_target(view, root / "view")]


SNIPPET = "Mary went to the office.\nJohn went to the kitchen.\nMary went to the hallway.\nJohn went to the garden."
ANSWERS = [PLACES.index(place) + 1 for place in ("office", "kitchen", "hallway", "garden")]  # their word ids


@pytest.mark.usefixtures("on_path")
def test_stories_on_the_cli_and_the_web_json_stdout_clean_of_the_plugins_prints(
    installed, digits_cli, tmp_path, capsys
):
    from digits_core.cli import main

    jobs = tmp_path / "jobs"
    base = ["--jobs-dir", str(jobs)]
    created = digits_cli(
        *base,
        "dataset",
        "create",
        "stories6",
        "--train-count",
        "48",
        "--val-count",
        "8",
        "--workers",
        "2",
        "--json",
        pythonpath=installed,
    )
    dataset = _dataset_json(created)["job"]  # stdout is the JSON alone: the plugin's prints went to stderr
    assert "word map has 11 words" in created.stderr and "encoding mary went to the kitchen" in created.stderr
    assert dataset["dataset"]["label"] == {"kind": "raw", "dtype": "float32", "shape": [1, STORY_SIZE, SENTENCE_SIZE]}
    assert dataset["dataset"]["feature"]["shape"] == [STORY_SIZE, SENTENCE_SIZE, 2]
    assert dataset["dataset"]["stages"] == {"train": 48, "val": 8}

    network = tmp_path / "story_net.py"
    network.write_text(NETWORK)
    assert (
        main(
            base
            + [
                "train",
                "--dataset",
                dataset["id"],
                "--network",
                str(network),
                "--epochs",
                "12",
                "--batch-size",
                "8",
                "--seed",
                "0",
                "--name",
                "stories",
                "--quiet",
                "--json",
            ]
        )
        == 0
    )
    model = json.loads(capsys.readouterr().out)
    assert model["status"] == "Done" and model["task"] == "raw", model

    # digits infer --json in a fresh process: the plugin prints in __init__, itemize_entries and encode_entry
    inferred = digits_cli(
        *base,
        "infer",
        "--model",
        model["job_id"],
        "--snippet",
        SNIPPET,
        "--view",
        "raw-output6",
        "--json",
        pythonpath=installed,
        timeout=300,
    )
    assert inferred.returncode == 0, inferred.stderr
    result = json.loads(inferred.stdout)
    assert (
        "lines are ['Mary went to the office.'" in inferred.stderr
        and "encoding john went to the garden" in inferred.stderr
        and "word map has 11 words" in inferred.stderr
    )
    assert result["view"] == "raw-output6" and len(result["samples"]) == 4
    for sample, answer in zip(result["samples"], ANSWERS):
        output = np.array(sample["output"])
        assert output.shape == (len(WORDS) + 1,) and abs(output.sum() - 1) < 1e-4  # the softmax over word ids
        assert int(output.argmax()) == answer, (sample, answer)  # where each person went
        assert sample["view"]["shapes"] == {"output": [len(WORDS) + 1]}
        assert np.allclose(sample["view"]["outputs"]["output"], output[:8], atol=1e-6)  # DIGITS 6's ravel()[:8]

    # Web UI: the plugin's inference form on the model page, the results through the DIGITS 6 view
    from digits_core.web import create_app

    app = create_app(jobs, start_scheduler=False, testing=True)
    client = app.test_client()
    try:
        model_page = client.get(f"/models/{model['job_id']}").get_data(as_text=True)
        assert 'name="snippet"' in model_page and "One story a line" in model_page
        token = client.get("/api/csrf-token").get_json()["csrf_token"]
        page = client.post(
            f"/models/{model['job_id']}/infer",
            follow_redirects=True,
            data={"csrf_token": token, "input_mode": "plugin", "view_id": "raw-output6", "snippet": SNIPPET},
        )
        body = page.get_data(as_text=True)
        assert page.status_code == 200, body[-3000:]
        assert body.count(f'<td class="raw-output6-shape">[{len(WORDS) + 1}]</td>') == 4, body[-3000:]
        rows = re.findall(r'<td class="raw-output6-shape">\[\d+\]</td><td>\[([^\]]*)\]</td>', body)
        assert [int(np.argmax([float(v) for v in row.split(",")])) for row in rows] == ANSWERS
    finally:
        app.extensions["digits"]["inference_worker"].close()
