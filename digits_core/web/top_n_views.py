"""Top N predictions per category (DIGITS 6's page of that name) for a classification model.

The model page's *Top N predictions per category* form posts a folder or list
file on the server, N and a snapshot; the inference worker process runs the
model over every image and returns, for each class, the N images scored
highest for it with thumbnails
(:func:`digits_core.inference.top_per_class.top_images_per_class`). The page is
stored as the model's other inference results are
(:mod:`digits_core.web.inference_results`): the POST answers ``303 See Other``
to its GET address, the model page lists it, a reload runs nothing. A bad
input comes back on the model page, next to the field, with the values kept.
JSON clients get the ranking without thumbnails (and nothing is stored).
"""

from __future__ import annotations

import os

from flask import Blueprint, jsonify, render_template, request
from flask.typing import ResponseReturnValue

from ..errors import DigitsError, FormValidationError
from .context import request_data_roots, web_context
from .helpers import invalid_json, wants_json
from .inference_inputs import check_inference_path
from .model_page import render_model_page
from .results_store import store_and_redirect

bp = Blueprint("top_n", __name__, url_prefix="/models")
bp.register_error_handler(FormValidationError, invalid_json)  # JSON clients get the fields, as from /api

#: Largest N the form accepts (each class shows N thumbnails).
MAX_N = 100
FIELDS = ("server_path", "top_n", "snapshot")
#: The ``view_id`` and title a stored Top N result is listed under on the model page.
VIEW_ID, VIEW_TITLE = "top-n", "Top N per category"


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
    from .inference_worker import run_in_worker

    job = web_context().store.get(job_id, kind="model")
    try:
        n = _count(request.form.get("top_n", ""))
        path = check_inference_path(request.form.get("server_path", ""))
        result = run_in_worker(
            "top_n",
            {
                "model": str(job.path),
                "jobs_dir": str(web_context().jobs_dir),
                "inputs": [path],
                "n": n,
                "epoch": request.form.get("snapshot") or None,
                "data_roots": request_data_roots(),
                "max_errors": request.form.get("max_errors") or None,
            },
        )
    except DigitsError as exc:
        if wants_json():
            raise

        errors = exc.errors if isinstance(exc, FormValidationError) else {"": [str(exc)]}
        values = {k: request.form.get(k, "") for k in FIELDS}
        return render_model_page(job, top_n_errors=errors, top_n_values=values)  # 200: see inference_views.infer
    if wants_json():
        return jsonify(_without_thumbnails(result))
    return store_top_n(job, result, path)


def _without_thumbnails(result: dict) -> dict:
    """The ranking as JSON clients get it: each image without its thumbnail."""
    return {
        **result,
        "classes": [
            {**group, "images": [{k: v for k, v in image.items() if k != "image"} for image in group["images"]]}
            for group in result["classes"]
        ],
    }


def store_top_n(job, result: dict, path: str) -> ResponseReturnValue:
    """Store one Top N run (the worker's answer over ``path``) as an inference result and redirect to its page.

    The classes and their thumbnails are the page's header fragment; the record's JSON is the ranking
    without thumbnails (with the skipped inputs), its info the snapshot, N and the images ranked.
    """
    base = path if os.path.isdir(path) else os.path.dirname(path)
    for group in result["classes"]:
        for image in group["images"]:
            image["shown"] = _shown_name(image["input_id"], base)
    header = render_template("_top_n_result.html", r=result, path=path)
    info = {"epoch": (result.get("model") or {}).get("epoch"), "N": result["n"], "images": result["inputs"]}
    return store_and_redirect(
        job,
        VIEW_ID,
        VIEW_TITLE,
        {"fragments": {"header": header}, "info": info, "json": _without_thumbnails(result)},
        path,
        samples=result["inputs"],
    )
