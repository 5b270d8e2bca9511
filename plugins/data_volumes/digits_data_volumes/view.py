"""The ``volume`` view: a label volume over its image, scrolled slice by slice in the browser.

Per case: the image windowed to 8 bits (1st to 99th percentile), the label
volume, the voxel spacing and the class colours go to the page as base64
bytes; the page's script draws one slice on a canvas with the label blended
over it, in the axial, coronal or sagittal plane (a plane selector, a
slider, and the arrow / Page keys; it scales with the screen, so it works on
a phone). The view also reports the volume of each class in mL and, when
ground truth is given, per-class Dice and HD95 (mm).

Arrays are canonical ``D×H×W`` (``D×H×W×C`` images show channel 0).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
from wtforms import FloatField, Form
from wtforms.validators import InputRequired, NumberRange

from digits_core import View

PACKAGE = __name__.rsplit(".", 1)[0]
DEFAULT_PALETTE = [[0, 0, 0], [255, 64, 64], [64, 200, 64], [64, 96, 255], [255, 200, 0], [200, 64, 255]]


class VolumeConfigForm(Form):
    """Options of the volume view."""

    opacity = FloatField(
        "Overlay opacity",
        default=0.45,
        validators=[InputRequired(), NumberRange(0, 1)],
        description="How much of the label colour covers the image (0 to 1).",
    )


def window_uint8(image: np.ndarray) -> np.ndarray:
    """``image`` scaled to 0..255 between its 1st and 99th percentile."""
    data = np.asarray(image, dtype=np.float32)
    low, high = np.percentile(data, [1, 99]) if data.size else (0.0, 1.0)
    scale = 255.0 / (high - low) if high > low else 0.0
    return np.clip((data - low) * scale, 0, 255).astype(np.uint8)


class VolumeView(View):
    """Slice-scrolling view of label volumes (see the module docstring)."""

    plugin_id = "volume"
    title = "Volume slices with label overlay"

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        info = dataset if isinstance(dataset, dict) else getattr(dataset, "info", {}) or {}
        self.class_labels = list(info.get("class_labels") or ["background", "foreground"])
        self.palette = [list(c) for c in (info.get("color_palette") or DEFAULT_PALETTE)]
        self.opacity = float(config.get("opacity", 0.45))

    config_form = VolumeConfigForm

    @staticmethod
    def get_config_template(form):
        """No config page of its own: the opacity field is rendered by the generic form."""
        return None, None

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """One case: ``input_data`` a ``Volume`` (or array), ``output_data`` the ``D×H×W`` label."""
        array = getattr(input_data, "array", input_data)
        spacing = [float(s) for s in getattr(input_data, "spacing", (1.0, 1.0, 1.0))]
        image = np.asarray(array)
        image = image[..., 0] if image.ndim == 4 else image
        label = np.asarray(output_data).astype(np.uint8)
        voxel_ml = float(np.prod(spacing)) / 1000.0
        counts = np.bincount(label.ravel(), minlength=len(self.class_labels))
        data = {
            "id": str(input_id),
            "shape": list(label.shape),
            "spacing": spacing,
            "image": base64.b64encode(window_uint8(image).tobytes()).decode(),
            "label": base64.b64encode(label.tobytes()).decode(),
            "classes": [self._name(c) for c in range(len(counts))],
            "palette": [self.palette[c % len(self.palette)] for c in range(len(counts))],
            "volumes_ml": {self._name(c): round(float(counts[c]) * voxel_ml, 3) for c in range(1, len(counts))},
            "opacity": self.opacity,
            "scores": None,
        }
        if ground_truth is not None:
            from digits_core import case_metrics

            scores = case_metrics(
                label, np.asarray(ground_truth), max(len(counts), int(np.max(ground_truth)) + 1), spacing
            )
            data["scores"] = {
                "dice": scores["dice"],
                "per_class": [
                    {"class": self._name(c + 1), "dice": d, "hd95_mm": h}
                    for c, (d, h) in enumerate(zip(scores["dice_per_class"], scores["hd95_per_class"]))
                ],
            }
        return data

    def _name(self, index: int) -> str:
        return self.class_labels[index] if index < len(self.class_labels) else f"class {index}"

    def get_view_template(self, data: dict) -> tuple[str, dict]:
        """The case's slice viewer (template ``templates/volume.html``)."""
        source, _ = View.template_from_package(PACKAGE, "templates/volume.html")
        payload = json.dumps(data).replace("</", "<\\/")  # never closes its <script> element
        return source, {"data": data, "payload": payload}
