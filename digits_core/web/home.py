"""Home page (jobs by group, search, bulk delete), login and plugins page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flask import Blueprint, current_app, flash, jsonify, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from markupsafe import Markup, escape
from werkzeug.wrappers import Response

from ..jobs import Job, JobStore
from ..jobs.health import record_problem
from ..jobs.readers import FIX_HINT, UnreadableRecordError
from ..sweeps.record import sweep_groups
from . import security
from .context import web_context
from .helpers import job_summary, wants_json
from .job_deletes import bulk_delete
from .login import safe_next

if TYPE_CHECKING:
    from ..scheduler import Scheduler

bp = Blueprint("home", __name__)


def store() -> JobStore:
    """The app's :class:`~digits_core.jobs.JobStore`."""
    return web_context().store


def scheduler() -> Scheduler:
    """The app's :class:`~digits_core.scheduler.Scheduler`."""
    return web_context().scheduler


# -- search and groups ---------------------------------------------------------------------------


def search_text(job: Job) -> str:
    """What the home page search looks in: name, id, group, kind, status, plugin, network, dataset (lower case)."""
    data = job.data
    parts = [
        job.name,
        job.id,
        data.get("group"),
        job.kind,
        job.status.value,
        data.get("plugin_id"),
        data.get("network"),
        data.get("dataset_id"),
    ]
    return " ".join(str(p) for p in parts if p).lower()


def matches(text: str, query: str) -> bool:
    """True when every white-space separated term of ``query`` occurs in ``text`` (a :func:`search_text`)."""
    return all(term in text for term in query.lower().split())


