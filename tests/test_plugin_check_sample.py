"""`digits plugin check` samples entries spread over the input, finds mixed shapes/dtypes, names the failing step."""

import numpy as np
from wtforms import Form, IntegerField

from digits_core import DataIngestion
from digits_core.plugins.check import spread
from digits_core.plugins.testing import check_plugin


class _Files(DataIngestion):
    plugin_id = "mixed-files"

    @staticmethod
    def get_dataset_form():
        return type("F", (Form,), {"count": IntegerField(default=20)})

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count }}", {}

    def itemize_entries(self, stage):
        return list(range(int(self.count))) if stage == "train" else []

    def encode_entry(self, entry):
        size = 32 if entry >= 15 else 28  # the late files of a folder come from another scanner
        return np.zeros((size, size, 1), np.uint8 if entry < 18 else np.uint16), 0


class _Broken(_Files):
    plugin_id = "broken-encode"

    def encode_entry(self, entry):
        raise ValueError("no pixel data")


def test_spread_samples_first_to_last():
    assert spread(list(range(20)), 3) == [0, 10, 19]
    assert spread([1, 2], 5) == [1, 2] and spread(list(range(9)), 1) == [0]


def test_mixed_shapes_and_dtypes_are_reported_with_the_fix():
    report = check_plugin(_Files, entries=5)
    (check,) = [c for c in report.failures if c.name == "feature shapes"]
    assert "28×28×1 uint8 (train: 0)" in check.message and "32×32×1" in check.message and "uint16" in check.message
    assert "resize" in check.message and not report.ok
    assert not [c for c in report.failures if c.name.startswith("encode_entry(")]  # each entry alone is fine


def test_every_encode_failing_is_named_as_such():
    report = check_plugin(_Broken, entries=3)
    (summary,) = [c for c in report.checks if c.name == "encode_entry"]
    assert summary.status == "failed" and summary.message.startswith("every encode_entry call failed")
    assert "itemize" not in summary.message
