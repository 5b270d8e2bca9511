"""Reviewing proposals in the browser (issue 46): the review page, its queue as JSON, and storing a corrected label.

* ``GET /pools/<id>/review``: the editor (``review.html`` + ``static/review.js``): the image or the current
  slice of a volume with the proposal over it, brush / erase / fill per class, undo / redo, accept / reject /
  skip, keyboard shortcuts.
* ``POST /api/pools/<id>/review/next`` (JSON ``{"skip": [candidate ids]}``): claims the next candidate of
  the queue for the signed-in reviewer and answers it as JSON (shape, label version, the label to start from
  as run-length pairs, classes and colours, image URL); ``{"done": true}`` when the queue is empty.
* ``GET /pools/<id>/candidates/<cid>/image.png[?slice=K]``: the candidate's image (a volume's slice K) as PNG.
* ``POST /api/pools/<id>/candidates/<cid>/review`` (JSON ``{"action": "accept"|"reject"|"skip",
  "base_version": N, "mask": {...}}``): ``accept`` stores the posted label as version N+1 through
  :meth:`digits_core.labeling.Pool.store_label` (a file in the pool folder, or a DICOM-SEG in the PACS for a
  DICOMweb pool) and answers 201 ``{"version", "message"}``; a save over a version that is no longer the
  newest, or of a candidate another reviewer holds, answers 409 and stores nothing.

The reviewer's name is the signed-in account's (``g.digits_user``), or ``"local"`` on a server without
accounts. Reviewing is the ``review`` action of :mod:`digits_core.accounts` (annotators, trainers, admins on
a pool they may read).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, g, jsonify, render_template, request, url_for
from werkzeug.routing import BuildError

from ..errors import DigitsError
from ..labeling import ClaimedError, Pool, PoolError, StaleLabelError
from ..labeling.pool import PROPOSED, REJECTED
from ..limits import InputTooLargeError
from .context import web_context
from .helpers import json_body
from .review_data import (
    candidate_shape,
    current_label,
    decode_mask,
    encode_runs,
    image_png,
    is_pacs_pool,
    pacs_plugin,
)

bp = Blueprint("review", __name__)

#: Reviewer name stored with label versions on a server without accounts.
LOCAL_REVIEWER = "local"
#: Colours of classes 1.. when the pool names none (class 0, background, is never drawn).
DEFAULT_PALETTE = [[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48]]


def reviewer() -> str:
    """The signed-in account's name, or :data:`LOCAL_REVIEWER` without accounts."""
    user = g.get("digits_user")
    return str(user.name) if user is not None else LOCAL_REVIEWER


def _pool(job_id: str) -> Pool:
    return Pool(web_context().store.get(job_id))


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": {"code": status, "message": message}}), status


def _classes(record: dict[str, Any]) -> tuple[list[str], list[list[int]]]:
    names = [str(n) for n in record.get("class_labels") or []] or ["background", "foreground"]
    palette = record.get("color_palette") or []
    colours = [
        list(palette[k]) if k < len(palette) else DEFAULT_PALETTE[k % len(DEFAULT_PALETTE)] for k in range(len(names))
    ]
    return names, colours


@bp.get("/pools/<job_id>/review")
def page(job_id: str):
    """The review page of a pool."""
    pool = _pool(job_id)
    try:
        pool_url = url_for("pools.show", job_id=pool.id)
    except BuildError:  # no pool page in this build: the heading names the pool without a link
        pool_url = None
    return render_template(
        "review.html",
        pool_id=pool.id,
        pool_url=pool_url,
        pool_name=pool.job.name,
        reviewer=reviewer(),
        next_url=url_for("review.next_candidate", job_id=pool.id),
    )


def _describe(pool: Pool, cand: dict[str, Any], remaining: int) -> dict[str, Any]:
    record = pool.record()
    classes, palette = _classes(record)
    shape = candidate_shape(pool, cand)
    label = current_label(pool, cand, shape)
    newest = cand["labels"][-1] if cand.get("labels") else None
    author = newest["by"] if newest else f"model {(cand.get('proposal') or {}).get('model_id') or ''}".strip()
    return {
        "done": False,
        "candidate": cand["id"],
        "kind": "volume" if len(shape) == 3 else "image",
        "shape": list(shape),
        "version": int(cand["version"]),
        "state": cand["state"],
        "author": author or None,
        "score": cand.get("score"),
        "label": {"encoding": "rle", "runs": encode_runs(label)},
        "classes": classes,
        "palette": palette,
        "remaining": remaining,
        "image_url": url_for("review.image", job_id=pool.id, cid=cand["id"]),
        "save_url": url_for("review.decide", job_id=pool.id, cid=cand["id"]),
    }


