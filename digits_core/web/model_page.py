"""What the model page shows beside the job record: the inference form and view, the first chart panels,
and the other runs whose curves can be overlaid on its charts."""

from __future__ import annotations

from typing import Any

from flask import url_for

from ..errors import DigitsError
from ..jobs import Job
from ..jobs.health import record_problem
from ..plugins.contract import inference_form, template_method
from .forms_render import blank_form, dataset_userdata, render_plugin_form
from .helpers import read_json

#: The view a model page preselects for each task (the dataset's task picks what the user sees first).
DEFAULT_VIEWS = {
    "classification": "image-classification",
    "segmentation": "image-segmentation",
    "detection": "bounding-boxes",
    "regression": "regression",
    "image-to-image": "image-output",
}
#: The metric panels a model page shows first, per task (the rest follow by name, the learning rate last).
FIRST_METRICS = {
    "classification": "loss,accuracy,top5",
    "segmentation": "loss,dice,iou",
    "detection": "loss,map50,recall50,precision50,map,centre_recall",
    "regression": "loss,mae",
    "image-to-image": "loss,mae",
}


#: At most this many other runs are offered for the chart overlay (newest first).
MAX_OVERLAY_RUNS = 40


def inference_context(store, job) -> dict:
    """The data plugin's inference form (if any) and the default view for this model."""
    ctx: dict[str, Any] = {"plugin_form": None, "default_view": None, "task": None}
    model = read_json(job.path / "model.json") or {}
    ctx["task"] = model.get("task")
    ctx["default_view"] = DEFAULT_VIEWS.get(model.get("task") or "classification", "image-classification")
    ctx["first_metrics"] = FIRST_METRICS.get(model.get("task") or "", "loss")
    # unet3d / unet2.5d: "Test a volume" (web/volume_inference.py) once the trained model is saved
    ctx["volume"] = model.get("kind") == "volume" and (job.path / model.get("model_file", "model.keras")).is_file()
    if ctx["volume"]:
        ctx["volume_view_title"] = _volume_view_title()
    dataset_id = job.data.get("dataset_id")
    ds_job = None
    try:
        ds_job = store.get(dataset_id, kind="dataset") if dataset_id else None
    except DigitsError:
        pass
    if ds_job is not None:
        from ..plugins.registry import registry

        try:
            cls = registry.get_data_ingestion(ds_job.data.get("plugin_id"))
            form_class = inference_form(cls, dataset_userdata(ds_job))
            if form_class is not None:
                ctx["plugin_form"] = render_plugin_form(
                    blank_form(form_class), template_method(cls, "get_inference_template", dataset_userdata(ds_job))
                )
                ctx["plugin_id"] = cls.get_id()
        except DigitsError:
            pass
    return ctx


def _volume_view_title() -> str:
    from ..plugins.registry import registry  # as inference_context: the registry loads on first use

    try:
        return registry.get_view("volume").get_title()
    except DigitsError:
        return "volume (the view plugin of digits-data-volumes is not installed)"


def overlay_runs(store, job) -> list[dict]:
    """Other model jobs whose curves the page can overlay: those of the same dataset or group, newest first.

    Returns:
        ``[{"id", "name", "label", "status", "why"}]`` (``why``: ``"same dataset"`` or ``"same group"``;
        ``label`` names the run's series in the charts); at most
        :data:`MAX_OVERLAY_RUNS`.
    """
    dataset_id, group = job.data.get("dataset_id"), job.group
    runs = []
    for other in store.list("model", reap=False):
        if other.id == job.id:
            continue
        if group and other.group == group:
            why = "same group"
        elif dataset_id and other.data.get("dataset_id") == dataset_id:
            why = "same dataset"
        else:
            continue
        runs.append({"id": other.id, "name": other.name or other.id, "status": other.status.value, "why": why})
        if len(runs) >= MAX_OVERLAY_RUNS:
            break
    names = [run["name"] for run in runs] + [job.name or job.id]
    for run in runs:  # the label of a run's series in the charts: its name, with the id when names clash
        run["label"] = run["name"] if names.count(run["name"]) == 1 else f"{run['name']} ({run['id']})"
    return runs


def snapshots(job: Job) -> list[dict]:
    """The snapshots on disk, oldest first: ``[{"epoch", "file", "size", "download"}]``.

    ``epoch`` is a number (``2``, or ``1.5`` for a mid-epoch snapshot), the same the CLI's and the
    API's ``--epoch``/``epoch`` take; ``download`` is the URL of that epoch's exported model.
    """
    from ..inference.snapshots import list_snapshots

    return [
        {
            "epoch": epoch,
            "file": path.name,
            "size": path.stat().st_size,
            "download": url_for("models.download", job_id=job.id, epoch=epoch),
        }
        for epoch, path in list_snapshots(job, model_info(job)).items()
        if path.is_file()
    ]


def model_info(job: Job) -> dict | None:
    """The job's ``model.json`` when it reads as a model record, else ``None`` (not written yet, or damaged)."""
    if record_problem(job.path, "model") is not None:
        return None
    info = read_json(job.path / "model.json")
    return info if isinstance(info, dict) else None
