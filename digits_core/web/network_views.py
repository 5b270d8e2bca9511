"""The network page (DIGITS's "Visualize"): layer table with output shapes and parameter counts, and the graph.

Two ways in: the *Visualize* button of a model page (``/models/<id>/network``:
the model's last snapshot, or the network its options build before one
exists) and the *Visualize* button of the New Model form (``/models/network``,
posting the form: the chosen built-in, plugin or custom network built for the
chosen dataset). The Keras model is built in the inference worker process
(:func:`digits_core.engine.network_summary.summarize_model_job` /
:func:`~digits_core.engine.network_summary.summarize_network`); the server
only draws the table and the SVG graph (:mod:`digits_core.web.network_graph`).
Both pages answer as JSON too (``.json`` or ``Accept: application/json``):
the summary itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from flask import Blueprint, jsonify, render_template, request, url_for
from flask.typing import ResponseReturnValue

from ..engine.networks import custom_code_problem
from ..errors import DigitsError, FormValidationError
from .context import web_context
from .helpers import invalid_json, wants_json
from .model_form import CUSTOM
from .network_graph import format_shape, render_svg

bp = Blueprint("network", __name__, url_prefix="/models")
bp.register_error_handler(FormValidationError, invalid_json)  # JSON clients get the fields, as from /api


def _summary(request_body: dict) -> dict:
    from .inference_worker import run_in_worker

    return run_in_worker("network", request_body)["summary"]


def _page(
    summary: dict | None,
    *,
    title: str,
    back: tuple[str, str] | None,
    error: str | None = None,
    status: int = 200,
    json_url: str | None = None,
) -> ResponseReturnValue:
    if wants_json():
        if error:
            raise DigitsError(error)
        return jsonify(summary)
    svg = render_svg(summary["layers"]) if summary else ""
    return render_template(
        "network.html", s=summary, svg=svg, title=title, back=back, error=error, shape=format_shape, json_url=json_url
    ), status


@bp.get("/<job_id>/network.json")
@bp.get("/<job_id>/network")  # innermost: registered first, so url_for gives the HTML page
def job_network(job_id: str) -> ResponseReturnValue:
    """The network of a model job: its last snapshot, or what its options build before the first one."""
    job = web_context().store.get(job_id, kind="model")
    back = (url_for("models.show", job_id=job.id), job.name or job.id)
    try:
        summary = _summary({"job": str(job.path), "jobs_dir": str(web_context().jobs_dir)})
    except DigitsError as exc:
        return _page(None, title=job.name or job.id, back=back, error=str(exc), status=400)
    return _page(
        summary, title=job.name or job.id, back=back, json_url=url_for("network.job_network", job_id=job.id) + ".json"
    )


def form_request(values: Mapping[str, str]) -> dict:
    """The worker request for the New Model form's values (``dataset``, ``network``, ``custom_network``,
    ``crop_size``, ``network_params``, ``task``).

    Raises:
        FormValidationError: No dataset, no network or custom code, a crop size or network parameters
            that do not parse.
    """
    errors: dict[str, list[str]] = {}
    dataset = (values.get("dataset") or "").strip()
    network = (values.get("network") or "").strip()
    if not dataset:
        errors["dataset"] = ["Choose a dataset: the network is built for its image size and classes."]
    if not network:
        errors["network"] = ["Choose a network."]
    body: dict = {"dataset": dataset, "jobs_dir": str(web_context().jobs_dir), "task": values.get("task") or None}
    if network == CUSTOM:
        body["custom_code"] = values.get("custom_network") or ""
        if request.method != "POST":  # code runs only from a CSRF-checked POST, never from a link or an <img>
            errors["custom_network"] = ["Post custom code (the New Model form's Visualize); a GET never runs code."]
        elif custom_code_problem(body["custom_code"]):
            errors["custom_network"] = [custom_code_problem(body["custom_code"]) or ""]
    else:
        body["network"] = network
    crop = (values.get("crop_size") or "").strip()
    if crop:
        try:
            body["crop_size"] = int(crop)
            if body["crop_size"] < 1:
                raise ValueError
        except ValueError:
            errors["crop_size"] = ["Give a whole number of pixels above 0, or leave it empty."]
    params = (values.get("network_params") or "").strip()
    if params:
        try:
            body["network_params"] = json.loads(params)
            if not isinstance(body["network_params"], dict):
                raise ValueError
        except ValueError:
            errors["network_params"] = ['Give a JSON object, e.g. {"dropout": 0.5}.']
    if errors:
        raise FormValidationError(errors, "network")
    if dataset:
        web_context().store.get(dataset, kind="dataset")  # unknown id: 404 naming it
    return body


@bp.route("/network.json", methods=["GET", "POST"])
@bp.route("/network", methods=["GET", "POST"])
def form_network() -> ResponseReturnValue:
    """The New Model form's *Visualize*: the chosen network built for the chosen dataset."""
    values = request.form if request.method == "POST" else request.args
    network = values.get("network") or ""
    title = "custom code" if network == CUSTOM else network or "network"
    back = (url_for("models.new", dataset=values.get("dataset") or None, network=network or None), "New model")
    try:
        body = form_request(values)
        summary = _summary(body)
    except FormValidationError as exc:
        if wants_json():
            raise
        message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in exc.errors.items())
        return _page(None, title=title, back=back, error=message, status=400)
    except DigitsError as exc:
        if wants_json():
            raise
        return _page(None, title=title, back=back, error=str(exc), status=400)
    return _page(summary, title=title, back=back)
