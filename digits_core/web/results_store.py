"""Stored inference results on disk: write one run atomically, list, load and prune them (:mod:`.inference_results`
serves them; the inference pages store theirs through :func:`store_and_redirect`)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from flask import abort, current_app, has_app_context, redirect, url_for
from flask.typing import ResponseReturnValue

if TYPE_CHECKING:
    from ..jobs import Job

#: A result id: ``YYYYMMDD-HHMMSS-xxxxxx`` (sorts by time, as job ids do).
RESULT_ID = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{6}$")
RESULT_FILE = "result.json"
#: Results a model keeps when the app does not say (``create_app(keep_results=...)``).
DEFAULT_KEEP_RESULTS = 50
#: A hidden write folder older than this was left by a server that died mid-write.
_STALE_WRITE_S = 24 * 3600


def results_dir(job: Job) -> Path:
    """The folder of a model job's stored results."""
    return job.path / "inference" / "results"


def store_result(job: Job, record: dict, files: list | None = None, keep: int | None = None) -> str:
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


def prune_results(job: Job, keep: int) -> list[str]:
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

    def age(folder: Path) -> tuple[str, int]:
        try:
            return folder.name[:15], folder.stat().st_mtime_ns
        except OSError:
            return folder.name[:15], 0

    return sorted((p for p in root.iterdir() if RESULT_ID.match(p.name)), key=age, reverse=True)


def result_folder(job: Job, result_id: str) -> Path:
    """The folder of one stored result; 404 for a malformed id or a result that is not there."""
    if not RESULT_ID.match(result_id or ""):
        abort(404)
    folder = results_dir(job) / result_id
    if not (folder / RESULT_FILE).is_file():
        abort(404)
    return folder


def load_result(job: Job, result_id: str) -> dict:
    """The stored record of one result (404 when there is none)."""
    with open(result_folder(job, result_id) / RESULT_FILE, encoding="utf-8") as handle:
        return json.load(handle)


def list_results(job: Job) -> list[dict]:
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


def store_and_redirect(
    job: Job, view_id: str, view_title: str, result: dict, inputs: str, samples: int | None = None
) -> ResponseReturnValue:
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
