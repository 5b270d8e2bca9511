"""Top N predictions per category (DIGITS 6's page of that name) for a classification model.

The model page's *Top N predictions per category* form posts a folder or list
file on the server, N and a snapshot; the inference worker process runs the
model over every image and returns, for each class, the N images scored
highest for it with thumbnails
(:func:`digits_core.inference.top_per_class.top_images_per_class`). A bad
input comes back on the model page, next to the field, with the values kept.
JSON clients get the ranking without thumbnails.
"""

from __future__ import annotations

import os

from flask import Blueprint, current_app, jsonify, render_template, request
from flask.typing import ResponseReturnValue

from ..errors import DigitsError, FormValidationError
from .api import invalid_json
from .helpers import wants_json

bp = Blueprint("top_n", __name__, url_prefix="/models")
bp.register_error_handler(FormValidationError, invalid_json)  # JSON clients get the fields, as from /api

#: Largest N the form accepts (each class shows N thumbnails).
MAX_N = 100
FIELDS = ("server_path", "top_n", "snapshot")


def _ext() -> dict:
    return current_app.extensions["digits"]


def _count(raw: str) -> int:
    try:
        n = int((raw or "").strip() or 9)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_N:
        raise FormValidationError({"top_n": [f"Give a whole number from 1 to {MAX_N}."]}, "top N per category")
    return n


def _shown_name(input_id: str, base: str) -> str:
    """The image's path under the folder given (``7/0044.png``: its class folder shows confusions), else its name."""
    if os.path.isabs(input_id) and os.path.commonpath([base, input_id]) == base:
        return os.path.relpath(input_id, base)
    return os.path.basename(input_id)


@bp.post("/<job_id>/top-n")
def top_n(job_id: str) -> ResponseReturnValue:
    """Run Top N per category and show each class's N best-scored images."""
    from .inference_views import check_inference_path
    from .inference_worker import run_in_worker

    job = _ext()["store"].get(job_id, kind="model")
    try:
        n = _count(request.form.get("top_n", ""))
        path = check_inference_path(request.form.get("server_path", ""))
        result = run_in_worker("top_n", {
            "model": str(job.path), "jobs_dir": str(_ext()["jobs_dir"]), "inputs": [path], "n": n,
            "epoch": request.form.get("snapshot") or None, "data_roots": current_app.config["DIGITS_DATA_ROOTS"],
            "max_errors": request.form.get("max_errors") or None})
    except DigitsError as exc:
        if wants_json():
            raise
        from .models_views import render_model_page

        errors = exc.errors if isinstance(exc, FormValidationError) else {"": [str(exc)]}
        values = {k: request.form.get(k, "") for k in FIELDS}
        return render_model_page(job, top_n_errors=errors, top_n_values=values)  # 200: see inference_views.infer
    if wants_json():
        for group in result["classes"]:
            for image in group["images"]:
                image.pop("image", None)
        return jsonify(result)
    base = path if os.path.isdir(path) else os.path.dirname(path)
    for group in result["classes"]:
        for image in group["images"]:
            image["shown"] = _shown_name(image["input_id"], base)
    return render_template("model_top_n.html", job=job, r=result, path=path)
