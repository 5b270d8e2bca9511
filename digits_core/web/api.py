"""The JSON API under ``/api/`` (documented in ``docs/api.md``).

Pages have JSON twins (``/index.json``, ``/datasets/ID.json``,
``/models/ID.json``, ``/models/ID/metrics.json``); this blueprint adds the
calls that create and control jobs without a browser.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request, url_for
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import generate_csrf

from ..engine.lr_policies import lr_schedule_preview
from ..engine.option_specs import LR_PREVIEW_OPTIONS
from ..engine.options import lr_preview_schedule
from ..errors import DigitsError, FormValidationError
from ..jobs.checks import check_job_name
from ..jobs.readers import max_record_depth, nested_deeper_than
from ..jobs.record import JobRecordError
from ..submit.datasets import queue_dataset_job
from ..submit.models import create_model_jobs
from .context import request_data_roots, web_context
from .helpers import invalid_json, job_summary, json_body
from .job_deletes import DatasetInUseError, bulk_delete, delete_job, describe

bp = Blueprint("api", __name__, url_prefix="/api")


_TOO_DEEP = object()


@bp.before_app_request
def _bounded_jsonjson_body() -> ResponseReturnValue | None:
    """Every JSON request body, on any route: nested at most as deep as a job record may be, else 400 naming it.

    Python's JSON parser recurses per level, so a body nested 100,000 deep would otherwise end in a
    ``RecursionError`` (a 500) wherever a handler parses it. The parsed body is cached for the handler.
    """
    if request.method in ("GET", "HEAD", "OPTIONS") or not request.is_json:
        return None
    try:
        data = request.get_json(silent=True)
    except RecursionError:
        data = _TOO_DEEP
    limit = max_record_depth()
    if data is _TOO_DEEP or nested_deeper_than(data, limit):
        message = f"the JSON body nests objects or lists deeper than {limit} levels"
        error = {"code": 400, "title": "Invalid value", "message": f"Invalid value in request:\n  body: {message}"}
        return jsonify({"error": {**error, "fields": {"body": [message]}}}), 400
    return None


bp.register_error_handler(FormValidationError, invalid_json)


@bp.get("/csrf-token")
def csrf_token() -> ResponseReturnValue:
    """A CSRF token for state-changing calls (send it as ``X-CSRFToken`` with the session cookie)."""
    return jsonify({"csrf_token": generate_csrf()})


@bp.get("/plugins")
def plugins() -> ResponseReturnValue:
    """What ``digits plugins --all --json`` prints."""
    from ..plugins.registry import registry

    return jsonify([r.to_dict() for r in registry.records(include_disabled=True)])


@bp.get("/jobs")
def jobs() -> ResponseReturnValue:
    """Every job (``?kind=dataset|model``), newest first, then the job folders whose ``job.json`` cannot be read.

    Those come whatever ``kind`` asks for (their kind is unknown) as ``{"id", "kind": null, "status":
    "Unreadable", "unreadable": true, "file", "reason", "path", "name": ""}``.
    """
    kind = request.args.get("kind") or None
    found, broken = web_context().store.scan(kind)
    return jsonify([job_summary(j) for j in found] + [entry.to_dict() for entry in broken])


@bp.get("/scheduler")
def scheduler_status() -> ResponseReturnValue:
    """The queue, the running jobs and the limits."""
    return jsonify(web_context().scheduler.status())


@bp.get("/networks")
def networks() -> ResponseReturnValue:
    """Networks the New Model form offers (built-in and from plugins)."""
    from ..engine.networks import list_networks

    return jsonify(
        [
            {
                "name": s.name,
                "source": s.source,
                "tasks": list(s.tasks),
                "batch_size": s.batch_size,
                "description": s.description,
            }
            for s in list_networks()
        ]
    )


@bp.post("/datasets")
def create_dataset() -> ResponseReturnValue:
    """Queue a dataset job: ``{"plugin_id", "form_data": {...}, <job options>}`` -> 202.

    The job options (``name``, ``group``, ``workers``, ``max_errors``) are those declared in
    :mod:`digits_core.datasets.options`; an unknown key is refused (400, naming it).
    """
    from ..datasets.options import check_dataset_options

    body = json_body()
    options = {key: value for key, value in body.items() if key not in ("plugin_id", "form_data")}
    check_dataset_options(options, "new dataset")  # unknown keys refused before anything is created
    ctx = web_context()
    job = queue_dataset_job(
        str(body.get("plugin_id", "")),
        body.get("form_data") or {},
        **options,
        queue=ctx.scheduler,
        jobs_dir=ctx.jobs_dir,
        data_roots=request_data_roots(),
    )
    return jsonify(
        {
            "id": job.id,
            "status": job.status.value,
            "url": url_for("datasets.show", job_id=job.id),
            "json": url_for("datasets.show", job_id=job.id + ".json"),
        }
    ), 202


@bp.post("/models")
def create_model() -> ResponseReturnValue:
    """Queue a training job: ``{"name", "dataset", "network" | "custom_network", "group"?, "options": {...}}`` -> 202.

    Several values of ``learning_rate`` / ``batch_size`` (a list or comma-separated text) queue a
    sweep: one job per combination, all in one group; the answer is then
    ``{"group", "jobs": [{"id", "name", "status", "values", "url", "json"}...]}``.
    """
    body = json_body()
    check_job_name(body.get("name"), "name", what="new model")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise FormValidationError({"options": ["must be a JSON object of training options"]}, "new model")
    custom = body.get("custom_network")
    network = body.get("network") or (None if custom else "")
    if not network and not custom:
        raise FormValidationError({"network": ["give a network name or custom_network code"]}, "new model")
    ctx = web_context()
    jobs = create_model_jobs(
        str(body.get("name", "")),
        str(body.get("dataset", "")),
        network,
        dict(options),
        custom,
        body.get("group"),
        store=ctx.store,
        queue=ctx.scheduler,
        jobs_dir=ctx.jobs_dir,
    )
    rows = [
        {
            "id": job.id,
            "name": job.name,
            "status": job.status.value,
            "group": job.data.get("group"),
            "values": job.data.get("sweep") or {},
            "url": url_for("models.show", job_id=job.id),
            "json": url_for("models.show", job_id=job.id + ".json"),
        }
        for job in jobs
    ]
    if len(rows) == 1 and not jobs[0].data.get("sweep"):
        return jsonify(rows[0]), 202
    return jsonify({"group": jobs[0].data.get("group"), "jobs": rows}), 202


@bp.post("/jobs/<job_id>/abort")
def abort(job_id: str) -> ResponseReturnValue:
    """Abort a waiting or running job."""
    job = web_context().store.get(job_id)
    web_context().scheduler.abort(job.id)
    return jsonify({"id": job.id, "status": job.reload().status.value})


@bp.post("/jobs/<job_id>/resume")
def resume(job_id: str) -> ResponseReturnValue:
    """Resume an Aborted/Error model job from its last snapshot."""
    from .model_page import snapshots  # the model page's listing, as the page shows it

    job = web_context().store.get(job_id, kind="model")
    if not snapshots(job):
        raise DigitsError(f"Model {job.id} has no snapshot to resume from.")
    web_context().scheduler.resume(job)
    return jsonify({"id": job.id, "status": job.reload().status.value}), 202


@bp.delete("/jobs/<job_id>")
def delete(job_id: str) -> ResponseReturnValue:
    """Delete a job (aborting it first); a dataset models depend on only with ``?cascade=1``.

    Returns:
        ``{"id", "deleted": true, "also_deleted": [{"id", "name", "status"}]}`` (the dependents a cascade
        deleted); 409 ``{"error": {..., "dependents": [...]}}`` when models depend on the dataset.
    """
    try:
        job = web_context().store.get(job_id)
    except JobRecordError:  # its job.json cannot be read: the folder goes as it is (refused while a process owns it)
        web_context().store.delete(job_id)
        return jsonify({"id": job_id, "deleted": True, "also_deleted": []})
    try:
        deleted = delete_job(job.id, job.kind, cascade=request.args.get("cascade") in ("1", "true"))
    except DatasetInUseError as exc:
        return jsonify(
            {
                "error": {
                    "code": 409,
                    "title": "Dataset in use",
                    "message": str(exc),
                    "dependents": [describe(j) for j in exc.dependents],
                }
            }
        ), 409
    return jsonify({"id": job.id, "deleted": True, "also_deleted": [describe(j) for j in deleted[:-1]]})


@bp.post("/jobs/delete")
def delete_many() -> ResponseReturnValue:
    """Delete several jobs: ``{"ids": [...], "abort_running"?: false}`` -> ``{"deleted", "aborted", "refused"}``.

    Jobs this server runs or queues are refused unless ``abort_running`` is true (then they are
    aborted first); a job another process runs is always refused. See :func:`~digits_core.web.job_deletes.bulk_delete`.
    """
    body = json_body()
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise FormValidationError({"ids": ["give a non-empty list of job ids"]}, "bulk delete")
    return jsonify(bulk_delete(ids, abort_running=body.get("abort_running") is True))


@bp.get("/lr-preview")
def lr_preview() -> ResponseReturnValue:
    """The learning rate over a whole run, for the New Model chart.

    Query: the options of :data:`~digits_core.engine.option_specs.LR_PREVIEW_OPTIONS` (``learning_rate``,
    ``lr_policy``, ``lr_step_size``, ...; empty: the default), checked as training checks them, and
    ``points`` (default 101).
    Returns ``{"points": [{"step", "progress", "lr"}...], "series": [{"learning_rate", "points"}...]}``;
    x is % of training. Several comma-separated learning rates (a sweep) are checked and each gets
    its curve in ``series`` (as DIGITS drew one line per swept rate); ``points`` is the first one's.
    """
    values = {name: request.args.get(name, "").strip() for name in LR_PREVIEW_OPTIONS}
    rates: list = [values["learning_rate"]]
    if "," in values["learning_rate"]:
        from ..sweeps.grid import parse_values

        rates = parse_values("learning_rate", values["learning_rate"])
    schedules = [lr_preview_schedule({**values, "learning_rate": rate}) for rate in rates]
    points = min(max(request.args.get("points", 101, type=int), 2), 1001)
    series = [
        {
            "learning_rate": rate,
            "points": lr_schedule_preview(
                100, learning_rate=rate, lr_policy=policy.pop("policy"), points=points, **policy
            ),
        }
        for rate, policy in schedules
    ]  # rate: the checked float
    return jsonify({"points": series[0]["points"], "series": series})


@bp.post("/models/<job_id>/infer")
def infer(job_id: str) -> ResponseReturnValue:
    """Run a model on server-side inputs: ``{"inputs": [paths], "view_id"?, "view_config"?, "epoch"?,
    "form_data"?, "max_errors"?, "visualize"?}`` -> the samples (top-N or maps), metrics, skipped inputs
    (``results.errors``), the view's HTML fragments and, with ``"visualize": true`` (one image), every
    layer's activations and weights with statistics (``visualizations``)."""
    from .inference_inputs import check_inference_path, results_json  # the page's rules, as the page applies them
    from .inference_worker import run_in_worker

    job = web_context().store.get(job_id, kind="model")
    body = json_body()
    inputs = body.get("inputs") or []
    if not isinstance(inputs, list):
        raise FormValidationError({"inputs": ["must be a list of paths on the server"]}, "inference")
    checked = [check_inference_path(str(raw), "inputs") for raw in inputs]
    inference_form = body.get("form_data") or None
    if inference_form:
        from ..paths import check_form_paths

        check_form_paths(inference_form, "inference form")
    request_body = {
        "model": str(job.path),
        "jobs_dir": str(web_context().jobs_dir),
        "inputs": checked,
        "data_roots": request_data_roots(),
        "view": body.get("view_id") or None,
        "view_config": body.get("view_config") or None,
        "epoch": body.get("epoch"),
        "inference_form": inference_form,
        "max_errors": body.get("max_errors"),
        "visualize": bool(body.get("visualize")),
    }
    result = run_in_worker("infer", request_body)
    return results_json(job, result)
