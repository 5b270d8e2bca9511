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

import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    has_app_context,
    jsonify,
    redirect,
    render_template,
    send_from_directory,
    url_for,
)
from markupsafe import Markup

from ..templating import give_csp_nonce
from .context import web_context
from .helpers import wants_json
from .request_guard import csp_nonce

bp = Blueprint("inference_results", __name__, url_prefix="/models")

#: A result id: ``YYYYMMDD-HHMMSS-xxxxxx`` (sorts by time, as job ids do).
RESULT_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")
RESULT_FILE = "result.json"
#: Results a model keeps when the app does not say (``create_app(keep_results=...)``).
DEFAULT_KEEP_RESULTS = 50
#: A hidden write folder older than this was left by a server that died mid-write.
_STALE_WRITE_S = 24 * 3600


def results_dir(job) -> Path:
    """The folder of a model job's stored results."""
    return job.path / "inference" / "results"


def store_result(job, record: dict, files: list | None = None, keep: int | None = None) -> str:
    """Write one run's results atomically, prune the oldest beyond ``keep``, and return its id.

    Args:
        job: The model job.
        record: What the results page shows (``view_id``, ``view_title``, ``fragments``, ``info``,
            ``notes``, ``skipped``, ``visualizations``, ``inputs``, ``samples``).
        files: Files the run wrote (a volume's NIfTI and DICOM-SEG): moved into the result's folder,
            listed in the record's ``files`` and downloaded from :func:`download`.
        keep: How many results the model keeps, this one included (0: all). Default: the app's
            ``DIGITS_KEEP_RESULTS``, or :data:`DEFAULT_KEEP_RESULTS` outside an app.
    """
    root = results_dir(job)
    root.mkdir(parents=True, exist_ok=True)
    result_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    staging = root / f".writing-{result_id}"
    staging.mkdir()
    try:
        names = []
        for path in files or ():
            names.append(Path(path).name)
            shutil.move(str(path), staging / names[-1])
        with open(staging / RESULT_FILE, "w", encoding="utf-8") as handle:
            json.dump({**record, "id": result_id, "created": time.time(), "files": names}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(staging, root / result_id)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if keep is None:
        keep = (
            current_app.config.get("DIGITS_KEEP_RESULTS", DEFAULT_KEEP_RESULTS)
            if has_app_context()
            else DEFAULT_KEEP_RESULTS
        )
    prune_results(job, keep)
    return result_id


def prune_results(job, keep: int) -> list[str]:
    """Delete a model's oldest results beyond the newest ``keep`` (0: keep all), and write folders a dead
    server left behind; return the ids deleted.

    A result is renamed to a hidden folder before it is removed, so the list never shows half a result.
    """
    root = results_dir(job)
    if not root.is_dir():
        return []
    stored = _newest_first(root)
    doomed = stored[keep:] if keep > 0 else []
    for folder in doomed:
        hidden = root / f".deleting-{folder.name}"
        try:
            os.rename(folder, hidden)
        except OSError:
            continue  # deleted by another request meanwhile
        shutil.rmtree(hidden, ignore_errors=True)
    for interrupted in root.glob(".deleting-*"):  # a delete a dead server did not finish
        shutil.rmtree(interrupted, ignore_errors=True)
    now = time.time()
    for leftover in root.glob(".writing-*"):
        try:
            if now - leftover.stat().st_mtime > _STALE_WRITE_S:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            pass
    return [folder.name for folder in doomed]


def _newest_first(root: Path) -> list[Path]:
    """The result folders under ``root``, newest first: an id names its second, the folder's time orders
    results stored within one second."""

    def age(folder: Path):
        try:
            return folder.name[:15], folder.stat().st_mtime_ns
        except OSError:
            return folder.name[:15], 0

    return sorted((p for p in root.iterdir() if RESULT_ID.match(p.name)), key=age, reverse=True)


def _folder(job, result_id: str) -> Path:
    if not RESULT_ID.match(result_id or ""):
        abort(404)
    folder = results_dir(job) / result_id
    if not (folder / RESULT_FILE).is_file():
        abort(404)
    return folder


def load_result(job, result_id: str) -> dict:
    """The stored record of one result (404 when there is none)."""
    with open(_folder(job, result_id) / RESULT_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def list_results(job) -> list[dict]:
    """The stored results of a model job, newest first: ``id``, ``created``, ``view_title``, ``inputs``,
    ``samples``, ``epoch`` and ``url`` (the summary the model page lists, without the fragments)."""
    root = results_dir(job)
    if not root.is_dir():
        return []
    listed = []
    for folder in _newest_first(root):
        try:
            with open(folder / RESULT_FILE, encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        listed.append(
            {
                "id": folder.name,
                "created": record.get("created"),
                "view_id": record.get("view_id"),
                "view_title": record.get("view_title"),
                "inputs": record.get("inputs") or "",
                "samples": record.get("samples", 0),
                "epoch": (record.get("info") or {}).get("epoch"),
                "url": url_for("inference_results.show", job_id=job.id, result_id=folder.name),
            }
        )
    return listed


@bp.get("/<job_id>/inference/<result_id>")
def show(job_id: str, result_id: str):
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
def download(job_id: str, result_id: str, name: str):
    """One file a stored result lists (e.g. ``CASE_seg.nii.gz``), as an attachment; 404 for any other name."""
    job = web_context().store.get(job_id, kind="model")
    record = load_result(job, result_id)
    if name not in (record.get("files") or []):
        abort(404)
    return send_from_directory(_folder(job, result_id), name, as_attachment=True)


@bp.post("/<job_id>/inference/<result_id>/delete")
def delete(job_id: str, result_id: str):
    """Delete one stored result and go back to the model page's list."""
    job = web_context().store.get(job_id, kind="model")
    folder = _folder(job, result_id)
    shutil.rmtree(folder)
    if wants_json():
        return jsonify({"deleted": result_id})
    flash(f"Deleted the inference result of {result_id}.")
    return redirect(url_for("models.show", job_id=job.id) + "#inference-results", code=303)


def store_and_redirect(job, view_id: str, view_title: str, result: dict, inputs: str, samples: int | None = None):
    """Store a finished run (see :func:`store_result`; ``result["files"]``: the files it wrote) and answer the
    redirect to its page.

    ``samples`` is the count the model page lists (default: the sample fragments; Top N, whose classes are
    one header fragment, gives the images it ranked).
    """
    fragments = result.get("fragments") or {}
    record = {
        "view_id": view_id,
        "view_title": view_title,
        "fragments": fragments,
        "info": result.get("info") or {},
        "json": result.get("json") or {},
        "visualizations": result.get("visualizations"),
        "inputs": inputs,
        "samples": len(fragments.get("samples") or []) if samples is None else samples,
    }
    result_id = store_result(job, record, result.get("files"))
    return redirect(url_for("inference_results.show", job_id=job.id, result_id=result_id), code=303)
