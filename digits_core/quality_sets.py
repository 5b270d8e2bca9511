"""Small synthetic image sets for the quality floors (tests) and ``bench/quality.py``.

Each writer puts real image files on disk (PNG) in the layout a bundled
data plugin reads, and returns the form values that build the dataset:

* :func:`write_shapes_segmentation`: grey 32×32 images of discs and squares
  over a gradient and noise, with palette-free grayscale label masks
  (0 background, 1 disc, 2 square) for ``image-segmentation``;
* :func:`write_digit_regression`: scikit-learn's handwritten 8×8 digit
  scans (1,797 real scans) in a folder with a ``targets.csv`` of two targets
  per image, the digit value / 9 and the mean ink, for ``image-regression``;
* :func:`write_denoising_pairs`: noisy → clean pairs of digit scans for
  ``image-processing`` (image-to-image).

Numpy and Pillow only (no TensorFlow); the same seed gives the same files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _save_gray(path: Path, array: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(array, np.uint8), mode="L").save(path)


def shapes_image(rng: np.random.Generator, size: int = 32, two_classes: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """One image (uint8 ``size×size``) and its mask: 1-2 discs and squares, class 1 (or discs 1, squares 2).

    Shapes are brighter or darker than a random gradient background, with
    noise on top, so neither a threshold nor a constant predictor segments them.
    """
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    image = 90 + 60 * (np.cos(angle) * xx + np.sin(angle) * yy) / size
    mask = np.zeros((size, size), np.uint8)
    for _ in range(rng.integers(1, 3)):
        kind = int(rng.integers(1, 3))
        r = rng.uniform(size * 0.12, size * 0.25)
        cy, cx = rng.uniform(r, size - r, 2)
        if kind == 1:
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        else:
            inside = (np.abs(yy - cy) <= r) & (np.abs(xx - cx) <= r)
        mask[inside] = kind if two_classes else 1
        image[inside] = rng.uniform(150, 230) if rng.random() < 0.7 else rng.uniform(10, 50)
    image = image + rng.normal(0, 8, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), mask


def write_shapes_segmentation(
    folder: str | Path, images: int = 60, size: int = 32, seed: int = 0, val_percent: int = 20
) -> dict:
    """Write ``images`` shape images and masks under ``folder``; return the ``image-segmentation`` form values."""
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    for i in range(images):
        image, mask = shapes_image(rng, size)
        _save_gray(folder / "images" / f"{i:04d}.png", image)
        _save_gray(folder / "labels" / f"{i:04d}.png", mask)
    (folder / "classes.txt").write_text("background\ndisc\nsquare\n")
    return {
        "image_folder": str(folder / "images"),
        "label_folder": str(folder / "labels"),
        "class_labels_file": str(folder / "classes.txt"),
        "image_type": "grayscale",
        "width": size,
        "height": size,
        "val_percent": val_percent,
    }


def write_digit_regression(folder: str | Path, images: int | None = None, seed: int = 0, val_percent: int = 25) -> dict:
    """Write handwritten digit scans and ``targets.csv`` (``value`` = digit / 9, ``ink`` = mean ink in [0, 1]).

    Args:
        images: How many of the 1,797 scans (``None``: all), picked at random with ``seed``.

    Returns:
        The ``image-regression`` form values (8×8 grayscale).
    """
    from sklearn.datasets import load_digits

    folder = Path(folder)
    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))[:images]
    folder.mkdir(parents=True, exist_ok=True)
    rows = ["path,value,ink"]
    for i in order:
        scan = digits.images[i] / 16.0
        _save_gray(folder / "images" / f"{i:04d}.png", np.round(scan * 255))
        rows.append(f"images/{i:04d}.png,{digits.target[i] / 9.0:.6f},{scan.mean():.6f}")
    (folder / "targets.csv").write_text("\n".join(rows) + "\n")
    return {
        "image_folder": str(folder),
        "targets_file": str(folder / "targets.csv"),
        "image_type": "grayscale",
        "width": 8,
        "height": 8,
        "val_percent": val_percent,
    }


def write_denoising_pairs(
    folder: str | Path, images: int = 400, size: int = 16, noise: float = 0.1, seed: int = 0, val_percent: int = 25
) -> dict:
    """Write noisy → clean pairs of digit scans (bilinear to ``size``) for ``image-processing``.

    The noise is Gaussian with std ``noise`` (fraction of the 0-255 range), clipped.

    Returns:
        The ``image-processing`` form values (grayscale, ``size×size``).
    """
    from PIL import Image
    from sklearn.datasets import load_digits

    folder = Path(folder)
    rng = np.random.default_rng(seed)
    scans = load_digits().images
    for n, i in enumerate(rng.permutation(len(scans))[:images]):
        small = Image.fromarray((scans[i] * (255.0 / 16.0)).astype(np.uint8), mode="L")
        clean = np.asarray(small.resize((size, size), Image.Resampling.BILINEAR), np.float64)
        noisy = clean + rng.normal(0.0, 255.0 * noise, clean.shape)
        _save_gray(folder / "clean" / f"{n:04d}.png", clean)
        _save_gray(folder / "noisy" / f"{n:04d}.png", np.clip(np.round(noisy), 0, 255))
    return {
        "feature_folder": str(folder / "noisy"),
        "label_folder": str(folder / "clean"),
        "image_type": "grayscale",
        "width": size,
        "height": size,
        "val_percent": val_percent,
    }
