"""TF Serving's REST API on ``digits serve``: predict and model status for every model job.

* ``POST /v1/models/<id or name>[/versions/<epoch>]:predict`` with a TF
  Serving body (:mod:`digits_core.inference.predict_api`) → ``{"predictions": ...}``
  or ``{"outputs": ...}``, run by the app's inference worker (warm model cache).
* ``GET /v1/models/<id or name>[/versions/<epoch>]`` → ``{"model_version_status": [...]}``
  (one entry per snapshot, ``AVAILABLE``).

A model is named by its job id (or unique prefix) or by its job name when
one model has it. The version is the snapshot epoch (fractional epochs × 1000,
as in the exported TF Serving layout). Same token and Host rules as the rest
of the API: a TF Serving client sends no cookie and no CSRF token, so
predict needs no CSRF token but must be ``application/json`` (a page of
another site cannot send that without a CORS preflight this server never
grants), and the Origin check still refuses a browser's cross-site request.
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from ..errors import DigitsError, JobNotFoundError

bp = Blueprint("tf_serving", __name__, url_prefix="/v1/models")  # security.TOKEN_ONLY_ENDPOINTS names its predict


def _error(code: int, message: str):
    return jsonify(error=message), code  # TF Serving's error shape


@bp.errorhandler(DigitsError)
def _digits_error(exc):
    return _error(404 if isinstance(exc, JobNotFoundError) else 400, str(exc))


def _model_job(name: str):
    store = current_app.extensions["digits"]["store"]
    try:
        return store.get(name, kind="model")
    except JobNotFoundError:
        named = [job for job in store.list(kind="model") if job.name == name]
        if len(named) == 1:
            return named[0]
        if named:
            raise JobNotFoundError(f'{len(named)} models are named "{name}"; use the model id.') from None
        raise


def _epochs(job) -> list:
    from ..inference.snapshots import list_snapshots, read_model_info

    return sorted(list_snapshots(job, read_model_info(job)))


def _epoch_of(job, version: str):
    from ..inference.export_formats import serving_version

    for epoch in _epochs(job):
        if str(serving_version(epoch)) == version:
            return epoch
    raise JobNotFoundError(
        f"Model {job.id} has no version {version}; versions: "
        f"{', '.join(str(serving_version(e)) for e in _epochs(job)) or 'none yet'}."
    )


def _status(job, versions: list) -> dict:
    from ..inference.export_formats import serving_version

    return {
        "model_version_status": [
            {
                "version": str(serving_version(epoch)),
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
            for epoch in versions
        ]
    }


@bp.get("/<name>")
def status(name: str):
    """TF Serving's model status: every snapshot of the model."""
    job = _model_job(name)
    return jsonify(_status(job, _epochs(job)))


@bp.get("/<name>/versions/<version>")
def status_version(name: str, version: str):
    """TF Serving's status of one version (snapshot epoch)."""
    job = _model_job(name)
    return jsonify(_status(job, [_epoch_of(job, version)]))


def _predict(name: str, epoch=None):
    from .inference_worker import run_in_worker

    if not request.is_json:
        return _error(415, 'A predict request is JSON: send it with "Content-Type: application/json".')
    body = request.get_json(silent=True)
    if body is None:
        return _error(400, "The request body is not valid JSON.")
    job = _model_job(name)
    result = run_in_worker(
        "predict",
        {
            "model": str(job.path),
            "jobs_dir": str(current_app.extensions["digits"]["jobs_dir"]),
            "epoch": epoch,
            "body": body,
        },
    )
    return jsonify(result["answer"])


@bp.post("/<name>:predict")
def predict(name: str):
    """TF Serving's predict on the model's last snapshot."""
    return _predict(name)


@bp.post("/<name>/versions/<version>:predict")
def predict_version(name: str, version: str):
    """TF Serving's predict on one snapshot (version = epoch)."""
    return _predict(name, _epoch_of(_model_job(name), version))
