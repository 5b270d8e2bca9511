"""Active learning in the web UI and the JSON API: pools, their queue, scoring and rounds as queued jobs.

* ``GET /api/pools``: the pools this account may read (``id``, ``name``, ``status``, counts per state).
* ``POST /api/pools`` (JSON ``{"folder", "name", "classes", "modality"}``): a pool of the images in a folder
  under the server's data roots; 201 ``{"id", "url", "counts"}``; a folder outside the roots or without an
  image is a 400 naming it, and nothing is created; with ``"volumes": true`` a pool of its ``D×H×W`` ``.npy``
  volumes (``dimensions: 3``; a folder without one, or an unreadable one, is a 400 naming it). With ``{"dicomweb": URL}`` (through the operator's outbound
  rules) or ``{"dicomweb_server": NAME}``, and ``studies`` / ``series`` (UID lists), ``modality``, ``username``:
  a pool of the image instances on that PACS without a DICOM-SEG of DIGITS Core
  (:func:`digits_core.labeling.pacs.create_dicomweb_pool`), with ``"volumes": true`` one candidate per image
  series (a 3-D volume, data plugin ``dicomweb-volumes``); an unreachable server is a 400 naming it.
* ``GET /pools/<id>``: the pool's page (counts, review queue, rounds); ``GET /api/pools/<id>``: the same as
  JSON (``counts``, ``queue``, ``rounds``, ``status``, ``progress`` of a running scoring, ``result``).
* ``GET /api/pools/<id>/queue``: the review queue (proposed candidates, highest score first).
* ``POST /api/pools/<id>/runs`` (JSON ``{"action": "score"|"round", "model", "strategy", "count",
  "batch_size", "passes", "epochs", "seed", "retrain", "top_fraction"}``): checks the request
  (:func:`digits_core.labeling.jobs.prepare_run`) and queues the pool job on the server's executor; 202.
  Abort it like any job (``POST /api/jobs/<id>/abort``); ``POST /api/pools/<id>/resume`` continues an
  aborted or failed run (the candidates it scored are not scored again).
* ``GET /pools/<id>/files/<proposals|labels>/...``: a proposal or label version PNG.
* ``GET /pools``: the pools as a page; ``GET|POST /pools/new``: the New pool form; ``POST /pools/<id>/run``:
  the pool page's *Run a round* / *Score only* form (:mod:`digits_core.web.pool_forms`). Both forms hand
  their fields to the functions the JSON API calls (:func:`create_pool_request`, :func:`queue_run`), and
  a refusal comes back on the field it names.

TensorFlow never loads in the web server: the scoring and the retraining run in the executor's worker.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, current_app, g, jsonify, redirect, render_template, request, send_file, url_for
from markupsafe import Markup

from ..errors import DigitsError, FormValidationError, JobNotFoundError
from ..jobs import Job
from ..labeling.jobs import prepare_resume, prepare_run
from ..labeling.pacs import create_dicomweb_pool
from ..labeling.pool import LABELS_DIR, POOL_KIND, PROPOSALS_DIR, Pool, PoolError
from ..labeling.rounds import rounds_chart_svg
from ..labeling.sources import create_folder_pool
from .context import web_context
from .pool_forms import NewPoolForm, PoolRunForm, compatible_models, place_errors, pool_body, run_body

bp = Blueprint("pools", __name__)


def _pool(job_id: str) -> Pool:
    return Pool(web_context().store.get(job_id, kind=POOL_KIND))


def _summary(pool: Pool) -> dict:
    job = pool.job
    return {
        "id": pool.id,
        "name": job.name,
        "status": job.status.value,
        "counts": pool.counts(),
        "url": url_for("pools.show", job_id=pool.id),
    }


@bp.get("/api/pools")
def list_json():
    """Every readable pool, newest first."""
    return jsonify(_pools())


def _pools() -> list[dict]:
    rows = []
    for job in web_context().store.list(POOL_KIND):
        try:
            rows.append(_summary(Pool(job)))
        except PoolError:
            continue  # a pool whose pool.json cannot be read: left out of the listing, named on its page
    return rows


@bp.post("/api/pools")
def create():
    """Make a pool of a folder under the data roots, or of a PACS."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise FormValidationError({"body": ["a JSON object is expected"]}, "new pool")
    return jsonify(_summary(create_pool_request(body))), 201