@dataclass
class Section:
    """The rows of one jobs table that share a group (``group`` ``None``: jobs without a group)."""

    group: str | None
    rows: list[dict] = field(default_factory=list)

    @property
    def statuses(self) -> dict[str, int]:
        """``{status: count}`` of the rows, in the order statuses first appear."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        return counts


def sections(rows: list[dict]) -> list[Section]:
    """Jobs without a group first (newest first), then one section per group, newest group first.

    A group lists its jobs in the order they were created, so a sweep reads in sweep order.
    """
    loose = Section(None)
    groups: dict[str, Section] = {}
    for row in rows:  # rows come newest first, so groups come in the order of their newest job
        if row.get("group"):
            groups.setdefault(row["group"], Section(row["group"])).rows.insert(0, row)
        else:
            loose.rows.append(row)
    return [loose, *groups.values()]


def home_data(query: str = "") -> dict:
    """The datasets and models tables (JSON-friendly), filtered by a search ``query``.

    Returns:
        ``{"query", "datasets": [rows], "models": [rows], "unreadable": [rows], "groups": [{"name", "datasets",
        "models", "statuses"}], "total": jobs before the search}``; each row has ``group``, ``search``
        (what the search looks in), ``sweep`` (a sweep point's values) and ``unreadable`` (``None``, or
        ``{"file", "reason"}`` when the job's ``model.json``/``dataset.json`` cannot be read) besides
        :func:`job_summary`'s keys. ``unreadable`` lists the job folders whose ``job.json`` cannot be read
        (:meth:`UnreadableJob.to_dict <digits_core.jobs.store.UnreadableJob.to_dict>` plus ``url``, the page
        that says what is wrong).
    """
    query = " ".join((query or "").split())
    found, broken = store().scan()
    # Newest first by creation time (folder names only order jobs to the second).
    jobs = sorted(found, key=lambda j: float(j.created or 0), reverse=True)
    rows: dict[str, list[dict]] = {"dataset": [], "model": []}
    for job in jobs:
        text = search_text(job)
        if query and not matches(text, query):
            continue
        problem = record_problem(job.path, job.kind)
        row = {
            **job_summary(job),
            "group": job.group,
            "sweep": job.data.get("sweep"),
            "search": text,
            "unreadable": {"file": str(problem.file), "reason": problem.reason} if problem else None,
        }
        rows.setdefault(job.kind, []).append(row)
    unreadable = [
        {**entry.to_dict(), "url": url_for("home.job_page", job_id=entry.id), "search": f"{entry.id} unreadable"}
        for entry in broken
        if not query or matches(f"{entry.id} unreadable", query)
    ]
    groups: dict[str, dict] = {}
    for kind in ("dataset", "model"):
        for row in rows[kind]:
            if row["group"]:
                entry = groups.setdefault(
                    row["group"], {"name": row["group"], "datasets": [], "models": [], "statuses": {}}
                )
                entry[kind + "s"].append(row["id"])
                entry["statuses"][row["status"]] = entry["statuses"].get(row["status"], 0) + 1
    return {
        "query": query,
        "datasets": rows["dataset"],
        "models": rows["model"],
        "unreadable": unreadable,
        "groups": list(groups.values()),
        "total": len(jobs) + len(broken),
    }


def existing_groups() -> list[str]:
    """Every group name in the jobs folder, sorted (for the forms' suggestions)."""
    return sorted({j.group for j in store().list(reap=False) if j.group}, key=str.lower)


@bp.app_context_processor
def _group_helpers() -> dict:
    def group_datalist() -> Markup:
        """``<datalist id="group-names">`` of the existing groups (the Group fields' suggestions)."""
        options = "".join(f'<option value="{escape(name)}">' for name in existing_groups())
        return Markup(f'<datalist id="group-names">{options}</datalist>')

    return {"group_datalist": group_datalist}


# -- pages -----------------------------------------------------------------------------------------


@bp.get("/")
def index() -> str:
    """The home page: datasets and models, grouped, searchable (``?q=`` hides what does not match), bulk delete."""
    query = " ".join(request.args.get("q", "").split())
    data = home_data()  # every job: the search hides rows, so the page can search again without a reload
    for row in data["datasets"] + data["models"] + data["unreadable"]:
        row["match"] = matches(row["search"], query)
    active = any(r["status"] in ("Waiting", "Running") for r in data["datasets"] + data["models"])
    shown = sum(r["match"] for r in data["datasets"] + data["models"] + data["unreadable"])
    return render_template(
        "home.html",
        active=active,
        dataset_sections=sections(data["datasets"]),
        model_sections=sections(data["models"]),
        sweep_groups=sweep_groups(web_context().jobs_dir),  # a sweep's group links to its sweep page
        shown=shown,
        **{**data, "query": query},
    )


@bp.get("/jobs/<job_id>")
def job_page(job_id: str) -> ResponseReturnValue:
    """Any job by id: a readable job's own page, or the page of a job whose ``job.json`` cannot be read."""
    problem = store().unreadable(job_id)
    if problem is None:
        job = store().get(job_id)
        return redirect(url_for(f"{job.kind}s.show", job_id=job.id))
    return _unreadable_answer(problem.id, problem.file, problem.reason, 200)


def _unreadable_answer(job_id: str | None, file, reason: str, code: int) -> ResponseReturnValue:
    """What a page or API call answers about a job record that cannot be read (file, reason, what to do)."""
    if wants_json():
        message = f"{file} cannot be read: {reason}. {FIX_HINT}"
        error = {"code": code, "title": "Unreadable job record", "message": message, "file": str(file)}
        return jsonify({"error": {**error, "reason": reason, "job_id": job_id}}), code
    return render_template("unreadable_job.html", job_id=job_id, file=str(file), reason=reason, hint=FIX_HINT), code


@bp.app_errorhandler(UnreadableRecordError)
def _unreadable(exc: UnreadableRecordError) -> ResponseReturnValue:
    """Any page that meets a damaged job record says which file and why (409), never a 500."""
    try:
        parts = exc.file.relative_to(store().root).parts
    except ValueError:
        parts = ()
    job_id = parts[0] if len(parts) > 1 and not parts[0].startswith(".") else None  # the job folder, if any
    return _unreadable_answer(job_id, exc.file, exc.reason, 409)


@bp.get("/index.json")
def index_json() -> Response:
    """The home page as JSON (``?q=`` searches as the page does)."""
    return jsonify(home_data(request.args.get("q", "")))


def describe_bulk_delete(report: dict) -> tuple[str, str]:
    """The flash message (and its category) that tells the user what a bulk delete did."""
    parts = [f"Deleted {len(report['deleted'])} job{'s' if len(report['deleted']) != 1 else ''}."]
    if report["aborted"]:
        parts.append(
            "Aborted first: "
            + ", ".join(f"{e['name'] or e['id']} (was {e['status']})" for e in report["aborted"])
            + "."
        )
    if report["refused"]:
        parts.append(
            "Not deleted: " + "; ".join(f"{e['name'] or e['id']}: {e['reason']}" for e in report["refused"]) + "."
        )
    return " ".join(parts), ("warn" if report["refused"] else "ok")


@bp.post("/jobs/delete")
def delete_selected() -> Response:
    """Delete the jobs checked on the home page (form field ``job_id``, repeated; ``abort_running``)."""
    ids = request.form.getlist("job_id")
    if not ids:
        flash("No job selected: tick the jobs to delete first.", "warn")
    else:
        report = bulk_delete(ids, abort_running=request.form.get("abort_running") in ("1", "true", "on"))
        flash(*describe_bulk_delete(report))
    return redirect(url_for("home.index", q=request.form.get("q") or None))


@bp.get("/plugins")
def plugins() -> str:
    """Every plugin discovery found (as ``digits plugins --all``)."""
    from ..plugins.registry import registry

    return render_template("plugins.html", records=[r.to_dict() for r in registry.records(include_disabled=True)])


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    """Log in with the server's auth token (only when one is configured); see :mod:`digits_core.web.login`."""
    if not current_app.config.get("DIGITS_AUTH_TOKEN"):
        return redirect(url_for("home.index"))
    error = None
    next_url = request.values.get("next", "")
    if request.method == "POST":
        right, wait = security.attempt_login(request.form.get("token"))
        if wait:
            error = f"Too many wrong tokens from your network; try again in {wait} s."
            page = render_template("login.html", error=error, next=next_url)
            return page, 429, {"Retry-After": str(wait)}
        if right:
            state = security.login_state()
            state.close_session(session.get("digits_sid"))
            session.clear()
            session["digits_sid"] = state.open_session()
            session.permanent = True
            return security.remember_client(redirect(safe_next(next_url, url_for("home.index"))))
        error = "Wrong token."
    return render_template("login.html", error=error, next=next_url), (401 if error else 200)


@bp.route("/logout", methods=["GET", "POST"])
def logout() -> ResponseReturnValue:
    """End the login session (server-side: the old cookie no longer works); POST only, CSRF-checked.

    ``GET /logout`` shows the button (a link on another site cannot log anyone out).
    """
    if request.method != "POST":
        return render_template("logout.html")
    security.login_state().close_session(session.get("digits_sid"))
    session.clear()
    return redirect(url_for("home.login"))
