"""Home page, login and plugins page."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, redirect, render_template, request, session, url_for

from . import security
from .helpers import job_summary

bp = Blueprint("home", __name__)


def store():
    """The app's :class:`~digits_core.jobs.JobStore`."""
    return current_app.extensions["digits"]["store"]


def scheduler():
    """The app's :class:`~digits_core.scheduler.Scheduler`."""
    return current_app.extensions["digits"]["scheduler"]


def home_data() -> dict:
    """The datasets and models tables (JSON-friendly)."""
    jobs = store().list()
    return {
        "datasets": [job_summary(j) for j in jobs if j.kind == "dataset"],
        "models": [job_summary(j) for j in jobs if j.kind == "model"],
    }


@bp.get("/")
def index():
    """The home page: datasets and models."""
    data = home_data()
    active = any(r["status"] in ("Waiting", "Running") for r in data["datasets"] + data["models"])
    return render_template("home.html", active=active, **data)


@bp.get("/index.json")
def index_json():
    """The home page as JSON."""
    return jsonify(home_data())


@bp.get("/plugins")
def plugins():
    """Every plugin discovery found (as ``digits plugins --all``)."""
    from ..plugin_registry import registry

    return render_template("plugins.html", records=[r.to_dict() for r in registry.records(include_disabled=True)])


def _safe_next(target: str | None) -> str:
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return url_for("home.index")
    return target


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Log in with the server's auth token (only when one is configured)."""
    if not current_app.config.get("DIGITS_AUTH_TOKEN"):
        return redirect(url_for("home.index"))
    error = None
    next_url = request.values.get("next", "")
    if request.method == "POST":
        if security.token_matches(request.form.get("token")):
            session.clear()
            session["digits_auth"] = True
            session.permanent = True
            return redirect(_safe_next(next_url))
        error = "Wrong token."
    return render_template("login.html", error=error, next=next_url), (401 if error else 200)


@bp.get("/logout")
def logout():
    """Forget the login."""
    session.clear()
    return redirect(url_for("home.login"))
