"""Layout by agreement (issue 11 item 3) and the channels-first check, with real LMDB and 2 workers."""

from __future__ import annotations

import numpy as np
import pytest
import wtforms

from digits_core import DataIngestion, registry
from digits_core.datasets import channels_first_problem, create_dataset, open_dataset
from digits_core.datasets.layout import agree_on_layout, check_channels_last
from digits_core.errors import DatasetError
from digits_core.interfaces.records import pack_record


class Form(wtforms.Form):
    n = wtforms.IntegerField("Entries", default=30)
    bad = wtforms.StringField("Entries with another shape (comma-separated)", default="")
    channels_first = wtforms.BooleanField("Return C×H×W", default=False)


class Shapes(DataIngestion):
    plugin_id = "test-shapes"
    title = "Shapes"

    @staticmethod
    def get_dataset_form():
        return Form

    @staticmethod
    def get_dataset_template(form):
        return "", {}

    def itemize_entries(self, stage):
        return list(range(self.n)) if stage == "train" else []

    def encode_entry(self, entry):
        bad = {int(b) for b in self.bad.split(",") if b}
        if self.channels_first:
            return np.full((1, 8, 8), entry, np.uint8), entry % 2
        shape = (3, 3, 1) if entry in bad else (5, 4, 1)
        return np.full(shape, entry, np.uint8), entry % 2


@pytest.fixture
def shapes():
    registry.register(Shapes)
    yield
    registry.unregister(Shapes)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_first_entry_no_longer_rejects_the_good_ones(shapes, tmp_path, workers):
    job = create_dataset("test-shapes", {"n": 30, "bad": "0,1"}, workers=workers, jobs_dir=tmp_path, max_errors=2)
    ds = open_dataset(job.path)
    assert ds.feature_shape() == (5, 4, 1) and ds.count("train") == 28
    errors = ds.errors()
    assert [e["entry"] for e in errors] == ["0", "1"]
    assert "(3, 3, 1)" in errors[0]["error"] and "differs from the dataset's" in errors[0]["error"]
    features, labels = ds.read_all("train")
    assert features[:, 0, 0, 0].tolist() == list(range(2, 30)) and labels.tolist() == [i % 2 for i in range(2, 30)]


def test_channels_first_features_fail_naming_the_plugin_and_the_fix(shapes, tmp_path):
    with pytest.raises(DatasetError) as info:
        create_dataset("test-shapes", {"n": 10, "channels_first": True}, workers=2, jobs_dir=tmp_path)
    message = str(info.value)
    assert 'Plugin "test-shapes"' in message and "(1, 8, 8)" in message and "channels-first" in message
    assert "transpose(1, 2, 0)" in message and "(8, 8, 1)" in message
    assert not any(tmp_path.glob("*/dataset"))


def test_channels_first_rule():
    assert channels_first_problem((1, 32, 32)) and channels_first_problem((3, 64, 64), "p")
    assert 'Plugin "p"' in channels_first_problem((3, 64, 64), "p")
    for fine in [(32, 32, 1), (32, 32, 3), (5, 5, 16), (4, 4, 4), (32, 32)]:
        assert channels_first_problem(fine) is None, fine
    with pytest.raises(DatasetError, match="transpose"):
        check_channels_last((2, 10, 10), "x")


def test_agreement_is_the_majority_and_the_first_seen_on_a_tie():
    a = pack_record(np.zeros((2, 2, 1), np.uint8), 0)[1]
    b = pack_record(np.zeros((3, 3, 1), np.uint8), 0)[1]
    assert agree_on_layout([a, b, b]) == b.layout
    assert agree_on_layout([b, a, a, b]) == b.layout
    assert agree_on_layout([]) is None
