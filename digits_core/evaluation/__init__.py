"""Evaluation on a held-out test set: metrics per task equal to the reference libraries.

* :mod:`~digits_core.evaluation.classification`: accuracy, top-k, per-class precision/recall/F1, averages,
  confusion matrix, one-vs-rest ROC-AUC and average precision, calibration error, bootstrap intervals
  (as scikit-learn computes them).
* :mod:`~digits_core.evaluation.detection`: COCO AP@[.5:.95], AP50, AP75, AR per class, the
  F1-versus-confidence curve (as pycocotools computes them).
* :mod:`~digits_core.evaluation.segmentation`: Dice, IoU, HD95, ASSD, NSD and volume difference per
  case and class, spacing-aware, summarised in nnU-Net's ``summary.json`` layout.
* :mod:`~digits_core.evaluation.regression`: MAE, RMSE, R² per target; PSNR and SSIM (as scikit-learn
  and scikit-image compute them).

The metric modules need numpy (and scipy for distances and SSIM) only.
:func:`evaluate` runs a model over a test set as an ``evaluation`` job (:mod:`~digits_core.evaluation.run`);
:func:`load_evaluation` reads one back; :func:`render_report` is its standalone HTML page;
:func:`leaderboard` ranks every model evaluated on one test set (:mod:`~digits_core.evaluation.leaderboard`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "evaluate": "digits_core.evaluation.run",
    "load_evaluation": "digits_core.evaluation.run",
    "EvaluationError": "digits_core.evaluation.run",
    "EvaluationResult": "digits_core.evaluation.run",
    "render_report": "digits_core.evaluation.report",
}

# Eager, unlike the others: once the submodule of the same name is imported (the web views do), the import system
# sets the package's ``leaderboard`` to the module, and a lazy name would never be looked up again.
from .leaderboard import leaderboard as leaderboard  # noqa: E402  # numpy and the job store only

__all__ = sorted([*_EXPORTS, "leaderboard"])


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'digits_core.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
