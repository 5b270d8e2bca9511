"""Evaluations in the web UI and the JSON API: the model page's Evaluate panel, the report, the leaderboard.

* ``POST /api/evaluations`` (JSON ``{"model", "epoch", "dataset", "stage", "name", "bootstrap", "folder",
  "list", "mlflow"}``; only ``model`` is required: the model's own dataset, stage ``test``) checks the request
  through the submission layer's gate (:mod:`digits_core.submit.evaluations`: labelled ``folder``/``list``
  paths under the data roots, an MLflow URI only where the operator allows it), runs ``digits evaluate`` in a
  one-off process (TensorFlow never loads in the web server) and answers 201 ``{"id", "url", "json", "summary"}``;
  a bad request (a class the model never saw, a dataset of another task, an empty stage, a path outside the
  data roots) is a 400 naming it and creates nothing. ``POST /models/<id>/evaluate`` is the panel's form
  (the same fields; folders and lists one per line): it sends the browser to the report.
* ``GET /evaluations/<id>``: the report page (the same page ``digits evaluate --report`` writes);
  ``GET /evaluations/<id>.json`` (or ``Accept: application/json``): its ``metrics.json``;
  ``GET /evaluations/<id>/files/<name>``: ``metrics.json``, ``predictions.csv``, ``per_class.csv``,
  ``summary.json``, ``report.html``.
* ``GET /leaderboard?dataset=<id>&stage=test`` and ``GET /api/leaderboard?...``: every model evaluated on
  that test set (:func:`digits_core.evaluation.leaderboard`), the best per figure marked.
"""

from __future__ import annotations

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    send_file,
    url_for,
)
from flask.typing import ResponseReturnValue
from markupsafe import Markup

from ..errors import DigitsError, FormValidationError
from ..evaluation.leaderboard import leaderboard
from ..evaluation.report import fmt, render_report
from ..evaluation.run import (
    MAX_METRICS_BYTES,
    RESULTS,
    STAGES,
    WORST_FILE,
    EvaluationResult,
    load_evaluation,
)
from ..jobs import Job, JobStore
from ..jobs.readers import read_json_record
from ..submit.evaluations import check_evaluation_request
from ..submit.evaluations import run_evaluation as submit_evaluation
from .helpers import wants_json
from .request_guard import csp_nonce

bp = Blueprint("evaluations", __name__)

#: Files of an evaluation a client may download.
FILES = {
    "metrics.json": "application/json",
    "summary.json": "application/json",
    "worst_cases.json": "application/json",
    "predictions.csv": "text/csv",
    "per_class.csv": "text/csv",
    "report.html": "text/html",
}
#: Seconds an evaluation may run before the request gives up on it.
DEFAULT_TIMEOUT_S = 900


def _store() -> JobStore:
    return current_app.extensions["digits"]["store"]


def model_evaluations(model_id: str) -> list[Job]:
    """The finished evaluations of a model, newest first (for its page's panel)."""
    return [j for j in _store().list("evaluation") if j.data.get("model_id") == model_id]


@bp.app_context_processor
def _panel_helpers() -> dict:
    return {"model_evaluations": model_evaluations, "evaluation_stages": STAGES, "evaluation_fmt": fmt}


def _options(values: dict) -> dict:
    """The request checked by the submission layer's gate (a 400 naming the field otherwise)."""
    return check_evaluation_request(values, _store())


def run_evaluation(options: dict) -> dict:
    """``digits evaluate ... --json`` in a one-off process (:func:`digits_core.submit.evaluations.run_evaluation`)."""
    timeout = float(current_app.config.get("DIGITS_EVALUATION_TIMEOUT", DEFAULT_TIMEOUT_S))
    return submit_evaluation(options, _store().root, timeout)


def _created(summary: dict) -> dict:
    job_id = summary["job_id"]
    return {
        "id": job_id,
        "url": url_for("evaluations.show", job_id=job_id),
        "json": url_for("evaluations.show_json", job_id=job_id),
        "summary": summary,
    }


@bp.post("/api/evaluations")
def create() -> ResponseReturnValue:
    """Evaluate a model on a test set (see the module docstring); 201 with the new job."""
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise FormValidationError({"body": ["send a JSON object (Content-Type: application/json)"]}, "request")
    return jsonify(_created(run_evaluation(_options(body)))), 201


@bp.post("/models/<job_id>/evaluate")
def create_from_panel(job_id: str) -> ResponseReturnValue:
    """The model page's Evaluate panel: evaluate, then show the report."""
    options = _options({**request.form.to_dict(), "model": job_id})
    created = _created(run_evaluation(options))
    if wants_json():
        return jsonify(created), 201
    return redirect(created["url"])


def _evaluation(job_id: str) -> EvaluationResult:
    return load_evaluation(job_id, _store().root)


@bp.get("/evaluations/<job_id>")
def show(job_id: str) -> ResponseReturnValue:
    """The report page (JSON: its ``metrics.json``)."""
    result = _evaluation(job_id)
    if wants_json():
        return jsonify(result.metrics)
    back = url_for("models.show", job_id=result.metrics["model_id"]) if result.metrics.get("model_id") else None
    worst = result.job.path / RESULTS / WORST_FILE
    try:
        cases = read_json_record(worst, max_bytes=MAX_METRICS_BYTES) if worst.is_file() else []
    except (OSError, DigitsError):  # a damaged file costs the pictures, never the page
        cases = []
    cases = cases if isinstance(cases, list) and all(isinstance(c, dict) for c in cases) else []
    page = render_report(result.metrics, result.job.name, nonce=csp_nonce(), back=back, worst=cases)
    return Response(page, mimetype="text/html")


@bp.get("/evaluations/<job_id>.json")
def show_json(job_id: str) -> ResponseReturnValue:
    """The evaluation's ``metrics.json``."""
    return jsonify(_evaluation(job_id).metrics)


@bp.get("/evaluations/<job_id>/files/<name>")
def download(job_id: str, name: str) -> ResponseReturnValue:
    """One of the evaluation's files (:data:`FILES`)."""
    if name not in FILES:
        abort(404)
    result = _evaluation(job_id)
    path = result.job.path / RESULTS / name
    if not path.is_file():
        abort(404)
    return send_file(path, mimetype=FILES[name], as_attachment=name != "report.html", download_name=name)


def _board() -> dict:
    dataset = request.args.get("dataset", "").strip()
    if not dataset:
        raise FormValidationError({"dataset": ["give the dataset job id of the test set"]}, "leaderboard")
    stage = request.args.get("stage", "test")
    if stage not in STAGES:
        raise FormValidationError({"stage": [f"one of {', '.join(STAGES)}"]}, "leaderboard")
    return leaderboard(_store().get(dataset, kind="dataset").id, stage, jobs_dir=_store().root, store=_store())


@bp.get("/api/leaderboard")
def leaderboard_json() -> ResponseReturnValue:
    """Every model evaluated on one test set, as JSON."""
    return jsonify(_board())


@bp.get("/leaderboard")
def leaderboard_page() -> ResponseReturnValue:
    """Every model evaluated on one test set, as a sortable table."""
    board = _board()
    if wants_json():
        return jsonify(board)
    return render_template("evaluation_leaderboard.html", board=board, fmt=lambda v: Markup(fmt(v)))
