"""Helpers that write real image files for the data_images tests."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def save_image(path: Path, arr: np.ndarray, fmt: str | None = None, **kwargs) -> Path:
    """Write ``arr`` (H×W, H×W×3 uint8, or H×W uint16) with Pillow; returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, format=fmt, **kwargs)
    return path


def random_rgb(h: int, w: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def random_gray(h: int, w: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w), dtype=np.uint8)


def truncated_png(path: Path, arr: np.ndarray) -> Path:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    return path


@pytest.fixture
def images():
    """The helper functions, as a namespace."""

    class Helpers:
        save = staticmethod(save_image)
        rgb = staticmethod(random_rgb)
        gray = staticmethod(random_gray)
        truncated = staticmethod(truncated_png)

    return Helpers
