"""DIGITS's "Top N predictions per category": for each class, the N inputs the model scores highest for it.

Run on a folder or list of images, it shows what a classifier believes each
class looks like (and which inputs of other classes it confuses with it).
:func:`top_per_class` is the ranking (plain numpy); :func:`top_images_per_class`
runs a model through :func:`digits_core.inference.infer` and returns the
ranking with a thumbnail of each image, as JSON (the web UI calls it in its
inference worker process).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import InferenceError

#: DIGITS's default N.
DEFAULT_N = 9
#: Thumbnails are shrunk to at most this many pixels on their longer side.
THUMBNAIL_SIZE = 96


def top_per_class(scores: Any, n: int) -> list[list[int]]:
    """For each class, the indexes of the ``n`` inputs with the highest score for it, highest first.

    Args:
        scores: ``[N inputs, K classes]`` probabilities (or any scores).
        n: How many inputs per class (fewer when there are fewer inputs).

    Returns:
        ``K`` lists of input indexes; equal scores keep input order.
    """
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise InferenceError(f"Top N per category needs one score per class and input, not shape {scores.shape}.")
    n = max(0, int(n))
    return [np.argsort(-scores[:, k], kind="stable")[:n].tolist() for k in range(scores.shape[1])]


def top_images_per_class(
    model_id: Any,
    inputs: Iterable[Any],
    n: int = DEFAULT_N,
    *,
    epoch: float | None = None,
    jobs_dir: Any = None,
    max_errors: Any = None,
) -> dict:
    """Run a classification model on images and rank them per class.

    Args:
        model_id: Model job id, unique prefix or folder.
        inputs: Image files, folders or list files (as for :func:`~digits_core.inference.infer`).
        n: Images per class.
        epoch: Snapshot epoch (default: the last).
        jobs_dir: The jobs folder.
        max_errors: Unreadable inputs allowed (see :func:`~digits_core.inference.infer`).

    Returns:
        ``{"model", "n", "inputs", "errors", "classes": [{"index", "label", "images":
        [{"input_id", "probability", "image" (PNG data URI)}]}]}``.

    Raises:
        InferenceError: Not a classification model, or the inputs fail.
    """
    from .images import png_data_uri
    from .runner import infer

    if int(n) < 1:
        raise InferenceError("Top N per category: N must be at least 1.")
    result = infer(model_id, inputs, epoch=epoch, jobs_dir=jobs_dir, top_n_classes=1, max_errors=max_errors)
    if result.model.task != "classification":
        raise InferenceError(f"Top N per category is for classification models; this one is for {result.model.task}.")
    scores = result.outputs
    labels = list(result.model.class_labels or [str(k) for k in range(scores.shape[1])])
    thumbnails: dict[int, str] = {}
    classes = []
    for k, ranked in enumerate(top_per_class(scores, n)):
        images = []
        for i in ranked:
            if i not in thumbnails:
                thumbnails[i] = png_data_uri(result.samples[i].input_data, max_size=THUMBNAIL_SIZE)
            images.append(
                {"input_id": result.samples[i].input_id, "probability": float(scores[i, k]), "image": thumbnails[i]}
            )
        classes.append({"index": k, "label": labels[k] if k < len(labels) else str(k), "images": images})
    return {
        "model": result.model.describe(),
        "n": int(n),
        "inputs": len(result.samples),
        "errors": list(result.errors),
        "classes": classes,
    }
