"""Phase marks (``DIGITS_PHASE_LOG``): written only when asked, read back as ordered durations (no TensorFlow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from digits_core import phase_marks


def test_marks_are_written_only_when_asked_and_read_back_in_order(tmp_path):
    log = tmp_path / "phases.jsonl"
    phase_marks.mark("before")  # not enabled in the test process: nothing written anywhere
    phase_marks.log_to(log)
    try:
        assert phase_marks.enabled()
        for name in ("imports", "steps", "validation", "steps"):
            phase_marks.mark(name)
    finally:
        phase_marks.log_to(None)
    phase_marks.mark("after")
    assert not phase_marks.enabled()
    stamps = [json.loads(line)["t"] for line in log.read_text().splitlines()]
    assert len(stamps) == 4 and stamps == sorted(stamps)
    phases = phase_marks.read_marks(log, started=stamps[0] - 1.0, ended=stamps[-1] + 2.0)
    assert [name for name, _ in phases] == ["imports", "steps", "validation", "steps", "exit"]
    assert abs(phases[0][1] - 1.0) < 1e-6 and abs(phases[-1][1] - 2.0) < 1e-6
    assert all(seconds >= 0 for _, seconds in phases)


@pytest.mark.slow  # two `digits` subprocesses
def test_the_environment_variable_marks_the_interpreter_and_the_cli(tmp_path):
    log = tmp_path / "cli.phases"
    env = {**os.environ, phase_marks.PHASE_LOG_ENV: str(log)}
    subprocess.run(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(tmp_path / "jobs"), "networks"],
        env=env,
        check=True,
        capture_output=True,
    )
    names = [json.loads(line)["phase"] for line in log.read_text().splitlines()]
    assert names == ["interpreter", "imports", "report"]
    plain = {k: v for k, v in os.environ.items() if k != phase_marks.PHASE_LOG_ENV}
    subprocess.run(
        [sys.executable, "-m", "digits_core", "--jobs-dir", str(tmp_path / "jobs"), "networks"],
        env=plain,
        check=True,
        capture_output=True,
    )
    assert len(log.read_text().splitlines()) == 3  # nothing more without the variable


#: `digits train` as its own process (sys.argv[0] "digits"), with an atexit handler a plugin could have registered.
TRAIN_DRIVER = """
import atexit, sys
marker = sys.argv.pop(1)
atexit.register(lambda: open(marker, "w").write("ran"))
sys.argv[0] = "digits"
from digits_core.cli import main
sys.exit(main())
"""


@pytest.mark.slow  # trains LeNet for one epoch in a subprocess
def test_digits_train_process_phases_and_its_fast_exit(tmp_path):
    from synthetic_plugins import build_small_shapes_dataset

    dataset = build_small_shapes_dataset(tmp_path / "jobs")
    log, marker = tmp_path / "train.phases", tmp_path / "atexit-ran"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            TRAIN_DRIVER,
            str(marker),
            "--jobs-dir",
            str(tmp_path / "jobs"),
            "train",
            "--dataset",
            dataset,
            "--network",
            "lenet",
            "--epochs",
            "1",
            "--batch-size",
            "32",
            "--quiet",
        ],
        env={**os.environ, phase_marks.PHASE_LOG_ENV: str(log)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Done; last epoch 1.0" in done.stdout  # printed and flushed before os._exit
    assert marker.read_text() == "ran"  # atexit handlers still run
    names = [json.loads(line)["phase"] for line in log.read_text().splitlines()]
    assert names[:4] == ["interpreter", "imports", "tensorflow import", "job set-up"]
    assert names[-2:] == ["job finish", "report"]
    (model,) = [p for p in (tmp_path / "jobs").iterdir() if (p / "model.json").is_file()]
    info = json.loads((model / "model.json").read_text())
    assert info["status"] == "Done" and [s["file"] for s in info["snapshots"]] == ["epoch-001.keras"]
    assert (model / "snapshots" / "epoch-001.keras").stat().st_size > 0 and list((model / "tb").iterdir())
