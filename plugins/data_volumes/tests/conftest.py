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


@pytest.fixture(scope="session")
def trained(synth, tmp_path_factory):
    """An ``msd-volumes`` dataset of :func:`synth` and a short ``unet3d`` run on it, from the CLI (one per session).

    Returns:
        ``(jobs folder, dataset folder, model folder)``.
    """
    from digits_core.cli import main

    jobs = tmp_path_factory.mktemp("jobs")
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "dataset",
                "create",
                "msd-volumes",
                "--data-folder",
                str(synth.task),
                "--pct-val",
                "34",
            ]
        )
        == 0
    )
    (dataset,) = [p for p in jobs.iterdir() if (p / "dataset" / "dataset.json").is_file()]
    assert (
        main(
            [
                "--jobs-dir",
                str(jobs),
                "train",
                "--dataset",
                dataset.name,
                "--network",
                "unet3d",
                "--quiet",
                "--epochs",
                "6",
                "--validation-interval",
                "3",
                "--volume-steps-per-epoch",
                "15",
            ]
        )
        == 0
    )
    (model,) = [p for p in jobs.iterdir() if (p / "model.keras").is_file()]
    return jobs, dataset, model


@pytest.fixture
def case_records():
    """A reader of a built dataset job: ``records(job)`` gives ``{case name: (stage, Volume, label)}``."""
    import json

    from digits_core.datasets.volumes import VolumeStageReader

    def records(job) -> dict:
        folder = job.path / "dataset"
        info = json.loads((folder / "dataset.json").read_text())
        out = {}
        for stage in ("train", "val"):
            reader = VolumeStageReader(folder / stage)
            try:
                for index in range(info["stages"][stage]["count"]):
                    volume, label = reader.case(index)
                    out[volume.name] = (stage, volume, label)
            finally:
                reader.close()
        return out

    return records
