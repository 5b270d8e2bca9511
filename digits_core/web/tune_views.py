"""Hyper-parameter sweeps on the web: ``POST /api/sweeps``, the comparison page and its JSON twin.

* ``POST /api/sweeps`` starts :func:`digits_core.tuning.tune` in the server
  process (Ray Tune on this machine, or ``$DIGITS_RAY_ADDRESS``): the trials run
  as model jobs of one group in Ray workers, not in the server's own queue.
  Its ``options`` pass the gate of ``POST /api/models``
  (:func:`digits_core.web.sweeps.check_request_options`); the Ray cluster and the
  jobs folder are the server's, never a request's.
* ``/sweeps/ID`` compares a sweep's trials: a table sorted by the metric with
  their options, status and pruning rung, the validation curves overlaid, a
  chart of each searched option against the metric, the epochs spent against
  the full grid's, and a *Promote* button on the best trial.
  ``/sweeps/ID.json`` is :func:`digits_core.sweep_report.sweep_summary`.
* ``/compare?jobs=A,B,C&metric=val_loss`` does the same for any hand-picked
  model jobs (``/compare.json``).
"""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from ..errors import FormValidationError
from .api import invalid_json
from .sweeps import check_request_options, server_setting_errors

bp = Blueprint("sweeps", __name__)
bp.register_error_handler(FormValidationError, invalid_json)

#: ``POST /api/sweeps`` keys besides the training ``options`` (the arguments of :func:`digits_core.tuning.tune`).
SWEEP_KEYS = (
    "dataset",
    "network",
    "name",
    "group",
    "search",
    "scheduler",
    "trials",
    "max_epochs",
    "metric",
    "mode",
    "grace_period",
    "reduction_factor",
    "max_concurrent",
    "search_seed",
)


def _jobs_dir():
    return current_app.extensions["digits"]["jobs_dir"]


@bp.post("/api/sweeps")
def create_sweep() -> ResponseReturnValue:
    """Start a search: ``{"dataset", "search": {option: expr} | ["OPTION=EXPR"], "scheduler", ..., "options"}`` -> 202."""
    from .api import _body

    handle = start_sweep(_body())
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
    """Check a sweep request (the ``POST /api/sweeps`` body) and start it; the New Model form's Search panel too.

    Returns:
        The sweep's :class:`~digits_core.tuning.TuneHandle` (kept by the app).

    Raises:
        FormValidationError: An unknown key, a bad space, setting or option (nothing is created).
    """
    from ..tuning import tune

    refused = server_setting_errors(body)
    if refused:
        raise FormValidationError(refused, "new sweep")
    unknown = sorted(set(body) - set(SWEEP_KEYS) - {"options"})
    if unknown:
        raise FormValidationError({key: ["unknown key of a sweep request"] for key in unknown}, "new sweep")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise FormValidationError({"options": ["must be a JSON object of training options"]}, "new sweep")
    misplaced = sorted(set(options) & set(SWEEP_KEYS))
    if misplaced:
        raise FormValidationError(
            {key: ["a setting of the sweep, not a training option: give it beside options"] for key in misplaced},
            "new sweep",
        )
    if not body.get("dataset"):
        raise FormValidationError({"dataset": ["give the dataset job id"]}, "new sweep")
    _refuse_network_files(body)
    options = dict(options)
    network = body.get("network") if isinstance(body.get("network"), str) else None
    check_request_options(options, current_app.extensions["digits"]["store"], "new sweep", network)  # as /api/models
    kwargs = {key: body[key] for key in SWEEP_KEYS if key in body and key not in ("dataset", "network", "name")}
    handle = tune(
        str(body["dataset"]),
        body.get("network") or None,
        body.get("name") or None,
        jobs_dir=_jobs_dir(),
        **options,
        **kwargs,
    )
    current_app.extensions["digits"].setdefault("sweeps", {})[handle.sweep_id] = handle
    return handle


def _refuse_network_files(body: dict) -> None:
    """A network named by a server-side file is not for web requests (the web form pastes code instead)."""
    from ..search_space import parse_spaces

    names = [body.get("network")]
    search = body.get("search")
    if search:
        space = parse_spaces(search).get("network")
        names += list(space.values) if space else []
    if any(isinstance(n, str) and (n.endswith(".py") or "/" in n or "\\" in n) for n in names):
        raise FormValidationError(
            {"network": ["name a built-in or plugin network; a file on the server is not accepted over the web"]},
            "new sweep",
        )


@bp.post("/api/sweeps/<sweep_id>/abort")
def abort(sweep_id: str) -> ResponseReturnValue:
    """Stop a sweep: no new trial starts, running trials stop at their next step (Aborted), finished ones stay."""
    from ..tuning import abort_sweep

    return jsonify({"id": sweep_id, "aborted_trials": abort_sweep(sweep_id, _jobs_dir())})


@bp.post("/api/sweeps/<sweep_id>/resume")
def resume(sweep_id: str) -> ResponseReturnValue:
    """Run an aborted sweep's unfinished trials (aborted ones continue from their last snapshot) -> 202."""
    from ..tuning import resume_sweep

    handle = resume_sweep(sweep_id, _jobs_dir())
    current_app.extensions["digits"].setdefault("sweeps", {})[handle.sweep_id] = handle
    return jsonify({"id": sweep_id, "status": "Running", "url": url_for("sweeps.show", sweep_id=sweep_id)}), 202


@bp.post("/sweeps/<sweep_id>/promote")
def promote(sweep_id: str) -> ResponseReturnValue:
    """Promote the best trial (or the form's / body's ``job_id``) as the sweep's result, renamed to ``name`` if given."""
    from ..sweep_report import promote as promote_trial

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


@bp.get("/sweeps/<sweep_id>")
def show(sweep_id: str) -> ResponseReturnValue:
    """The comparison page of a sweep (``ID.json``: its summary)."""
    from ..sweep_report import sweep_summary

    as_json = sweep_id.endswith(".json")
    summary = sweep_summary(sweep_id[:-5] if as_json else sweep_id, _jobs_dir())
    if as_json:
        return jsonify(summary)
    return render_template("sweep_compare.html", s=summary, title=f"Sweep {summary['name']}")


@bp.get("/compare")
@bp.get("/compare.json")
def compare() -> ResponseReturnValue:
    """Hand-picked model jobs compared: ``?jobs=A,B,C`` (ids), ``&metric=val_accuracy``, ``&mode=auto|min|max``."""
    from ..sweep_report import compare_models

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
            "promoted": None,
            "status": None,
        },
        title="Compare models",
    )
