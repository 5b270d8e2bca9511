"""Stored inference results: each run of *Test the model* gets a folder in the job and a GET URL.

A results page is the view's rendered fragments (their pictures are ``data:`` URIs, so a stored result
needs no other file), the run's facts (view, snapshot, inputs, skipped inputs, notes) and the layer
visualizations when asked for. They are written to ``<job>/inference/results/<id>/result.json`` through a
hidden temporary folder that is renamed into place, so a listed result is always complete. The form's
POST (and *Top N per category*'s, :mod:`digits_core.web.top_n_views`) answers ``303 See Other`` to
``/models/<job>/inference/<id>``: the page is bookmarkable and a reload
shows it again instead of running the model again. The model page lists them, newest first, each with
*Delete*. A model keeps its newest ``DIGITS_KEEP_RESULTS`` results (``digits serve --keep-results``,
default 50; 0 keeps all): storing one more deletes the oldest beyond that.
"""

from __future__ import annotations

import shutil

from flask import (
    Blueprint,
    abort,
    flash,
    jsonify,
    redirect,
    render_template,
    send_from_directory,
    url_for,
)
from flask.typing import ResponseReturnValue
from markupsafe import Markup

from ..templating import give_csp_nonce
from .context import web_context
from .helpers import wants_json
from .request_guard import csp_nonce
from .results_store import (  # the storage functions, also importable from here as before
    DEFAULT_KEEP_RESULTS,
    RESULT_FILE,
    RESULT_ID,
    list_results,
    load_result,
    prune_results,
    result_folder,
    results_dir,
    store_and_redirect,
    store_result,
)

__all__ = [
    "bp",
    "DEFAULT_KEEP_RESULTS",
    "RESULT_FILE",
    "RESULT_ID",
    "list_results",
    "load_result",
    "prune_results",
    "result_folder",
    "results_dir",
    "store_and_redirect",
    "store_result",
]

bp = Blueprint("inference_results", __name__, url_prefix="/models")


@bp.get("/<job_id>/inference/<result_id>")
def show(job_id: str, result_id: str) -> ResponseReturnValue:
    """A stored results page (``Accept: application/json``: the record, as the form's JSON twin answers)."""
    from ..plugins.registry import registry  # as in the other views: the registry is loaded on first use

    job = web_context().store.get(job_id, kind="model")
    record = load_result(job, result_id)
    if wants_json():
        return jsonify(
            {
                "model": job.id,
                "id": result_id,
                "results": record.get("json"),
                "info": record.get("info"),
                "html": record.get("fragments"),
                "visualizations": record.get("visualizations"),
                "files": {
                    name: url_for("inference_results.download", job_id=job.id, result_id=result_id, name=name)
                    for name in record.get("files") or []
                },
            }
        )
    view_id = record.get("view_id") or ""
    try:
        view_cls = registry.get_view(view_id)
        stylesheets = [f for f in getattr(view_cls, "stylesheets", ()) or () if view_cls.static_file(f)]
        scripts = [f for f in getattr(view_cls, "scripts", ()) or () if view_cls.static_file(f)]
    except Exception:  # noqa: BLE001 - the view's plugin was uninstalled since: the stored HTML still shows
        stylesheets, scripts = [], []
    frags = {k: give_csp_nonce(v, csp_nonce()) for k, v in (record.get("fragments") or {}).items()}
    result_json = record.get("json") or {}
    return render_template(
        "inference_results.html",
        job=job,
        view_id=view_id,
        view_title=record.get("view_title") or view_id,
        header=Markup(frags.get("header") or ""),
        samples=[Markup(s) for s in frags.get("samples", [])],
        summary=Markup(frags.get("summary") or ""),
        stylesheets=stylesheets,
        scripts=scripts,
        info=record.get("info") or {},
        notes=result_json.get("notes") or [],
        skipped=result_json.get("errors") or [],
        vis=record.get("visualizations"),
        result=record,
    )


@bp.get("/<job_id>/inference/<result_id>/files/<name>")
def download(job_id: str, result_id: str, name: str) -> ResponseReturnValue:
    """One file a stored result lists (e.g. ``CASE_seg.nii.gz``), as an attachment; 404 for any other name."""
    job = web_context().store.get(job_id, kind="model")
    record = load_result(job, result_id)
    if name not in (record.get("files") or []):
        abort(404)
    return send_from_directory(result_folder(job, result_id), name, as_attachment=True)


@bp.post("/<job_id>/inference/<result_id>/delete")
def delete(job_id: str, result_id: str) -> ResponseReturnValue:
    """Delete one stored result and go back to the model page's list."""
    job = web_context().store.get(job_id, kind="model")
    folder = result_folder(job, result_id)
    shutil.rmtree(folder)
    if wants_json():
        return jsonify({"deleted": result_id})
    flash(f"Deleted the inference result of {result_id}.")
    return redirect(url_for("models.show", job_id=job.id) + "#inference-results", code=303)
