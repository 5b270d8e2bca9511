"""TF Serving's REST API on ``digits serve``: predict and model status for every model job.

* ``POST /v1/models/<id or name>[/versions/<epoch>]:predict`` with a TF
  Serving body (:mod:`digits_core.inference.predict_api`) → ``{"predictions": ...}``
  or ``{"outputs": ...}``, run by the app's inference worker (warm model cache).
* ``GET /v1/models/<id or name>[/versions/<epoch>]`` → ``{"model_version_status": [...]}``
  (one entry per snapshot: ``AVAILABLE``, or ``END`` with error code
  ``DATA_LOSS`` when its file is truncated or damaged; such a version
  answers predict with 404, and predict without a version uses the last
  available one, as TF Serving serves its latest loaded version).

A model is named by its job id (or unique prefix) or by its job name when
one model has it. The version is the snapshot epoch (fractional epochs × 1000,
as in the exported TF Serving layout). Same token and Host rules as the rest
of the API: a TF Serving client sends no cookie and no CSRF token, so
predict needs no CSRF token but must be ``application/json`` (a page of
another site cannot send that without a CORS preflight this server never
grants), and the Origin check still refuses a browser's cross-site request.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify, request
from flask.typing import ResponseReturnValue

from ..errors import DigitsError, JobNotFoundError
from ..inference.export_formats import serving_version
from ..inference.predict_api import check_predict_body
from ..inference.snapshots import list_snapshots, read_model_info, snapshot_problem
from ..jobs import Job
from ..limits import InputTooLargeError
from .context import web_context

bp = Blueprint("tf_serving", __name__, url_prefix="/v1/models")  # security.TOKEN_ONLY_ENDPOINTS names its predict


def _error(code: int, message: str) -> tuple[Response, int]:
    return jsonify(error=message), code  # TF Serving's error shape


@bp.errorhandler(DigitsError)
def _digits_error(exc: DigitsError) -> ResponseReturnValue:
    if isinstance(exc, InputTooLargeError):
        return _error(413, str(exc))  # refused from the headers, before the worker was asked
    return _error(404 if isinstance(exc, JobNotFoundError) else 400, str(exc))


def _model_job(name: str) -> Job:
    store = web_context().store
    try:
        return store.get(name, kind="model")
    except JobNotFoundError:
        named = [job for job in store.list(kind="model") if job.name == name]
        if len(named) == 1:
            return named[0]
        if named:
            raise JobNotFoundError(f'{len(named)} models are named "{name}"; use the model id.') from None
        raise


def _snapshots(job: Job) -> dict:
    return list_snapshots(job, read_model_info(job))


def _epoch_of(job: Job, version: str) -> int:
    snapshots = _snapshots(job)
    for epoch in snapshots:
        if str(serving_version(epoch)) == version:
            return epoch
    raise JobNotFoundError(
        f"Model {job.id} has no version {version}; versions: "
        f"{', '.join(str(serving_version(e)) for e in snapshots) or 'none yet'}."
    )


def _status(job: Job, versions: list) -> dict:
    snapshots = _snapshots(job)
    entries = []
    for epoch in versions:
        problem = snapshot_problem(snapshots[epoch])
        entries.append(
            {
                "version": str(serving_version(epoch)),
                "state": "END" if problem else "AVAILABLE",
                "status": {"error_code": "DATA_LOSS", "error_message": problem}
                if problem
                else {"error_code": "OK", "error_message": ""},
            }
        )
    return {"model_version_status": entries}


@bp.get("/<name>")
def status(name: str) -> ResponseReturnValue:
    """TF Serving's model status: every snapshot of the model."""
    job = _model_job(name)
    return jsonify(_status(job, list(_snapshots(job))))


@bp.get("/<name>/versions/<version>")
def status_version(name: str, version: str) -> ResponseReturnValue:
    """TF Serving's status of one version (snapshot epoch)."""
    job = _model_job(name)
    return jsonify(_status(job, [_epoch_of(job, version)]))


def _serving_epoch(job: Job, version: str | None) -> tuple[int | None, str | None]:
    """The epoch a predict runs on, or the 404 answer naming why that version is not available."""
    snapshots = _snapshots(job)
    if version is not None:
        epoch = _epoch_of(job, version)
        problem = snapshot_problem(snapshots[epoch])
        return (
            (epoch, None)
            if problem is None
            else (None, f"Model {job.id} version {version} is not available: {problem}.")
        )
    for epoch in sorted(snapshots, reverse=True):  # TF Serving serves the latest version that loaded
        if snapshot_problem(snapshots[epoch]) is None:
            return epoch, None
    versions = ", ".join(str(serving_version(e)) for e in snapshots) or "none yet"
    return None, f"Model {job.id} has no available version (versions: {versions})."


def _predict(name: str, version: str | None = None) -> ResponseReturnValue:
    from .inference_worker import run_in_worker

    if not request.is_json:
        return _error(415, 'A predict request is JSON: send it with "Content-Type: application/json".')
    body = request.get_json(silent=True)
    if body is None:
        return _error(400, "The request body is not valid JSON.")
    job = _model_job(name)
    check_predict_body(body)  # declared sizes against the limits: an oversized request never occupies the worker
    epoch, unavailable = _serving_epoch(job, version)
    if unavailable:
        return _error(404, unavailable)
    result = run_in_worker(
        "predict",
        {
            "model": str(job.path),
            "jobs_dir": str(web_context().jobs_dir),
            "epoch": epoch,
            "body": body,
        },
    )
    return jsonify(result["answer"])


@bp.post("/<name>:predict")
def predict(name: str) -> ResponseReturnValue:
    """TF Serving's predict on the model's last available snapshot."""
    return _predict(name)


@bp.post("/<name>/versions/<version>:predict")
def predict_version(name: str, version: str) -> ResponseReturnValue:
    """TF Serving's predict on one snapshot (version = epoch)."""
    return _predict(name, version)
