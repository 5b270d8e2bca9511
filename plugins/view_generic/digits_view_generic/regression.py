"""The ``regression`` view: predicted vs true values, MAE/RMSE per target and a scatter plot.

Per input: a thumbnail, and for each target its name, the predicted value,
the true value and the error (predicted − true) when the ground truth is
known. The summary (labelled inputs only) gives the MAE and RMSE per target
and over all targets, and one predicted-vs-true scatter plot per target
(inline SVG with the ``y = x`` diagonal, at most
:data:`~digits_view_generic.scatter.MAX_POINTS` points each).

Target names come from the dataset's ``userdata["target_names"]`` (the
``image-regression`` plugin keeps the targets file's header there), else
``t1..tN``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from wtforms import BooleanField, Form, IntegerField
from wtforms.validators import InputRequired, NumberRange

from digits_core import View, png_data_uri

from .metrics import mae_rmse
from .scatter import scatter_svg_data

PACKAGE = __name__.rsplit(".", 1)[0]


class RegressionConfigForm(Form):
    """Options of the regression view."""

    show_input = BooleanField("Show input image", default=True, description="Show a thumbnail of each input")
    thumbnail_size = IntegerField(
        "Thumbnail size",
        default=128,
        validators=[InputRequired(), NumberRange(16, 1024)],
        description="Longest side of the input thumbnail, in pixels",
    )
    precision = IntegerField(
        "Significant digits",
        default=4,
        validators=[InputRequired(), NumberRange(1, 12)],
        description="Significant digits of the values shown",
    )


def target_names(dataset: Any, count: int) -> list[str]:
    """Return ``count`` target names: the dataset's ``target_names`` when they fit, else ``t1..tN``."""
    userdata = (dataset.get("userdata") if isinstance(dataset, dict) else getattr(dataset, "userdata", None)) or {}
    names = userdata.get("target_names")
    if isinstance(names, list) and len(names) == count:
        return [str(n) for n in names]
    return [f"t{i + 1}" for i in range(count)]


class RegressionView(View):
    """Predicted vs true values per input; MAE/RMSE and scatter plots in the summary."""

    plugin_id = "regression"
    title = "Regression: predicted vs true values"
    stylesheets = ("generic.css",)

    def __init__(self, dataset: Any, **config: Any):
        super().__init__(dataset, **config)
        self.show_input = bool(self.config.get("show_input", True))
        self.thumbnail_size = int(self.config.get("thumbnail_size") or 128)
        self.precision = int(self.config.get("precision") or 4)
        self.names: list[str] | None = None
        self._count = 0
        self._predicted: list[np.ndarray] = []
        self._true: list[np.ndarray] = []

    config_form = RegressionConfigForm

    @staticmethod
    def get_config_template(form):
        """Return the config form layout."""
        return View.template_from_package(PACKAGE, "templates/config.html", form=form, title="Regression view")

    def _fmt(self, value: float) -> str:
        return f"{value:.{self.precision}g}"

    def process_data(self, input_id, input_data, output_data, ground_truth=None) -> dict:
        """Compare one prediction with its ground truth.

        Returns:
            ``{"input_id", "image", "targets": [{"name", "predicted", "true",
            "error"}], "labelled"}``; ``true``/``error`` are ``None`` without
            ground truth.
        """
        predicted = np.asarray(output_data, np.float64).reshape(-1)
        if self.names is None:
            self.names = target_names(self.dataset, predicted.size)
        truth = None
        if ground_truth is not None:
            truth = np.asarray(ground_truth, np.float64).reshape(-1)
            if truth.size != predicted.size:
                truth = None  # not comparable; shown as unlabelled
        if truth is not None:
            self._predicted.append(predicted)
            self._true.append(truth)
        self._count += 1
        targets = []
        for i, name in enumerate(
            self.names if len(self.names) == predicted.size else [f"t{k + 1}" for k in range(predicted.size)]
        ):
            targets.append(
                {
                    "name": name,
                    "predicted": float(predicted[i]),
                    "true": None if truth is None else float(truth[i]),
                    "error": None if truth is None else float(predicted[i] - truth[i]),
                }
            )
        image = None
        if self.show_input and input_data is not None:
            image = png_data_uri(np.asarray(input_data), max_size=self.thumbnail_size)
        return {"input_id": str(input_id), "image": image, "targets": targets, "labelled": truth is not None}

    def get_view_template(self, data):
        """Return the template of one sample."""
        return View.template_from_package(PACKAGE, "templates/regression_sample.html", fmt=self._fmt, **data)

    def get_header_template(self):
        """Return the page header: inputs, targets and how many are labelled."""
        return View.template_from_package(
            PACKAGE,
            "templates/regression_header.html",
            count=self._count,
            names=self.names or [],
            labelled=len(self._true),
        )

    def summary(self) -> dict:
        """Return error figures over the labelled inputs.

        Returns:
            ``{"count", "labelled", "per_target": [{"name", "mae", "rmse"}],
            "mae", "rmse"}`` (overall figures over every target value;
            ``None`` when nothing is labelled).
        """
        result: dict[str, Any] = {
            "count": self._count,
            "labelled": len(self._true),
            "per_target": [],
            "mae": None,
            "rmse": None,
        }
        if not self._true:
            return result
        predicted, true = np.stack(self._predicted), np.stack(self._true)
        mae, rmse = mae_rmse(predicted, true)
        result["per_target"] = [
            {"name": n, "mae": float(a), "rmse": float(r)} for n, a, r in zip(self.names or [], mae, rmse)
        ]
        all_mae, all_rmse = mae_rmse(predicted.reshape(-1, 1), true.reshape(-1, 1))
        result["mae"], result["rmse"] = float(all_mae[0]), float(all_rmse[0])
        return result

    def get_summary_template(self):
        """Return the summary: MAE/RMSE per target and a scatter plot each (labelled inputs only)."""
        summary = self.summary()
        if not summary["labelled"]:
            return None, None
        predicted, true = np.stack(self._predicted), np.stack(self._true)
        plots = [
            {"name": name, "plot": scatter_svg_data(true[:, i], predicted[:, i])}
            for i, name in enumerate(self.names or [])
        ]
        return View.template_from_package(
            PACKAGE, "templates/regression_summary.html", summary=summary, plots=plots, fmt=self._fmt
        )
