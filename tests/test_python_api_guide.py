"""docs/python-api.md runs as written: its ``<!-- api: run -->`` blocks, in order, as one script on stdin.

Feeding the script to ``python -`` is the embedding case of a notebook or
REPL: ``__main__`` is no file, TensorFlow is loaded, and the dataset's
encoder workers run in other processes.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "python-api.md"
BLOCK = re.compile(r"<!-- api: run -->\n```python\n(.*?)```", re.S)


def _blocks() -> list[str]:
    return BLOCK.findall(GUIDE.read_text(encoding="utf-8"))


def test_guide_blocks_and_public_names():
    import digits_core
    from digits_core import handles

    blocks = _blocks()
    assert len(blocks) >= 5
    text = GUIDE.read_text(encoding="utf-8")
    assert text.count("```python") == len(blocks), "every python block must be tagged <!-- api: run -->"
    for module, name in (
        ("datasets", "create_dataset"),
        ("datasets", "open_dataset"),
        ("engine", "train"),
        ("engine", "resume_training"),
        ("engine", "request_abort"),
        ("inference", "infer"),
        ("inference", "export_model"),
        ("engine", "load_snapshot"),
    ):
        assert callable(getattr(importlib.import_module(f"digits_core.{module}"), name)), name
        assert f"digits_core.{module}.{name}(" in text, name
    assert callable(handles.start_training) and callable(handles.start_dataset)
    assert (Path(digits_core.__file__).parent / "py.typed").is_file()


@pytest.mark.slow
def test_guide_runs_from_stdin(tmp_path):
    script = "\n".join(_blocks())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIGITS_")}
    env.update(DIGITS_JOBS_DIR=str(tmp_path / "jobs"), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, "-"], input=script, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "Done" in out.stdout and "Aborted" in out.stdout and "lenet.tar.gz True" in out.stdout
