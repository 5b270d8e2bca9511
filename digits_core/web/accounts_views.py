"""User accounts on the web: sign-in with a name and password, per-user API tokens, and one authorisation gate.

Active only when the jobs folder has users (``digits users add``); without
them nothing here runs and the server behaves as before. With them:

* every request is signed in (a login session from ``/account/login``, an
  ``Authorization: Bearer dgt_...`` token of a user, or the server's own
  ``--auth-token``, which acts as an admin), or it is refused;
* a ``before_request`` hook looks the request's endpoint up in
  :data:`RULES` (action, and where the targeted job's id is), loads that
  job's owner, and asks :func:`digits_core.accounts.authorize`; an endpoint
  without a rule is refused, so a new route must be given one
  (``tests/test_accounts_matrix.py`` walks the whole URL map);
* jobs created in an allowed request belong to its user
  (:data:`digits_core.submit.records.job_owner`);
* decisions that change something, every refusal and every sign-in go to the audit log.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from flask import (
    Blueprint,
    abort,
    current_app,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)

from ..accounts import AccountStore, JobAccess, User, authorize, narrow_roots
from ..accounts.audit import AuditLog
from ..errors import DigitsError, JobNotFoundError
from ..submit.records import job_owner
from . import security
from .access_targets import AccountJobStore, request_target
from .context import web_context
from .helpers import wants_json
from .login import safe_next

logger = logging.getLogger(__name__)

bp = Blueprint("accounts", __name__)

_R, _V, _C, _M, _A = "read", "review", "create", "manage", "admin"
#: endpoint -> (action, where the job is): ``"job_id"``/``"name"`` (any URL part's name), ``"param:KEY"`` a form or
#: JSON field, ``"sweep:ARG"`` a URL part naming a sweep, ``"jobs:KEY"`` a query argument listing job ids (all must be
#: readable), ``None`` no job. ``"public"`` needs no sign-in. Every endpoint of the app must be here.
RULES: dict[str, tuple[str, str | None]] = {
    "static": ("public", None),
    "home.login": ("public", None),
    "accounts.login": ("public", None),
    "accounts_oidc.start": ("public", None),
    "accounts_oidc.callback": ("public", None),
    **dict.fromkeys(
        (
            "accounts.logout",
            "accounts.tokens",
            "api.csrf_token",
            "api.jobs",
            "api.lr_preview",
            "api.networks",
            "api.plugins",
            "api.scheduler_status",
            "evaluations.leaderboard_json",
            "evaluations.leaderboard_page",
            "home.index",
            "home.index_json",
            "home.logout",
            "home.plugins",
            "network.form_network",
            "plugin_static.data_static",
            "plugin_static.extension_static",
            "plugin_static.view_static",
            "sweeps.index",
            "zoo.index",
        ),
        (_R, None),
    ),
    **dict.fromkeys(
        (
            "api.infer",
            "datasets.explore",
            "datasets.mean_image",
            "datasets.show",
            "evaluations.download",
            "evaluations.show",
            "evaluations.show_json",
            "exports.download",
            "home.job_page",
            "inference.infer",
            "inference.view_config",
            "inference_results.download",
            "inference_results.show",
            "models.download",
            "models.metrics",
            "models.show",
            "network.job_network",
            "top_n.top_n",
        ),
        (_R, "job_id"),
    ),
    **dict.fromkeys(
        ("tf_serving.predict", "tf_serving.predict_version", "tf_serving.status", "tf_serving.status_version"),
        (_R, "name"),
    ),
    "sweeps.show": (_R, "sweep:sweep_id"),  # a sweep's sweep.json names its owner (its trials are that user's)
    "sweeps.compare": (_R, "jobs:jobs"),  # ?jobs=A,B: every one must be readable
    **dict.fromkeys(("sweeps.abort", "sweeps.resume", "sweeps.promote"), (_M, "sweep:sweep_id")),
    "api.create_dataset": (_C, None),
    "datasets.new": (_C, None),
    "api.create_model": (_C, "param:dataset"),
    "models.new": (_C, "param:dataset"),
    "sweeps.create_sweep": (_C, "param:dataset"),
    "evaluations.create": (_C, "param:model"),
    "evaluations.create_from_panel": (_C, "job_id"),
    "exports.export": (_C, "job_id"),
    "review.image": (_R, "job_id"),  # active learning (issue 46): reviewing is the "review" action
    **dict.fromkeys(("review.page", "review.next_candidate", "review.decide"), (_V, "job_id")),
    **dict.fromkeys(("pools.list_json", "pools.index"), (_R, None)),  # active learning pools (issue 46)
    **dict.fromkeys(("pools.create", "pools.new"), (_C, None)),  # the API and the New pool form
    **dict.fromkeys(("pools.show", "pools.show_json", "pools.queue", "pools.file"), (_R, "job_id")),
    **dict.fromkeys(("pools.start_run", "pools.run_form", "pools.resume"), (_M, "job_id")),  # API and page form
    **dict.fromkeys(
        (
            "api.abort",
            "api.delete",
            "api.resume",
            "datasets.abort_job",
            "datasets.delete",
            "datasets.notes",
            "inference_results.delete",
            "models.abort_job",
            "models.delete",
            "models.notes",
            "models.resume",
            "accounts.visibility",
        ),
        (_M, "job_id"),
    ),
    # job ids in the body: admins only while accounts are on
    **dict.fromkeys(
        (
            "api.delete_many",
            "home.delete_selected",
            "accounts.audit",
            "accounts.admin",
        ),
        (_A, None),
    ),
}


class Accounts:
    """An app's accounts: the store, the audit log and which login session is whose."""

    def __init__(self, jobs_dir):
        self.store = AccountStore(jobs_dir)
        self.audit = AuditLog(jobs_dir)
        self.session_users: dict[str, str] = {}

    def start_session(self, user: User) -> None:
        """Sign ``user`` in on this browser: a new server-side session (password and single sign-on alike)."""
        sid = security.login_state().open_session()
        self.session_users[sid] = user.name
        session["digits_account_sid"] = sid
        g.digits_remember_client = True


