"""Fixtures of the data_sunnybrook tests: a small synthetic Sunnybrook set (real DICOM files)."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def synth_root(tmp_path_factory):
    """3 cases at 64x64, 3 slices each (the generator's real layout), generated once per session."""
    from digits_data_sunnybrook.synth import generate

    root = tmp_path_factory.mktemp("sunnybrook") / "synth"
    result = generate(root, cases=3, size=64, seed=0, slices=3)
    return result


@pytest.fixture
def synth_copy(synth_root, tmp_path):
    """A private copy of the synthetic set that a test may damage."""
    dest = tmp_path / "synth"
    shutil.copytree(synth_root.root, dest)
    return dest
