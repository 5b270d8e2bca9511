"""A Python-API script saved as a file runs without an ``if __name__ == "__main__":`` guard (issue 43).

The script chooses the ``spawn`` start method itself (the default on macOS
and Windows), builds a dataset with two encoder workers and trains: a spawned
worker that re-ran the script would build the dataset again inside itself and
die. Each run of the script's top level appends a line to ``runs.txt``, so the
test sees that the workers never ran it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import multiprocessing
    import os
    from pathlib import Path

    import numpy as np
    from PIL import Image

    multiprocessing.set_start_method("spawn")  # what macOS and Windows do by default
    with open("runs.txt", "a") as runs:  # one line per run of this top level
        runs.write(f"{os.getpid()}\\n")

    rng = np.random.default_rng(0)
    for label in range(2):
        folder = Path("images") / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(10):
            pixels = rng.integers(0, 120, (8, 8)) + 120 * label
            Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{i}.png")

    from digits_core.datasets import create_dataset
    from digits_core.engine import train

    dataset = create_dataset(
        "image-classification",
        {"folder": "images", "image_type": "grayscale", "width": 8, "height": 8},
        name="spawned",
        workers=2,
    )
    model = train(dataset.id, "lenet", name="from a file", epochs=1, seed=1)
    print("result", dataset.status.value, model.status.value)
    """
)


@pytest.mark.slow
def test_script_file_without_main_guard_builds_with_spawned_workers_and_trains(tmp_path):
    (tmp_path / "embed.py").write_text(SCRIPT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env.update(DIGITS_JOBS_DIR=str(tmp_path / "jobs"), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, "embed.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "result Done Done" in out.stdout
    runs = (tmp_path / "runs.txt").read_text().split()
    assert len(runs) == 1, f"the script's top level ran in {len(runs) - 1} worker process(es) too"
