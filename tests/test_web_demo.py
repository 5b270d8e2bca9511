"""The demo's (README.md, docs/getting-started.md) data export and command line (the demo end to end: tests/test_demo_end_to_end.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parent.parent


def load_demo():
    spec = importlib.util.spec_from_file_location("digits_demo_script", REPO / "scripts" / "demo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_export_sklearn_digits_to_class_folders(tmp_path):
    demo = load_demo()
    assert demo.export_sklearn_digits(tmp_path, per_class=3) == 30
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert folders == [str(d) for d in range(10)]
    image = np.asarray(Image.open(next((tmp_path / "7").iterdir())))
    assert image.shape == (8, 8) and image.dtype == np.uint8 and image.max() > 200
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.png")}
    assert demo.export_sklearn_digits(tmp_path, per_class=3) == 30  # a second run reuses the files
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.png")} == before


def test_demo_help_is_light():
    """``scripts/demo.py --help`` lists its options without importing TensorFlow or the web stack.

    The demo itself (train, reuse, serve) runs end to end in ``tests/test_demo_end_to_end.py``.
    """
    import subprocess
    import sys

    demo = REPO / "scripts" / "demo.py"
    code = (
        "import runpy, sys\n"
        f"sys.argv = [{str(demo)!r}, '--help']\n"
        "try:\n"
        f"    runpy.run_path({str(demo)!r}, run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "print('HEAVY', sorted(m for m in ('tensorflow', 'keras', 'flask') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for option in ("--no-serve", "--epochs-lenet", "--epochs-unet", "--jobs-dir", "--port"):
        assert option in result.stdout
    assert "HEAVY []" in result.stdout
