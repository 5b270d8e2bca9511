"""How `digits infer` reports its inputs (issue 27): names, skipped inputs once, library warnings apart.

Fast (no TensorFlow): the naming and collecting helpers the command uses. The Sunnybrook model's
own options named for a DICOM file given as a plain input is checked in
``tests/test_inference_sunnybrook.py`` (it needs a trained model).
"""

from __future__ import annotations

import logging
import warnings
from typing import NamedTuple

from digits_core.cli.infer_cmd import library_messages
from digits_core.inference.reading import Budget, entry_name


class FrameEntry(NamedTuple):
    contour: str
    frame: int
    dicom: str


class NamedEntry(tuple):
    def __str__(self):
        return f"case {self[0]}"


def test_entries_are_named_by_file_and_frame_not_by_tuple_reprs():
    assert entry_name(("dicoms/emri_small.dcm", 3, None)) == "dicoms/emri_small.dcm (3)"
    assert entry_name(FrameEntry("", 3, "dicoms/emri_small.dcm")) == "dicoms/emri_small.dcm (frame 3)"
    assert entry_name(NamedEntry((7,))) == "case 7"  # an entry's own str() wins
    assert entry_name("img/1.png") == "img/1.png"


def test_library_warnings_are_collected_once_each_not_printed(capsys):
    with library_messages() as messages:
        for _ in range(3):
            warnings.warn("Invalid value for VR UI", UserWarning, stacklevel=1)
            logging.getLogger("pydicom").warning("Expected explicit VR, but found implicit VR")
    assert messages == ["pydicom: Expected explicit VR, but found implicit VR", "UserWarning: Invalid value for VR UI"]
    assert capsys.readouterr().err == ""  # nothing reached the terminal (the progress line) meanwhile
    assert logging.getLogger("pydicom").propagate is True  # restored


def test_a_skipped_input_is_logged_only_for_debugging(caplog):
    budget = Budget(None, 2)
    with caplog.at_level(logging.WARNING):
        budget.skip("a.png", ValueError("broken"))
    assert budget.errors == [{"input": "a.png", "error": "ValueError: broken"}]
    assert not caplog.records  # the command prints the skipped list itself: once