@bp.post("/api/pools/<job_id>/review/next")
def next_candidate(job_id: str):
    """Claim the next candidate of the queue (skipping the ids in ``skip``) and answer it as JSON."""
    pool = _pool(job_id)
    body = json_body() if request.get_data() else {}
    skip = body.get("skip") or []
    if not isinstance(skip, list) or not all(isinstance(s, str) for s in skip) or len(skip) > 10_000:
        return _error(400, '"skip" must be a list of candidate ids.')
    user = reviewer()
    queue = [c for c in pool.queue(user=user) if c["id"] not in set(skip)]
    for index, cand in enumerate(queue):
        try:
            claimed = pool.claim(cand["id"], user)
        except ClaimedError:  # taken by someone else since the queue was read
            continue
        try:
            return jsonify(_describe(pool, claimed, len(queue) - index - 1))
        except DigitsError as exc:  # its image or label cannot be read: the claim is given back, nothing else changes
            if cand["state"] == PROPOSED:
                pool.release(cand["id"], user, PROPOSED)
            status = 413 if isinstance(exc, InputTooLargeError) else 502 if is_pacs_pool(pool) else 400
            return _error(status, f"Candidate {cand['id']}: {exc}")
    return jsonify({"done": True, "message": f"No proposal of pool {pool.job.name} waits for review."})


@bp.get("/pools/<job_id>/candidates/<cid>/image.png")
def image(job_id: str, cid: str):
    """A candidate's image, or slice ``slice`` of its volume, as PNG."""
    pool = _pool(job_id)
    try:
        index = int(request.args.get("slice", "0"))
    except ValueError:
        return _error(400, '"slice" must be a whole number.')
    return Response(
        image_png(pool, pool.candidate(cid), index), mimetype="image/png", headers={"Cache-Control": "no-store"}
    )


@bp.post("/api/pools/<job_id>/candidates/<cid>/review")
def decide(job_id: str, cid: str):
    """Accept (store the posted label as a new version), reject or skip a candidate."""
    pool = _pool(job_id)
    body = json_body()
    action = body.get("action")
    user = reviewer()
    try:
        if action in ("reject", "skip"):
            cand = pool.release(cid, user, REJECTED if action == "reject" else PROPOSED)
            return jsonify(
                {
                    "candidate": cid,
                    "state": cand["state"],
                    "version": cand["version"],
                    "message": f"Candidate {cid} {'rejected' if action == 'reject' else 'skipped'}.",
                }
            )
        if action != "accept":
            return _error(400, '"action" must be "accept", "reject" or "skip".')
        base = body.get("base_version")
        if type(base) is not int or base < 0:
            return _error(400, '"base_version" (the label version the edit started from) must be a whole number.')
        cand = pool.candidate(cid)
        shape = candidate_shape(pool, cand)
        classes, _ = _classes(pool.record())
        mask = decode_mask(body["mask"], shape, len(classes)) if "mask" in body else current_label(pool, cand, shape)
        entry = pool.store_label(cid, mask, user=user, base_version=base, writer=_writer(pool, cand, mask, user))
    except (StaleLabelError, ClaimedError) as exc:
        return _error(409, str(exc))
    except PoolError as exc:
        return _error(400, str(exc))
    where = entry.get("file") or f"series {entry.get('series')}"
    return (
        jsonify(
            {
                "candidate": cid,
                "version": entry["version"],
                "by": entry["by"],
                "location": where,
                "message": f"Stored label version {entry['version']} of {cid} ({where}).",
            }
        ),
        201,
    )


def _writer(pool: Pool, cand: dict[str, Any], mask: Any, user: str):
    """The label writer of a DICOMweb pool (a new DICOM-SEG series through STOW-RS); ``None`` for a folder pool.

    :meth:`~digits_core.labeling.Pool.store_label` calls it after the version check, under the pool's record
    lock, so a stale save stores no SEG either.
    """
    if not is_pacs_pool(pool):
        return None
    plugin, source = pacs_plugin(pool), pool.record()["source"]
    classes, _ = _classes(pool.record())
    return lambda version: plugin.review_store(source, cand["source"], mask, classes, version=version, user=user)


__all__ = ["bp", "reviewer", "LOCAL_REVIEWER"]