def accounts() -> Accounts:
    """The running app's :class:`Accounts`."""
    return current_app.extensions["digits_accounts"]


def current_user() -> User | None:
    """The signed-in user of this request (``None`` without accounts or before the gate ran)."""
    return g.get("digits_user")


def _audit(action: str, obj: str | None, allowed: bool, user: User | None = None) -> None:
    who = user or current_user()
    accounts().audit.record(
        who.name if who else None,
        action,
        obj,
        allowed=allowed,
        address=security.client_address(),
        endpoint=request.endpoint,
    )


def _bearer() -> str | None:
    auth = request.headers.get("Authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else None


def _signed_in() -> User | None:
    acc, state = accounts(), security.login_state()
    token = _bearer()
    if token and token.startswith("dgt_"):
        source = security.throttle_source()
        g.digits_retry_after = state.retry_after(source)
        if g.digits_retry_after:
            return None
        user = acc.store.token_user(token)
        if user is None:
            state.failed(source)
        g.digits_bearer = user is not None
        return user
    if current_app.config.get("DIGITS_AUTH_TOKEN") and (token or request.headers.get("X-Auth-Token")):
        right, g.digits_retry_after = security.attempt_login(token or request.headers.get("X-Auth-Token"))
        g.digits_bearer = right
        return User("operator", "admin") if right else None  # the server's own --auth-token: who runs the server
    if current_app.config.get("DIGITS_AUTH_TOKEN") and state.touch(session.get("digits_sid")):
        return User("operator", "admin")
    sid = session.get("digits_account_sid")
    name = acc.session_users.get(sid) if isinstance(sid, str) else None
    if name is None:
        return None
    if not state.touch(sid):
        acc.session_users.pop(str(sid), None)  # expired: forget whose it was
        return None
    user = acc.store.get_user(name)
    return None if user is None or user.disabled else user


def _gate():
    acc = accounts()
    if not acc.store.enabled() and not current_app.extensions.get("digits_oidc"):
        return None  # no accounts: today's behaviour (security.py's token or loopback)
    rule = RULES.get(request.endpoint or "")
    user = _signed_in()
    g.digits_user = user
    if rule is not None and rule[0] == "public":
        return None
    if user is None:
        if g.get("digits_retry_after"):  # too many wrong tokens from this client: refused uncompared
            return security.too_many_tries(g.digits_retry_after)
        if _bearer():
            _audit("sign-in", None, False)
        if wants_json() or request.method != "GET":
            abort(401, description="Sign in first: send 'Authorization: Bearer TOKEN' with a user's API token.")
        return redirect(url_for("accounts.login", next=request.full_path if request.query_string else request.path))
    if rule is None:
        logger.error("no access rule for endpoint %s: refused (add it to accounts_views.RULES)", request.endpoint)
        _audit("unknown", None, False)
        abort(403, description="This page has no access rule yet; an admin must add one.")
    action, where = rule
    obj_id, obj = request_target(where, user)
    allowed = authorize(user, action, obj)
    if not allowed or request.method not in ("GET", "HEAD"):
        _audit(action, obj_id, allowed)
    if not allowed:
        if obj is not None and not authorize(user, "read", obj):
            # someone else's private job: answered as a job that does not exist, word for word
            missing = f'Job "{g.get("digits_target_text")}" does not exist in {web_context().store.root}.'
            raise JobNotFoundError(g.get("digits_missing") or missing)
        abort(403, description=f"Your role ({user.role}) may not {action} here.")
    if action == _C:
        g.digits_owner_token = job_owner.set(user.name)
    if user.role != "admin":
        given = acc.store.roots_of(user)
        if given:  # roots of its own (or its groups'): inside the server's, which stay the outer bound
            jobs_dir = os.path.realpath(web_context().jobs_dir)
            g.digits_data_roots = narrow_roots(current_app.config["DIGITS_DATA_ROOTS"], given, keep=[jobs_dir])
    return None


def init_app(app) -> None:
    """Install the accounts gate (before :func:`digits_core.web.security.init_app`) and pages on ``app``."""
    context = app.extensions["digits"]
    app.extensions["digits_accounts"] = Accounts(context.jobs_dir)
    context.store = AccountJobStore(context.jobs_dir)
    app.before_request(_gate)

    @app.teardown_request
    def _forget_owner(_exc=None):
        token = g.pop("digits_owner_token", None)
        if token is not None:
            job_owner.reset(token)

    @app.context_processor
    def _user():
        return {"current_user": g.get("digits_user")}

    app.register_blueprint(bp)


@bp.route("/account/login", methods=["GET", "POST"])
def login():
    """Sign in with a user name and password (throttled per account and per client, as the token login is)."""
    acc, state = accounts(), security.login_state()
    target = safe_next(request.values.get("next"), url_for("home.index"))
    error, status = None, 200
    if request.method == "POST":
        name = request.form.get("name", "").strip()
        source, account = security.throttle_source(), f"user:{name}"
        wait = max(state.retry_after(source, account), state.retry_after(f"account:{name}", account))
        if wait:
            _audit("sign-in", name, False, User(name, "unknown"))
            return security.too_many_tries(wait)
        user = acc.store.verify_password(name, request.form.get("password", ""))
        if user is None:
            state.failed(source, account)
            state.failed(f"account:{name}", account)  # one account's own count, whatever the address
            _audit("sign-in", name, False, User(name, "unknown"))
            error, status = "Wrong name or password.", 401
        else:
            state.succeeded(source)
            acc.start_session(user)
            _audit("sign-in", name, True, user)
            return redirect(target)
    oidc = bool(current_app.extensions.get("digits_oidc"))
    return render_template("account_login.html", next=target, error=error, oidc=oidc), status


@bp.route("/account/logout", methods=["GET", "POST"])
def logout():
    """``GET`` shows the button; ``POST`` (CSRF-checked) ends the session for good."""
    if request.method == "POST":
        sid = session.pop("digits_account_sid", None)
        security.login_state().close_session(sid)
        accounts().session_users.pop(sid, None) if isinstance(sid, str) else None
        _audit("sign-out", None, True)
        return redirect(url_for("accounts.login"))
    return render_template("account_logout.html")


@bp.route("/account/tokens", methods=["GET", "POST"])
def tokens():
    """The signed-in user's API tokens: list, create (shown once) and revoke."""
    user, store = current_user(), accounts().store
    if user is None or user.name == "operator":
        abort(404)
    new_token: str | None = None
    error = None
    if request.method == "POST":
        try:
            if request.form.get("revoke"):
                store.revoke_token(user.name, request.form["revoke"])
            else:
                days = float(request.form.get("days") or 90)
                new_token = store.create_token(user.name, request.form.get("token_name", "").strip(), days=days)
        except (ValueError, DigitsError) as exc:  # a user's mistake: said on the page
            error = str(exc)
    listed: list[Any] = store.list_tokens(user.name)
    if wants_json():
        return jsonify(token=new_token, tokens=[t.__dict__ for t in listed], error=error)
    return render_template("account_tokens.html", tokens=listed, new_token=new_token, error=error)


@bp.post("/api/jobs/<job_id>/visibility")
def visibility(job_id: str):
    """Share a job (its owner or an admin): ``{"visibility": "public" | "private", "share": GROUP, "unshare": GROUP}``.

    ``public``: every account may read it; ``share``: the members of that group may; ``private``: neither
    (public no more, shared with no group). Answers the job's sharing as JSON, or goes back to the job's page.
    """
    body = request.get_json(silent=True)
    fields = body if isinstance(body, dict) else request.form
    wanted, share, unshare = (fields.get(k) or None for k in ("visibility", "share", "unshare"))
    if wanted not in (None, "public", "private") or not (wanted or share or unshare):
        abort(400, description='Give "visibility": "public" or "private", or "share" / "unshare": a group name.')
    if share and not (isinstance(share, str) and accounts().store.group_exists(share.strip())):
        abort(400, description=f'share: no group "{share}"; an admin makes it with "digits users group add".')
    job = web_context().store.get(job_id)
    groups = [gr for gr in JobAccess.of(dict(job.data)).groups if gr != unshare and wanted != "private"]
    if share:
        groups = list(dict.fromkeys([*groups, share.strip()]))
    if wanted == "public":
        job.update(visibility="public")
    elif wanted == "private":
        job.forget("visibility")
    job.update(shared_with=groups) if groups else job.forget("shared_with")
    access = JobAccess.of(dict(job.data))
    if request.form.get("csrf_token") and not request.is_json:  # the job page's form: back to the page
        return redirect(url_for("home.job_page", job_id=job.id))
    return jsonify(id=job.id, visibility="public" if access.public else "private", groups=list(access.groups))


@bp.get("/admin/accounts")
def admin():
    """Users, groups and the data roots given to them (admins; changed with ``digits users``)."""
    store = accounts().store
    users, groups, roots = store.list_users(), store.list_groups(), store.list_roots()
    if wants_json():
        return jsonify(
            users=[{"name": u.name, "role": u.role, "disabled": u.disabled, "groups": list(u.groups)} for u in users],
            groups=groups,
            roots=[{"kind": k, "name": n, "path": p} for k, n, p in roots],
        )
    server_roots = current_app.config["DIGITS_DATA_ROOTS"]
    return render_template("account_admin.html", users=users, groups=groups, roots=roots, server_roots=server_roots)


@bp.get("/admin/audit")
def audit():
    """The last entries of the audit log (admins)."""
    entries = accounts().audit.tail(500)
    if wants_json():
        return jsonify(entries=entries)
    return render_template("account_audit.html", entries=entries)
