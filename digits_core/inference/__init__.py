"""Inference, results pages and model export.

Public entry points (all also exported lazily by :mod:`digits_core`):

* :func:`infer`: run a trained model on images, a folder, a list file or
  the data plugin's inference form, and return an :class:`InferenceResult`
  (top-N predictions, accuracy figures, the view's HTML page or JSON).
* :func:`render_html` / :func:`render_fragments` / :func:`report_json`:
  compose a view's header, per-sample and summary templates into one
  self-contained HTML page (the web UI reuses the fragments).
* :func:`export_model`: write a ``.tar.gz`` with a TensorFlow SavedModel
  whose serving signature takes raw images, plus labels, mean and
  ``info.json``.
* :func:`to_display_uint8` / :func:`png_data_uri`: image helpers for views.
* :func:`visualize`: every layer's activations and weights, with statistics,
  for one image (:mod:`~digits_core.inference.visualize`).

This package is light to import: TensorFlow is only imported by the
modules that run models (``model``, ``runner``, ``export``), on first use.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "infer": "digits_core.inference.runner",
    "InferenceResult": "digits_core.inference.runner",
    "InferenceSample": "digits_core.inference.runner",
    "SampleList": "digits_core.inference.runner",
    "clear_model_cache": "digits_core.inference.model",
    "load_inference_model": "digits_core.inference.model",
    "export_model": "digits_core.inference.export",
    "render_html": "digits_core.inference.report",
    "render_fragments": "digits_core.inference.report",
    "report_json": "digits_core.inference.report",
    "run_view": "digits_core.inference.report",
    "to_display_uint8": "digits_core.inference.images",
    "to_display_rgb": "digits_core.inference.images",
    "png_data_uri": "digits_core.inference.images",
    "resize_nearest": "digits_core.inference.images",
    "visualize": "digits_core.inference.visualize",
    "LayerVisualizations": "digits_core.inference.visualize",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'digits_core.inference' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
