"""The notes field of a job page: free text the user keeps with a dataset or model job (``job.json`` key ``notes``)."""

from __future__ import annotations

from flask import flash, redirect, request, url_for
from werkzeug.wrappers import Response

from .context import web_context

#: Longest notes kept (characters).
MAX_NOTES = 10_000


def save_notes(job_id: str, kind: str) -> Response:
    """Store the posted ``notes`` of a job and go back to its page (with a flash saying what happened).

    Args:
        job_id: The job.
        kind: ``"dataset"`` or ``"model"`` (the page to go back to).
    """
    job = web_context().store.get(job_id, kind=kind)
    notes = (request.form.get("notes") or "").replace("\r\n", "\n").strip()
    page = url_for("datasets.show" if kind == "dataset" else "models.show", job_id=job.id) + "#notes"
    if len(notes) > MAX_NOTES:
        flash(f"Notes not saved: {len(notes)} characters, at most {MAX_NOTES:,} are kept.", "bad")
        return redirect(page)
    job.update(notes=notes)
    flash("Notes saved.", "ok")
    return redirect(page)
