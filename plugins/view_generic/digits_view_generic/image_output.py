"""The ``image-output`` view (DIGITS's imageOutput): input, network output and target side by side.

For image-to-image models (``image-processing`` datasets): the output is an
``H×W×C`` image in the targets' scale (``[0, 1]``); it is clipped to
``[0, 1]`` and shown as 8-bit. With a ground-truth target the view adds the
absolute difference (mean over channels, ×255) and the PSNR (dB, data range
1) and SSIM (Gaussian 11×11, σ 1.5) of the clipped output against the
target; the summary gives their means over the labelled inputs
(:mod:`.metrics`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from wtforms import BooleanField, Form

from digits_core import View, png_data_uri

from .metrics import psnr, ssim

PACKAGE = __name__.rsplit(".", 1)[0]


class ImageOutputConfigForm(Form):
    """Options of the image-output view."""

    show_input = BooleanField("Show input image", default=True, description="Show the network's input")
    show_difference = BooleanField(
        "Show difference", default=True, description="Show |output - target| when the target is known"
    )


def to_uint8(image: Any) -> np.ndarray:
    """A ``[0, 1]`` float image (any range: clipped) as ``H×W×C`` uint8; 2-channel images show channel 0."""
    arr = np.clip(np.asarray(image, np.float64), 0.0, 1.0)
    if arr.ndim == 3 and arr.shape[2] not in (1, 3, 4):
        arr = arr[:, :, :1]
    return np.round(arr * 255.0).astype(np.uint8)


class ImageOutputView(View):
    """Input, output and target images with PSNR/SSIM; mean PSNR/SSIM in the summary."""

    plugin_id = "image-output"
    title = "Image output: input, output, target, PSNR/SSIM"
    stylesheets = ("generic.css",)

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        self.show_input = bool(self.config.get("show_input", True))
        self.show_difference = bool(self.config.get("show_difference", True))
        self._count = 0
        self._scores: list[tuple[float, float]] = []

    config_form = ImageOutputConfigForm

    @staticmethod
    def get_config_template(form):
        """Return the config form layout."""
        return View.template_from_package(PACKAGE, "templates/config.html", form=form, title="Image output view")

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """Render the output (and target, difference) and score it.

        Returns:
            ``{"input_id", "input", "output", "target", "difference", "psnr", "ssim"}``:
            PNG data URIs (``None`` when absent) and the scores (``None``
            without a target; PSNR is the string ``"inf"`` for an exact output).
        """
        output = np.asarray(output_data, np.float64)
        if output.ndim == 2:
            output = output[:, :, None]
        clipped = np.clip(output, 0.0, 1.0)
        self._count += 1
        data: dict[str, Any] = {
            "input_id": str(input_id),
            "output": png_data_uri(to_uint8(clipped)),
            "input": None,
            "target": None,
            "difference": None,
            "psnr": None,
            "ssim": None,
        }
        if self.show_input and input_data is not None:
            data["input"] = png_data_uri(np.asarray(input_data))
        if ground_truth is not None:
            target = np.asarray(ground_truth, np.float64)
            if target.ndim == 2:
                target = target[:, :, None]
            if target.shape == clipped.shape:
                data["target"] = png_data_uri(to_uint8(target))
                score = psnr(clipped, target)
                data["ssim"] = ssim(clipped, target)
                data["psnr"] = score if math.isfinite(score) else "inf"  # JSON has no infinity
                self._scores.append((score, data["ssim"]))
                if self.show_difference:
                    data["difference"] = png_data_uri(to_uint8(np.abs(clipped - target).mean(axis=2)))
        return data

    view_template = "templates/image_output_sample.html"

    def get_header_template(self):
        """Return the page header."""
        return View.template_from_package(
            PACKAGE, "templates/image_output_header.html", count=self._count, labelled=len(self._scores)
        )

    def summary(self) -> dict:
        """Return ``{"count", "labelled", "mean_psnr", "mean_ssim"}``.

        The mean PSNR leaves out exact outputs (infinite PSNR); it is ``"inf"``
        when every output is exact, ``None`` when no input has a target.
        """
        result: dict[str, Any] = {
            "count": self._count,
            "labelled": len(self._scores),
            "mean_psnr": None,
            "mean_ssim": None,
        }
        if self._scores:
            finite = [p for p, _ in self._scores if math.isfinite(p)]
            result["mean_psnr"] = float(np.mean(finite)) if finite else "inf"
            result["mean_ssim"] = float(np.mean([s for _, s in self._scores]))
        return result

    def get_summary_template(self):
        """Return the summary: mean PSNR and SSIM over the inputs with a target."""
        summary = self.summary()
        if not summary["labelled"]:
            return None, None
        return View.template_from_package(PACKAGE, "templates/image_output_summary.html", summary=summary)
