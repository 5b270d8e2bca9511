"""Model pages: new model, job page with live charts, abort/resume/clone/delete, snapshots, export, inference."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, abort, flash, jsonify, redirect, render_template, request, send_file, url_for
from flask.typing import ResponseReturnValue

from ..engine.option_specs import TRAINING_OPTIONS
from ..errors import DigitsError, FormValidationError, JobStateError
from ..jobs import Job
from ..jobs.health import record_problem
from ..jobs.model import parse_metric_point
from ..submit.models import create_model_jobs
from ..submit.options import check_options
from ..submit.sweeps import start_sweep
from .context import web_context
from .helpers import last_metric_epoch
from .job_deletes import delete_job
from .job_notes import save_notes
from .model_form import (
    CUSTOM,
    CUSTOM_NETWORK_EXAMPLE,
    FIELD_GROUPS,
    ModelForm,
    form_script_data,
    option_value,
    set_choices,
    show_defaults,
    training_options,
)
from .model_form_data import fill_from_job, network_menu_data, preselect_network
from .model_page import export_file, model_details, render_model_page, snapshot_for, snapshots
from .search_panel import place_errors, search_lines, sweep_body

bp = Blueprint("models", __name__, url_prefix="/models")


@bp.route("/new", methods=["GET", "POST"])
def new() -> ResponseReturnValue:
    """The New Model page; POST validates, saves and queues the training job."""
    store = web_context().store
    if request.method == "POST":
        form = ModelForm(request.form)
        set_choices(form, store)
        if form.validate():
            options = training_options(form)
            custom = form.custom_network.data if form.network.data == CUSTOM else None
            answer = _start_search(form, options, custom) if search_lines(form) else _queue_jobs(form, options, custom)
            if answer is not None:
                return answer
        else:
            _engine_errors_too(form)
        show_defaults(form, only_empty=True)  # what was typed stays; the fields left out show their defaults
        # The page with its errors answers 200: a 400 document logs a console error on every re-render
        # (the JSON API answers 400).
    else:
        form = ModelForm()
        set_choices(form, store)
        if request.args.get("dataset"):
            form.dataset.data = request.args["dataset"]
        if request.args.get("network"):
            form.network.data = request.args["network"]
        else:  # the default of the dataset's kind: unet3d on volumes, lenet on classes, ...
            preselect_network(form, store)
        show_defaults(form, form.network.data or (form.network.choices[0][0] if form.network.choices else None))
        clone = request.args.get("clone")
        if clone:
            fill_from_job(form, store.get(clone, kind="model"))
        if request.args.get("dataset"):
            form.dataset.data = request.args["dataset"]
        if not form.custom_network.data:
            form.custom_network.data = CUSTOM_NETWORK_EXAMPLE
    errors = {k: v for k, v in form.errors.items()} if request.method == "POST" else {}
    return render_template(
        "model_new.html",
        form=form,
        errors=errors,
        custom=CUSTOM,
        field_groups=FIELD_GROUPS,
        script_data={**form_script_data(form), **network_menu_data(store)},
    )


def _queue_jobs(form: ModelForm, options: dict, custom: str | None) -> ResponseReturnValue | None:
    """Queue the form's job (or its grid sweep's jobs): the redirect, or ``None`` with the errors on the form."""
    try:
        jobs = create_model_jobs(
            form.model_name.data,
            form.dataset.data,
            None if custom is not None else form.network.data,
            options,
            custom,
            form.group.data,
            store=web_context().store,
            queue=web_context().scheduler,
            jobs_dir=web_context().jobs_dir,
        )
    except FormValidationError as exc:
        for name, messages in exc.errors.items():
            field = form._fields.get(name)
            if field is not None:
                field.errors = list(field.errors) + messages
            else:
                form.form_errors.append(f"{name}: {'; '.join(messages)}")
        return None
    if len(jobs) == 1:
        return redirect(url_for("models.show", job_id=jobs[0].id))
    group = jobs[0].group
    flash(f'Sweep queued: {len(jobs)} training jobs in group "{group}".', "ok")
    return redirect(url_for("home.index", q=group))


def _start_search(form: ModelForm, options: dict, custom: str | None) -> ResponseReturnValue | None:
    """Start the Search panel's sweep as ``POST /api/sweeps`` does: its comparison page, or ``None`` with errors."""
    if custom is not None:
        form.search.errors = list(form.search.errors) + [
            "A search runs built-in or plugin networks: choose one (or search network=choice(...))."
        ]
        return None
    searched = {line.split("=", 1)[0].strip() for line in search_lines(form)}
    options = {name: value for name, value in options.items() if name not in searched}  # the search line wins
    listed = [name for name, value in options.items() if isinstance(value, list)]
    if listed:
        form[listed[0]].errors = list(form[listed[0]].errors) + [
            "With a search, give one value here or put the list in the search lines."
        ]
        return None
    try:
        handle = start_sweep(sweep_body(form, options), store=web_context().store, jobs_dir=web_context().jobs_dir)
        web_context().sweeps[handle.sweep_id] = handle
    except FormValidationError as exc:
        place_errors(form, exc.errors, search_lines(form))
        return None
    except DigitsError as exc:  # e.g. the dataset's records cannot be opened
        form.dataset.errors = list(form.dataset.errors) + [str(exc)]
        return None
    return redirect(url_for("sweeps.show", sweep_id=handle.sweep_id))


