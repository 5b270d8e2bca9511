"""Numpy helpers of the segmentation view: class maps, palettes, outlines, Dice/IoU.

Pure numpy, no TensorFlow: usable on their own and easy to test.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Built-in categorical colour map: class 0 (background) black, then the
#: 20 colours of the "tab20" scheme. Classes beyond 21 get evenly spread hues.
BUILTIN_PALETTE: tuple[tuple[int, int, int], ...] = (
    (0, 0, 0),
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
    (174, 199, 232),
    (255, 187, 120),
    (152, 223, 138),
    (255, 152, 150),
    (197, 176, 213),
    (196, 156, 148),
    (247, 182, 210),
    (199, 199, 199),
    (219, 219, 141),
    (158, 218, 229),
)
#: Colour of the ground-truth outline drawn on the overlay.
OUTLINE_COLOR = (255, 255, 255)


def builtin_color(index: int) -> tuple[int, int, int]:
    """Return the built-in colour of class ``index``."""
    if index < len(BUILTIN_PALETTE):
        return BUILTIN_PALETTE[index]
    hue = (index * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.75, 0.95)
    return int(round(r * 255)), int(round(g * 255)), int(round(b * 255))


def make_palette(num_classes: int, dataset_palette: Sequence[Sequence[int]] | None = None) -> np.ndarray:
    """Return a ``num_classes × 3`` uint8 palette.

    Args:
        num_classes: Number of colours needed.
        dataset_palette: The dataset's ``color_palette`` (list of ``[r, g, b]``);
            classes it does not cover get built-in colours. ``None`` uses the
            built-in map only.
    """
    colours = []
    for index in range(max(num_classes, 1)):
        if dataset_palette is not None and index < len(dataset_palette):
            colours.append([int(v) for v in list(dataset_palette[index])[:3]])
        else:
            colours.append(list(builtin_color(index)))
    return np.clip(np.asarray(colours, dtype=np.int64), 0, 255).astype(np.uint8)


def class_map(output: Any) -> tuple[np.ndarray, int]:
    """Turn a network output into an ``H×W`` map of class indices.

    ``H×W×N`` with N > 1: argmax over N (N classes). ``H×W×1`` or float
    ``H×W``: one foreground probability, thresholded at 0.5 (2 classes).
    Integer ``H×W``: already a class map.

    Returns:
        ``(classes, num_classes)``.

    Raises:
        ValueError: The output is not 2-D or 3-D.
    """
    output = np.asarray(output)
    if output.ndim == 3 and output.shape[-1] > 1:
        return np.argmax(output, axis=-1).astype(np.int64), int(output.shape[-1])
    if output.ndim == 3:
        output = output[:, :, 0]
    if output.ndim != 2:
        raise ValueError(f"segmentation output must be H×W or H×W×N, got shape {output.shape}")
    if np.issubdtype(output.dtype, np.integer) or output.dtype == np.bool_:
        classes = output.astype(np.int64)
        return classes, int(max(classes.max(initial=0) + 1, 2))
    return (output >= 0.5).astype(np.int64), 2


def colorize(classes: np.ndarray, palette: np.ndarray) -> np.ndarray:
    """Return the ``H×W×3`` uint8 image of a class map painted with ``palette``."""
    classes = np.asarray(classes)
    if classes.size and classes.max() >= len(palette):
        palette = make_palette(int(classes.max()) + 1, palette.tolist())
    return palette[classes]


def overlay(image_rgb: np.ndarray, coloured: np.ndarray, classes: np.ndarray, opacity: float) -> np.ndarray:
    """Blend the coloured map over the input where the class is not background (0).

    ``out = round((1 - opacity) * input + opacity * colour)`` on pixels whose
    predicted class is not 0; background pixels keep the input.
    """
    blended = (1.0 - opacity) * image_rgb.astype(np.float64) + opacity * coloured.astype(np.float64)
    out = image_rgb.copy()
    mask = np.asarray(classes) != 0
    out[mask] = np.clip(np.rint(blended[mask]), 0, 255).astype(np.uint8)
    return out


def outline(mask: np.ndarray) -> np.ndarray:
    """Return the boolean outline of the non-background regions of a class map.

    A pixel is on the outline when its class is not 0 and one of its four
    neighbours has another class (pixels on the image border count as next
    to background).
    """
    mask = np.asarray(mask)
    padded = np.pad(mask, 1, mode="constant", constant_values=0)
    centre = padded[1:-1, 1:-1]
    differs = (
        (padded[:-2, 1:-1] != centre)
        | (padded[2:, 1:-1] != centre)
        | (padded[1:-1, :-2] != centre)
        | (padded[1:-1, 2:] != centre)
    )
    return differs & (centre != 0)


def dice_iou(predicted: np.ndarray, truth: np.ndarray) -> dict[int, dict[str, float]]:
    """Return Dice and IoU per class present in the prediction or the truth.

    ``Dice = 2|P∩G| / (|P| + |G|)``, ``IoU = |P∩G| / |P∪G|``.

    Args:
        predicted: ``H×W`` class map.
        truth: ``H×W`` class map of the same shape.

    Returns:
        ``{class: {"dice", "iou", "predicted", "truth"}}`` (pixel counts included).
    """
    predicted = np.asarray(predicted).reshape(-1)
    truth = np.asarray(truth).reshape(-1)
    result = {}
    for c in np.union1d(np.unique(predicted), np.unique(truth)):
        p = predicted == c
        g = truth == c
        inter = int(np.count_nonzero(p & g))
        n_p, n_g = int(np.count_nonzero(p)), int(np.count_nonzero(g))
        union = n_p + n_g - inter
        result[int(c)] = {"dice": 2.0 * inter / (n_p + n_g), "iou": inter / union, "predicted": n_p, "truth": n_g}
    return result
