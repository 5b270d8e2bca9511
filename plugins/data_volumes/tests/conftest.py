"""Fixtures of the data_volumes tests: one small synthetic Decathlon task with its DICOM series (real files)."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def synth(tmp_path_factory):
    """6 cases of 12×24×24 voxels (one coarser, resampled; two with a flipped axis), NIfTI and DICOM."""
    from digits_data_volumes.synth import generate

    return generate(tmp_path_factory.mktemp("volumes") / "synth", cases=6, shape=(12, 24, 24), seed=1)


@pytest.fixture
def synth_copy(synth, tmp_path):
    """A private copy of the synthetic set that a test may damage."""
    dest = tmp_path / "synth"
    shutil.copytree(synth.root, dest)
    return dest
