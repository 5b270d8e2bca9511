"""Dataset job options are declared once (digits_core/datasets/options.py); docs and front doors follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from digits_core.datasets.options import (
    DATASET_OPTIONS,
    DatasetOptionsError,
    check_dataset_options,
    markdown_table,
)
from digits_core.errors import DatasetError

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_table_is_generated_from_the_declaration():
    text = README.read_text(encoding="utf-8")
    begin, end = "<!-- dataset-options:begin -->\n", "<!-- dataset-options:end -->"
    assert begin in text and end in text
    assert text.split(begin, 1)[1].split(end, 1)[0] == markdown_table(), \
        "README's dataset options table is stale: paste `python -m digits_core.datasets.options` between the markers"


def test_values_are_normalized_and_empty_means_the_default():
    assert check_dataset_options({"name": "  digits ", "group": " a   b ", "workers": "2", "max_errors": "5%"}) == {
        "name": "digits", "group": "a b", "workers": 2, "max_errors": 0.05}
    assert check_dataset_options({"name": "", "workers": "", "max_errors": " "}) == {
        "name": None, "group": None, "workers": None, "max_errors": None}
    assert check_dataset_options({"max_errors": 10})["max_errors"] == 10


def test_bad_values_and_unknown_options_are_refused_per_option():
    with pytest.raises(DatasetOptionsError) as info:
        check_dataset_options({"workers": 0, "max_errors": "lots", "group": "a\x01b", "wokers": 2}, "new dataset")
    errors = info.value.errors
    assert set(errors) == {"workers", "max_errors", "group", "wokers"}
    assert "at least 1" in errors["workers"][0] and "lots" in errors["max_errors"][0]
    assert "control characters" in errors["group"][0] and "no such dataset job option" in errors["wokers"][0]
    assert isinstance(info.value, DatasetError) and "new dataset" in str(info.value)
    for bad in ("2.5", "-1", True, [2]):
        with pytest.raises(DatasetOptionsError, match="workers"):
            check_dataset_options({"workers": bad})
    with pytest.raises(DatasetOptionsError, match="at most 200"):
        check_dataset_options({"name": "x" * 201})


def test_every_option_is_a_job_record_key():
    from digits_core.job_record import JobRecord

    declared = set(JobRecord.__required_keys__) | set(JobRecord.__optional_keys__)
    assert {o.name for o in DATASET_OPTIONS} <= declared