def _engine_errors_too(form: ModelForm) -> None:
    """After WTForms found errors, also show the engine's verdict on the other fields (all errors at once)."""
    options = {}
    for spec in TRAINING_OPTIONS:
        field = form._fields.get(spec.name)
        if spec.web != "auto" or field is None or field.errors or field.data in (None, ""):
            continue
        options[spec.name] = option_value(spec, field.data)
    try:
        check_options(options)
    except FormValidationError as exc:
        for name, messages in exc.errors.items():
            field = form._fields.get(name)
            if field is not None and not field.errors:
                field.errors = list(messages)
    except Exception:  # noqa: BLE001 - best effort: the WTForms errors are shown anyway
        pass


# -- job page -----------------------------------------------------------------------


def _model_job(job_id: str) -> Job:
    """The model job whose page is asked for; a damaged ``model.json`` is raised (the page says which and why)."""
    job = web_context().store.get(job_id, kind="model")
    problem = record_problem(job.path, "model")
    if problem is not None:
        raise problem
    return job


@bp.get("/<job_id>")
def show(job_id: str) -> ResponseReturnValue:
    """The model job page: status, live charts, snapshots, inference."""
    if job_id.endswith(".json"):
        return jsonify(model_details(_model_job(job_id[:-5])))
    return render_model_page(_model_job(job_id))


@bp.get("/<job_id>/metrics.json")
def metrics(job_id: str) -> ResponseReturnValue:
    """New points of ``metrics.jsonl`` since byte ``offset`` (``?offset=``), plus the job status.

    Returns:
        ``{"offset": next offset, "points": [{"epoch","step","name","value"}...], "status", "done",
        "error", "snapshots", "status_history", "epoch" (latest), "epochs" (planned)}``.
    """
    job = web_context().store.get(job_id, kind="model")  # (the points come even when model.json is damaged)
    offset = max(0, request.args.get("offset", 0, type=int))
    points = []
    path = job.path / "metrics.jsonl"
    new_offset = offset
    if path.is_file():
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read(4 * 1024 * 1024)
        end = chunk.rfind(b"\n")
        if end >= 0:
            for line in chunk[: end + 1].splitlines():
                point = parse_metric_point(line)  # a bad line is passed over (jobs.model.read_metric_points)
                if point is not None:
                    points.append(point)
            new_offset = offset + end + 1
    return jsonify(
        {
            "offset": new_offset,
            "points": points,
            "status": job.status.value,
            "done": job.status.is_finished,
            "error": job.error,
            "snapshots": snapshots(job),
            "status_history": job.data.get("status_history", []),
            "epoch": last_metric_epoch(job),
            "epochs": (job.data.get("train_options") or {}).get("epochs"),
        }
    )


@bp.post("/<job_id>/abort")
def abort_job(job_id: str) -> ResponseReturnValue:
    """Abort a waiting or running training job (it stops after the current step)."""
    job = web_context().store.get(job_id, kind="model")
    web_context().scheduler.abort(job.id)
    flash("Abort requested.", "warn")
    return redirect(url_for("models.show", job_id=job.id))


@bp.post("/<job_id>/resume")
def resume(job_id: str) -> ResponseReturnValue:
    """Resume an Aborted/Error training job from its last snapshot."""
    job = web_context().store.get(job_id, kind="model")
    if not snapshots(job):
        raise JobStateError(f"Model {job.id} has no snapshot to resume from; clone it to train again.")
    web_context().scheduler.resume(job)
    return redirect(url_for("models.show", job_id=job.id))


@bp.post("/<job_id>/notes")
def notes(job_id: str) -> ResponseReturnValue:
    """Save the job's notes (the field on its page)."""
    return save_notes(job_id, "model")


@bp.post("/<job_id>/delete")
def delete(job_id: str) -> ResponseReturnValue:
    """Delete a model job (aborting it first if it runs)."""
    delete_job(job_id, "model")
    flash("Model deleted.", "ok")
    return redirect(url_for("home.index"))


@bp.route("/<job_id>/download", methods=["GET", "POST"])
def download(job_id: str) -> ResponseReturnValue:
    """Download an exported model (``.tar.gz``: SavedModel, labels, mean, info); ``?epoch=`` picks the snapshot.

    Each epoch's export is made on its first request, in a separate worker process
    (TensorFlow never loads in the web server), and kept in the job's ``export/`` folder.
    """
    job = web_context().store.get(job_id, kind="model")
    epoch = request.values.get("epoch")
    snap = snapshot_for(job, epoch)
    if snap is None:
        raise JobStateError(f"Model {job.id} has no snapshot yet; download once an epoch has finished.")
    existing = export_file(job, snap["epoch"])
    if existing is None:
        from .request_guard import cross_site_request
        from .worker_calls import run_worker

        if cross_site_request():  # a link on another site must not make this server build an export
            abort(403, description="Cross-site request refused: open the model's page here and click Download.")

        (job.path / "export").mkdir(exist_ok=True)
        out = job.path / "export" / f"{job.id}-{Path(snap['file']).stem}.tar.gz"
        run_worker("export", {"job": str(job.path), "out": str(out), "epoch": snap["epoch"]}, timeout=600)
        existing = export_file(job, snap["epoch"])
        if existing is None:
            raise JobStateError(f"Export of model {job.id} produced no file.")
    tag = "" if epoch in (None, "") else f"-epoch-{snap['epoch']}"
    name = f"{job.name or job.id}-{job.id}{tag}.tar.gz".replace("/", "_")
    return send_file(existing, as_attachment=True, download_name=name)
