"""The ``saliency`` view: the classification view plus an occlusion saliency map per input.

It needs the model, and gets it from the core as :attr:`digits_core.View.model_context`
(plugin API 1.2): no model id is typed anywhere. For each input it covers one
square patch at a time with the input's mean value, runs the model on all the
covered copies at once through ``model_context.run``, and shades each patch by
how much the predicted class's probability fell (Zeiler & Fergus's occlusion
sensitivity): the regions the decision rests on light up red. Everything else
(the top-N list, accuracy, the confusion matrix) is the ``image-classification``
view's, so choosing this view as the default for classification loses nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from wtforms import IntegerField
from wtforms.validators import InputRequired, NumberRange

from digits_core import View, png_data_uri, to_display_rgb

from .view import ClassificationConfigForm, ClassificationView, to_probabilities

PACKAGE = __name__.rsplit(".", 1)[0]


class SaliencyConfigForm(ClassificationConfigForm):
    """The classification view's options, plus the occlusion grid."""

    grid = IntegerField(
        "Occlusion grid",
        default=8,
        validators=[InputRequired(), NumberRange(min=2, max=32)],
        description="The input is covered patch by patch on a grid of this many patches per side "
        "(one model run per patch)",
    )


def occlusion_saliency(image: np.ndarray, run: Any, grid: int, target: int | None = None) -> tuple[np.ndarray, int]:
    """Occlusion sensitivity of one input.

    Args:
        image: The input ``H×W×C`` (or ``H×W``) as the model takes it.
        run: ``run(batch)`` → outputs ``[N, classes]`` (a :class:`~digits_core.ViewContext`'s ``run``).
        grid: Patches per side (capped by the image size).
        target: The class whose probability is watched (default: the predicted class).

    Returns:
        ``(saliency, target)``: an ``H×W`` float map in ``[0, 1]``, each patch's fall in the target's
        probability relative to the largest fall (all zero when no patch lowers it), and the class.
    """
    image = np.asarray(image)
    if image.ndim == 2:
        image = image[:, :, None]
    height, width = image.shape[:2]
    rows = np.linspace(0, height, min(grid, height) + 1).round().astype(int)
    cols = np.linspace(0, width, min(grid, width) + 1).round().astype(int)
    fill = image.reshape(-1, image.shape[2]).mean(axis=0).astype(image.dtype)
    patches = [(r0, r1, c0, c1) for r0, r1 in zip(rows, rows[1:]) for c0, c1 in zip(cols, cols[1:])]
    batch = np.repeat(image[None], len(patches) + 1, axis=0)
    for k, (r0, r1, c0, c1) in enumerate(patches, start=1):
        batch[k, r0:r1, c0:c1] = fill
    outputs = np.asarray(run(batch))
    base = to_probabilities(outputs[0])
    target = int(np.argmax(base)) if target is None else int(target)
    drops = np.array([base[target] - to_probabilities(o)[target] for o in outputs[1:]])
    drops = np.clip(drops, 0.0, None)
    saliency = np.zeros((height, width), np.float64)
    if drops.max() > 0:
        for drop, (r0, r1, c0, c1) in zip(drops / drops.max(), patches):
            saliency[r0:r1, c0:c1] = drop
    return saliency, target


def overlay(image: np.ndarray, saliency: np.ndarray) -> np.ndarray:
    """The input in gray with the saliency shaded red over it (``H×W×3`` uint8)."""
    gray = to_display_rgb(np.asarray(image)).astype(np.float64).mean(axis=2, keepdims=True)
    alpha = 0.75 * saliency[:, :, None]
    red = np.array([230.0, 30.0, 30.0])
    return (gray * (1 - alpha) + red * alpha).round().clip(0, 255).astype(np.uint8)


class SaliencyView(ClassificationView):
    """Top-N classes and an occlusion saliency map of the predicted class, per input.

    Config (see :class:`SaliencyConfigForm`): the classification view's options and ``grid``
    (patches per side, default 8). Without a model (:attr:`model_context` is ``None``) it shows
    what the classification view shows and says why the map is missing.
    """

    plugin_id = "saliency"
    title = "Image classification with occlusion saliency"

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        self.grid = int(self.config.get("grid") or 8)

    config_form = SaliencyConfigForm

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """The classification view's data plus ``saliency`` (PNG data URI, or ``None`` without a model),
        ``saliency_class`` (the class it explains) and ``saliency_note``."""
        data = super().process_data(input_id, input_data, output_data, ground_truth)
        data.update(saliency=None, saliency_class=None, saliency_note=None)
        context = self.model_context
        if context is None or input_data is None:
            data["saliency_note"] = "No saliency map: this page was made without the model at hand."
            return data
        target = data["predictions"][0]["index"] if data["predictions"] else None
        saliency, target = occlusion_saliency(np.asarray(input_data), context.run, self.grid, target)
        data["saliency"] = png_data_uri(overlay(input_data, saliency), max_size=self.thumbnail_size)
        data["saliency_class"] = self.label_of(target)
        return data

    def get_view_template(self, data):
        """The saliency map in front of the classification view's sample."""
        source, context = super().get_view_template(data)
        saliency_source, _ = View.template_from_package(PACKAGE, "templates/saliency.html")
        return saliency_source + source, context
