"""Hyper-parameter sweeps on the web: ``POST /api/sweeps``, the comparison page and its JSON twin.

* ``POST /api/sweeps`` starts :func:`digits_core.sweeps.tune.tune` in the server
  process (Ray Tune on this machine, or ``$DIGITS_RAY_ADDRESS``): the trials run
  as model jobs of one group in Ray workers, not in the server's own queue.
  Its ``options`` pass the gate of ``POST /api/models``
  (:func:`digits_core.submit.options.check_request_options`); the Ray cluster and the
  jobs folder are the server's, never a request's.
* ``/sweeps/ID`` compares a sweep's trials: a table sorted by the metric with
  their options, status and pruning rung, the validation curves overlaid, a
  chart of each searched option against the metric, the epochs spent against
  the full grid's, and a *Promote* button on the best trial.
  ``/sweeps/ID.json`` is :func:`digits_core.sweeps.report.sweep_summary`.
* ``/sweeps`` lists every sweep (``/sweeps.json``: :func:`digits_core.sweeps.report.sweep_index`).
* ``/compare?jobs=A,B,C&metric=val_loss`` does the same for any hand-picked
  model jobs (``/compare.json``).
"""

from __future__ import annotations

from flask import Blueprint, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from ..errors import FormValidationError
from ..submit.sweeps import start_sweep as submit_sweep
from ..sweeps.report import compare_models, sweep_index, sweep_summary
from ..sweeps.report import promote as promote_trial
from ..sweeps.tune import abort_sweep, read_sweep, resume_sweep
from .context import may_read, web_context
from .helpers import invalid_json, json_body

bp = Blueprint("sweeps", __name__)
bp.register_error_handler(FormValidationError, invalid_json)


def _jobs_dir():
    return web_context().jobs_dir


@bp.post("/api/sweeps")
def create_sweep() -> ResponseReturnValue:
    """Start a search: ``{"dataset", "search": {option: expr} | ["OPTION=EXPR"], "scheduler", ..., "options"}`` -> 202."""
    handle = start_sweep(json_body())
    return jsonify(
        {
            "id": handle.sweep_id,
            "group": handle.group,
            "status": "Running",
            "url": url_for("sweeps.show", sweep_id=handle.sweep_id),
            "json": url_for("sweeps.show", sweep_id=handle.sweep_id + ".json"),
        }
    ), 202


def start_sweep(body: dict):
    """Start the sweep of a request body (:func:`digits_core.submit.sweeps.start_sweep`); the server keeps its handle."""
    ctx = web_context()
    handle = submit_sweep(body, store=ctx.store, jobs_dir=ctx.jobs_dir)
    ctx.sweeps[handle.sweep_id] = handle
    return handle


@bp.post("/api/sweeps/<sweep_id>/abort")
def abort(sweep_id: str) -> ResponseReturnValue:
    """Stop a sweep: no new trial starts, running trials stop at their next step (Aborted), finished ones stay."""
    return jsonify({"id": sweep_id, "aborted_trials": abort_sweep(sweep_id, _jobs_dir())})


@bp.post("/api/sweeps/<sweep_id>/resume")
def resume(sweep_id: str) -> ResponseReturnValue:
    """Run an aborted sweep's unfinished trials (aborted ones continue from their last snapshot) -> 202."""
    handle = resume_sweep(sweep_id, _jobs_dir())
    web_context().sweeps[handle.sweep_id] = handle
    return jsonify({"id": sweep_id, "status": "Running", "url": url_for("sweeps.show", sweep_id=sweep_id)}), 202


@bp.post("/sweeps/<sweep_id>/promote")
def promote(sweep_id: str) -> ResponseReturnValue:
    """Promote the best trial (or the form's / body's ``job_id``) as the sweep's result, renamed to ``name`` if given."""
    body = request.get_json(silent=True) or {}
    job_id = request.form.get("job_id") or body.get("job_id") or None
    name = request.form.get("name") or body.get("name") or None
    row = promote_trial(sweep_id, job_id, _jobs_dir(), name=name)
    if request.is_json:
        return jsonify(
            {
                "id": sweep_id,
                "promoted": row["job_id"],
                "name": row["name"],
                "url": url_for("models.show", job_id=row["job_id"]),
            }
        )
    return redirect(url_for("sweeps.show", sweep_id=sweep_id))


@bp.get("/sweeps.json")
@bp.get("/sweeps")  # registered first: url_for("sweeps.index") is the page
def index() -> ResponseReturnValue:
    """Every sweep: name, status, trials done of all, best metric, a link (``/sweeps.json``: the same rows)."""
    rows, unreadable = sweep_index(_jobs_dir())
    rows = [row for row in rows if may_read(read_sweep(row["id"], _jobs_dir()))]  # with accounts: one's own, shared
    for row in rows:
        row["url"] = url_for("sweeps.show", sweep_id=row["id"])
    if request.path.endswith(".json"):
        return jsonify({"sweeps": rows, "unreadable": [str(exc) for exc in unreadable]})
    return render_template("sweeps_index.html", rows=rows, unreadable=unreadable, title="Sweeps")


@bp.get("/sweeps/<sweep_id>")
def show(sweep_id: str) -> ResponseReturnValue:
    """The comparison page of a sweep (``ID.json``: its summary)."""
    as_json = sweep_id.endswith(".json")
    summary = sweep_summary(sweep_id[:-5] if as_json else sweep_id, _jobs_dir())
    if as_json:
        return jsonify(summary)
    return render_template("sweep_compare.html", s=summary, title=f"Sweep {summary['name']}")


@bp.get("/compare")
@bp.get("/compare.json")
def compare() -> ResponseReturnValue:
    """Hand-picked model jobs compared: ``?jobs=A,B,C`` (ids), ``&metric=val_accuracy``, ``&mode=auto|min|max``."""
    ids = [part.strip() for part in request.args.get("jobs", "").split(",") if part.strip()]
    if not ids:
        raise FormValidationError({"jobs": ["give the model job ids to compare: ?jobs=A,B"]}, "compare")
    metric = request.args.get("metric") or "val_accuracy"
    summary = compare_models(ids, metric, request.args.get("mode") or "auto", _jobs_dir())
    if request.path.endswith(".json"):
        return jsonify(summary)
    return render_template(
        "sweep_compare.html",
        s={
            **summary,
            "search": [],
            "budget": None,
            "pending": [],
            "best": next((r for r in summary["trials"] if r["best"] is not None), None),
            "id": None,
            "name": f"{len(ids)} models",
            "jobs": ",".join(ids),
            "promoted": None,
            "status": None,
        },
        title="Compare models",
    )
