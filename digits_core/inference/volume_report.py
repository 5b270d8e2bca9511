"""The ``volume`` view over the results of :func:`digits_core.engine.volume_infer.infer_volume`.

One HTML fragment per case (the image with its label blended over it, scrolled slice by slice; the
volume of each class in mL; per-class Dice and HD95 when the result has ground truth), rendered by the
view plugin of ``digits-data-volumes``. ``digits infer --out PAGE.html`` and the model page's
*Test a volume* both show their results through :func:`volume_cases`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..engine import jobio
from ..plugins.registry import registry
from ..templating import render_plugin_template


def volume_cases(results: list, model: Any, jobs_dir=None, view_config: dict | None = None) -> list[tuple[str, dict]]:
    """Render each result with the ``volume`` view.

    Args:
        results: :class:`~digits_core.engine.volume_infer.VolumeResult` objects.
        model: The model job they came from (its class names and colours label the view).
        jobs_dir: The jobs folder.
        view_config: The view's options (``opacity``).

    Returns:
        ``[(html fragment, view data), ...]``; the data holds ``volumes_ml`` and ``scores`` (``None``
        without ground truth) besides the arrays the page draws.
    """
    info = jobio.read_model_info(jobio.model_folder(model, jobs_dir))
    view = registry.get_view("volume")(
        {"class_labels": info.get("class_labels"), "color_palette": info.get("color_palette")}, **(view_config or {})
    )
    cases = []
    for r in results:
        data = view.process_data(Path(r.source).name, r.volume, r.canonical_label, ground_truth=r.ground_truth)
        source, context = view.get_view_template(data)
        cases.append((render_plugin_template(source, context), data))
    return cases