def create_pool_request(body: dict[str, Any]) -> Pool:
    """Check a new-pool request (the API's JSON body, or the New pool form's fields) and make the pool.

    Raises:
        FormValidationError: Bad or unknown keys, all named; nothing is created.
    """
    allowed = {"folder", "name", "classes", "modality", "dicomweb", "dicomweb_server", "studies", "series", "username",
               "volumes"}  # fmt: skip
    errors = {str(k)[:40]: ["not a pool option"] for k in body if k not in allowed}
    folder, name = body.get("folder"), body.get("name")
    classes, modality = body.get("classes"), body.get("modality")
    pacs = {k: body.get(k) for k in ("dicomweb", "dicomweb_server", "username") if body.get(k) is not None}
    for key, value in pacs.items():
        if not isinstance(value, str):
            errors[key] = ["text"]
    for key in ("studies", "series"):
        if body.get(key) is not None and not (
            isinstance(body[key], list) and all(isinstance(u, str) for u in body[key])
        ):
            errors[key] = ["a list of DICOM UIDs"]
    if pacs.get("dicomweb") or pacs.get("dicomweb_server"):
        if folder is not None:
            errors["folder"] = ["a pool is a folder or a DICOMweb server, not both"]
    elif not isinstance(folder, str) or not folder:
        errors["folder"] = ["the folder of unlabelled images (or dicomweb / dicomweb_server) is required"]
    if body.get("volumes") is not None and not isinstance(body["volumes"], bool):
        errors["volumes"] = ["true or false"]
    if name is not None and not isinstance(name, str):
        errors["name"] = ["text"]
    if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
        errors["classes"] = ["a list of class names"]
    if modality is not None and not isinstance(modality, str):
        errors["modality"] = ["text, e.g. MR"]
    if errors:
        raise FormValidationError(errors, "new pool")
    if pacs.get("dicomweb") or pacs.get("dicomweb_server"):
        return create_dicomweb_pool(
            name or "pacs pool",
            url=pacs.get("dicomweb"),
            named_server=pacs.get("dicomweb_server"),
            studies=body.get("studies"),
            series=body.get("series"),
            modality=modality,
            username=pacs.get("username"),
            class_labels=classes,
            plugin="dicomweb-volumes" if body.get("volumes") else None,
            jobs_dir=web_context().store.root,
        )
    folder = str(folder)  # checked above: a non-empty string
    return create_folder_pool(
        name or folder.rstrip("/").rsplit("/", 1)[-1] or "pool",
        folder,
        class_labels=classes,
        modality=modality,
        volumes=bool(body.get("volumes")),
        jobs_dir=web_context().store.root,
    )


def _details(pool: Pool) -> dict:
    job = pool.job.reload()
    return {
        **_summary(pool),
        "source": pool.record()["source"],
        "queue": pool.queue()[:100],
        "rounds": pool.record().get("rounds", []),
        "run": job.data.get("pool_run"),
        "progress": job.data.get("pool_progress"),
        "result": job.data.get("pool_result"),
        "error": job.data.get("error"),
    }


@bp.get("/api/pools/<job_id>")
def show_json(job_id: str):
    """The pool as JSON."""
    return jsonify(_details(_pool(job_id)))


@bp.get("/pools/<job_id>")
def show(job_id: str):
    """The pool's page."""
    return _page(_pool(job_id))


def _page(pool: Pool, form: PoolRunForm | None = None, status: int = 200):
    details = _details(pool)
    review_url = url_for("review.page", job_id=pool.id) if "review.page" in _endpoints() else None
    chart = Markup(rounds_chart_svg(details["rounds"]))  # built from numbers and escaped strategy names
    form = form or PoolRunForm()
    form.model.choices = compatible_models(pool, web_context().store.list("model"))
    return render_template(
        "pool_show.html", pool=details, review_url=review_url, chart=chart, form=form, running=_running(pool)
    ), status


