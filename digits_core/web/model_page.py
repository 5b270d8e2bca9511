"""What the model page shows beside the job record: the inference form and view, the first chart panels,
and the other runs whose curves can be overlaid on its charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flask import render_template, url_for

from ..errors import DigitsError, JobStateError
from ..inference.view_choice import BUNDLED_DEFAULT_VIEWS, default_view_for
from ..jobs import Job, JobStatus
from ..jobs.health import record_problem
from ..plugins.contract import inference_form, template_method
from ..sweeps.record import sweep_of_job
from .context import web_context
from .forms_render import blank_form, dataset_userdata, render_plugin_form
from .helpers import job_summary, last_metric_epoch, read_json, worker_log_tail
from .results_store import list_results

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
    ctx["default_view"] = _default_view(model.get("task") or "classification")
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


def _default_view(task: str) -> str:
    """The view preselected for ``task`` (the operator's or user's default view, view_choice); a broken setting
    costs the preselection, not the page."""
    try:
        return default_view_for(task) or "image-classification"
    except DigitsError:
        return BUNDLED_DEFAULT_VIEWS.get(task, "image-classification")


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

    info = model_info(job)
    found: dict[int | float, Path]
    if info is not None and info.get("kind") == "volume":  # unet3d / unet2.5d: one trained model, its last epoch
        found = {_volume_epochs(info): job.path / str(info.get("model_file") or "model.keras")}
    else:
        found = list_snapshots(job, info)
    return [
        {
            "epoch": epoch,
            "file": path.name,
            "size": path.stat().st_size,
            "download": url_for("models.download", job_id=job.id, epoch=epoch),
        }
        for epoch, path in found.items()
        if path.is_file()
    ]


def _volume_epochs(info: dict) -> int:
    """The epochs a volume model trained (its export's epoch, as ``digits export`` names it)."""
    block = info.get("volume")
    try:
        return int(block.get("epochs", 1)) if isinstance(block, dict) else 1
    except (TypeError, ValueError):
        return 1


def is_volume(job: Job) -> bool:
    """True for a volume model (``model.json`` says ``"kind": "volume"``)."""
    info = model_info(job)
    return info is not None and info.get("kind") == "volume"


def model_info(job: Job) -> dict | None:
    """The job's ``model.json`` when it reads as a model record, else ``None`` (not written yet, or damaged)."""
    if record_problem(job.path, "model") is not None:
        return None
    info = read_json(job.path / "model.json")
    return info if isinstance(info, dict) else None


def model_details(job: Job) -> dict:
    """Everything the model page shows, JSON-friendly."""
    info = model_info(job)
    return {
        "job": job_summary(job),
        "status_history": job.data.get("status_history", []),
        "dataset_id": job.data.get("dataset_id") or (job.data.get("train_options") or {}).get("dataset"),
        "train_options": job.data.get("train_options", {}),
        "model": info,
        "snapshots": snapshots(job),
        "error": job.error,
        "epoch": last_metric_epoch(job),
        "log_tail": worker_log_tail(job) if job.status.value in ("Error", "Aborted") else None,
        "exported": export_file(job) is not None,
        "inference_results": list_results(job),
    }


def render_model_page(
    job: Job,
    *,
    infer_errors: dict | None = None,
    infer_values: dict | None = None,
    top_n_errors: dict | None = None,
    top_n_values: dict | None = None,
) -> str:
    """The model page's HTML; ``*_errors``/``*_values`` show a failed request on its form.

    Args:
        job: The model job.
        infer_errors: ``{field: [messages]}`` (``""``: not about one field) of the inference form.
        infer_values: The inference form's values to keep (``view_id``, ``input_mode``, ``server_path``,
            ``snapshot``).
        top_n_errors: The same for the *Top N predictions per category* form.
        top_n_values: Its values to keep (``server_path``, ``top_n``, ``snapshot``).
    """
    return render_template(
        "model_show.html",
        job=job,
        d=model_details(job),
        views=_views(),
        active=job.status in (JobStatus.WAITING, JobStatus.RUNNING, JobStatus.INITIALIZED),
        inference=inference_context(web_context().store, job),
        overlay_runs=overlay_runs(web_context().store, job),
        sweep_id=sweep_of_job(job.id, job.group, web_context().jobs_dir),  # a trial links to its sweep
        infer_errors=infer_errors or {},
        infer_values=infer_values or {},
        top_n_errors=top_n_errors or {},
        top_n_values=top_n_values or {},
    )


def _views():
    from ..plugins.registry import registry  # the plugin registry loads on first use

    return sorted((vid, cls.get_title()) for vid, cls in registry.views().items())


def export_file(job: Job, epoch=None) -> Path | None:
    """The archive of one epoch's snapshot (default: the last), if it was exported already."""
    snap = snapshot_for(job, epoch)
    if snap is None:
        return None
    path = job.path / "export" / f"{job.id}-{Path(snap['file']).stem}.tar.gz"
    return path if path.is_file() else None


def snapshot_for(job: Job, epoch=None) -> dict | None:
    """The snapshot at ``epoch`` (a number; ``None``: the last), ``None`` when there is none at all.

    Raises:
        JobStateError: No snapshot at that epoch (the message lists those there are).
    """
    snaps = snapshots(job)
    if not snaps:
        return None
    if epoch in (None, ""):
        return snaps[-1]
    try:
        wanted = float(epoch)
    except (TypeError, ValueError):
        wanted = None
    for snap in snaps:
        if wanted is not None and abs(float(snap["epoch"]) - wanted) < 1e-6:
            return snap
    raise JobStateError(
        f"Model {job.id} has no snapshot at epoch {epoch} (snapshots: {', '.join(str(s['epoch']) for s in snaps)})."
    )
