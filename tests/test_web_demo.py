"""The README demo's data export (the training part runs in `make demo`, not here)."""

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
    demo = load_demo()
    assert "demo" in demo.__doc__.lower() and callable(demo.main)