def _running(pool: Pool) -> bool:
    return not pool.job.reload().status.is_finished


@bp.post("/pools/<job_id>/run")
def run_form(job_id: str):
    """The pool page's *Run a round* / *Score only* buttons: the same check and queue as the JSON API."""
    pool = _pool(job_id)
    form = PoolRunForm(request.form)
    if form.validate():  # only reads the numbers; every value is checked by the run's gate below
        try:
            queue_run(pool, run_body(form))
        except FormValidationError as exc:
            place_errors(form, exc.errors)
        except DigitsError as exc:  # a model this account cannot read, a pool already running
            if isinstance(exc, JobNotFoundError):
                form.model.errors = [*form.model.errors, str(exc)]
            else:
                form.form_errors.append(str(exc))
        else:
            return redirect(url_for("pools.show", job_id=pool.id) + "#pool-run")
    return _page(pool, form, 400)


@bp.get("/pools")
def index():
    """Every readable pool, with a link to make one."""
    return render_template("pool_index.html", pools=_pools())


@bp.route("/pools/new", methods=["GET", "POST"])
def new():
    """The New pool form: a folder under the data roots or a PACS, made by the API's function."""
    form = NewPoolForm(request.form if request.method == "POST" else None)
    if request.method == "POST" and form.validate():
        try:
            pool = create_pool_request(pool_body(form))
        except FormValidationError as exc:
            place_errors(form, exc.errors)
        except DigitsError as exc:  # a folder outside the data roots, an unreachable PACS: named by the message
            form.form_errors.append(str(exc))
        else:
            return redirect(url_for("pools.show", job_id=pool.id))
    return render_template("pool_new.html", form=form), 400 if request.method == "POST" else 200


def _endpoints() -> set[str]:
    return set(current_app.view_functions)


@bp.get("/api/pools/<job_id>/queue")
def queue(job_id: str):
    """The review queue."""
    return jsonify(_pool(job_id).queue(user=request.args.get("user") or None))


@bp.post("/api/pools/<job_id>/runs")
def start_run(job_id: str):
    """Queue a scoring or a round on the executor."""
    pool = _pool(job_id)
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise FormValidationError({"body": ["a JSON object is expected"]}, f"pool {pool.id} run")
    job = queue_run(pool, body)
    return jsonify(
        {"id": job.id, "status": job.reload().status.value, "url": url_for("pools.show_json", job_id=job.id)}
    ), 202


def queue_run(pool: Pool, body: dict[str, Any]) -> Job:
    """Check a scoring/round request (the API's JSON body, or the pool page's form) and queue it.

    Raises:
        FormValidationError: A bad value, named (:func:`digits_core.labeling.jobs.prepare_run`); nothing queued.
        JobNotFoundError: The model is no model job this account may read.
        JobStateError: The pool is being scored already.
    """
    options = {k: v for k, v in body.items() if k != "action"}
    if isinstance(options.get("model"), str) and options["model"]:
        options["model"] = web_context().store.get(options["model"], kind="model").id  # a model this account reads
    user = getattr(getattr(g, "digits_user", None), "name", None)
    job = prepare_run(pool, str(body.get("action", "score")), options, user=user)
    web_context().scheduler.submit(job)
    return job


@bp.post("/api/pools/<job_id>/resume")
def resume(job_id: str):
    """Queue the pool's aborted or failed run again."""
    job = prepare_resume(_pool(job_id))
    web_context().scheduler.submit(job)
    return jsonify({"id": job.id, "status": job.reload().status.value}), 202


@bp.get("/pools/<job_id>/files/<path:name>")
def file(job_id: str, name: str):
    """A proposal or label PNG of the pool folder."""
    pool = _pool(job_id)
    if name.split("/", 1)[0] not in (PROPOSALS_DIR, LABELS_DIR):
        abort(404)
    try:
        path = pool.file(name)
    except PoolError:
        abort(404)
    if not path.is_file():
        abort(404)
    return send_file(path, mimetype="image/png" if path.suffix == ".png" else "application/octet-stream")
