"""The Flask app factory."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from datetime import timedelta

from flask import Flask, g, jsonify, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from .. import __version__
from ..config import resolve_jobs_dir
from ..errors import ConfigurationError, DigitsError, DiskFullError, JobNotFoundError, PluginNotFoundError
from ..faults import disk_error_message
from ..jobs import JobStore
from ..paths import resolve_roots
from . import request_guard, security
from .context import WebContext, request_roots_lister
from .helpers import wants_json  # noqa: F401 - also importable from here, as before
from .inference_results import DEFAULT_KEEP_RESULTS
from .login import DEFAULT_IDLE_MINUTES, LoginState, parse_networks
from .template_cache import SHARED_BYTECODE_CACHE

logger = logging.getLogger(__name__)

#: Default upload limit (bytes) for a request body.
DEFAULT_MAX_UPLOAD = 64 * 1024 * 1024

csrf = CSRFProtect()


def create_app(
    jobs_dir=None,
    auth_token: str | None = None,
    *,
    scheduler=None,
    start_scheduler: bool = True,
    max_dataset_jobs: int = 2,
    max_training_jobs: int | None = None,
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD,
    secret_key: str | None = None,
    testing: bool = False,
    inference_timeout: float = 600.0,
    allowed_hosts: Iterable[str] | None = None,
    data_roots: Iterable[str] | None = None,
    session_idle_minutes: float = DEFAULT_IDLE_MINUTES,
    keep_results: int = DEFAULT_KEEP_RESULTS,
    secure_cookies: bool = False,
    trusted_proxies: Iterable[str] = (),
) -> Flask:
    """Build the web UI.

    Args:
        jobs_dir: The jobs folder (default: ``$DIGITS_JOBS_DIR`` or ``~/.digits/jobs``).
        auth_token: When set, every page and API call needs it: a browser logs
            in once with it (``/login``), API clients send
            ``Authorization: Bearer TOKEN``.
        scheduler: A :class:`~digits_core.scheduler.Scheduler` to use (default:
            a new one over ``jobs_dir``).
        start_scheduler: Start the scheduler thread now (recovering jobs left
            Running by a previous server).
        max_dataset_jobs: Dataset jobs that run at once.
        max_training_jobs: Training jobs that run at once (default: one per
            GPU, one on a CPU-only machine).
        max_upload_bytes: Largest accepted request body (HTTP 413 beyond).
        secret_key: Signs the session cookie (default: random per process).
        testing: Flask testing mode.
        inference_timeout: Seconds an inference request may take in the app's
            long-lived inference worker (config ``DIGITS_INFERENCE_TIMEOUT``)
            before the worker is killed, restarted and the request fails.
        allowed_hosts: The ``Host`` names the server answers to (default:
            ``localhost``, ``127.0.0.1``, ``[::1]``; see
            :func:`~digits_core.web.request_guard.allowed_hosts`); any other
            Host gets 400 (DNS rebinding).
        data_roots: Folders whose files the UI and API may read (dataset
            folders and lists, inference inputs, plugin path fields; symlinks
            resolved); default: the current folder. The jobs folder always is
            one (inference uploads are saved there). See
            :mod:`digits_core.paths`.
        session_idle_minutes: A login session unused this long expires (see
            :mod:`digits_core.web.login`).
        keep_results: Stored inference results each model keeps (config
            ``DIGITS_KEEP_RESULTS``): storing one more deletes the oldest
            beyond it; 0 keeps them all.
        secure_cookies: Mark the login cookies ``Secure`` on every response
            (they are anyway on requests that came over HTTPS).
        trusted_proxies: Addresses or networks of reverse proxies whose
            ``X-Forwarded-For`` / ``X-Forwarded-Proto`` are believed (login
            throttling, ``Secure`` cookies); see :mod:`digits_core.web.security`.

    Returns:
        The Flask app; ``app.extensions["digits"]`` is its
        :class:`~digits_core.web.context.WebContext` (read it with
        :func:`~digits_core.web.context.web_context`): ``jobs_dir``,
        ``store``, ``scheduler`` and ``inference_worker`` (an
        :class:`~digits_core.web.inference_worker.InferenceWorker` whose
        process starts on the first inference request).
    """
    from ..scheduler import Scheduler

    root = resolve_jobs_dir(jobs_dir)
    try:
        proxies = parse_networks(trusted_proxies)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    app = Flask(__name__, static_folder="static", template_folder="templates")
    app.jinja_options = {**app.jinja_options, "bytecode_cache": SHARED_BYTECODE_CACHE}  # before jinja_env is made
    app.config.update(
        SECRET_KEY=secret_key or secrets.token_hex(32),
        MAX_CONTENT_LENGTH=max_upload_bytes,
        WTF_CSRF_CHECK_DEFAULT=False,
        WTF_CSRF_TIME_LIMIT=None,
        TESTING=testing,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_HTTPONLY=True,
        PERMANENT_SESSION_LIFETIME=timedelta(minutes=float(session_idle_minutes)),
        DIGITS_AUTH_TOKEN=auth_token or None,
        DIGITS_INFERENCE_TIMEOUT=float(inference_timeout),
        DIGITS_DATA_ROOTS=[str(r) for r in resolve_roots(data_roots, root)],
        DIGITS_KEEP_RESULTS=int(keep_results),
        DIGITS_SECURE_COOKIES=bool(secure_cookies),
        DIGITS_TRUSTED_PROXIES=proxies,
    )
    app.session_interface = security.SessionInterface()
    app.jinja_env.autoescape = True
    csrf.init_app(app)
    if scheduler is None:
        scheduler = Scheduler(root, max_dataset_jobs=max_dataset_jobs, max_training_jobs=max_training_jobs)
    from .inference_worker import InferenceWorker

    app.extensions["digits"] = WebContext(
        jobs_dir=root,
        store=JobStore(root),
        scheduler=scheduler,
        inference_worker=InferenceWorker(inference_timeout),
        login=LoginState(float(session_idle_minutes) * 60),
    )
    if start_scheduler:
        scheduler.start()

    request_guard.init_app(app, allowed_hosts)  # first: a forged Host is refused before anything else
    from . import accounts_oidc, accounts_views  # user accounts: sign-in and the one gate, before the token checks

    accounts_views.init_app(app)
    accounts_oidc.init_app(app)  # single sign-on's routes (and its client when oidc.json exists)
    security.init_app(app, csrf)
    _confine_requests(app)

    from . import (
        api,
        datasets_views,
        home,
        inference_results,
        inference_views,
        models_views,
        network_views,
        plugin_static,
        tf_serving,
        top_n_views,
        tune_views,
        zoo_views,
    )

    for module in (
        home,
        datasets_views,
        models_views,
        inference_views,
        inference_results,
        network_views,
        top_n_views,
        plugin_static,
        tune_views,
        zoo_views,
        api,
        tf_serving,
    ):
        app.register_blueprint(module.bp)
    from .export_views import bp as export_bp  # the model page's Export panel

    app.register_blueprint(export_bp)
    from .evaluation_views import bp as evaluation_bp  # evaluations: the Evaluate panel, reports, leaderboard

    app.register_blueprint(evaluation_bp)
    from .review_views import bp as review_bp  # active learning: the review page and its queue (issue 46)

    app.register_blueprint(review_bp)
    from .labeling_api import bp as pools_bp  # active learning: pools, their queue, scoring and rounds (issue 46)

    app.register_blueprint(pools_bp)

    _register_errors(app)
    _register_template_helpers(app)

    from ..plugins.registry import registry

    registry.check_templates()  # the server renders plugin templates: a broken one is listed failed from the start
    try:
        registry.call_hook("digits_register_routes", app=app)
    except Exception:  # noqa: BLE001 - a hook plugin must not take the UI down
        logger.exception("a digits_register_routes hook failed")
    return app


def _confine_requests(app: Flask) -> None:
    """Every request handler runs confined to the data roots (:func:`digits_core.paths.check_server_path`)."""
    from .. import paths

    @app.before_request
    def _enter():
        # after the accounts gate (it names the user); the jobs the user may read are listed on the first path checked
        g.data_roots = paths.confined_to(request_roots_lister())
        g.data_roots.__enter__()

    @app.teardown_request
    def _leave(_exc=None):
        confinement = g.pop("data_roots", None)
        if confinement is not None:
            confinement.__exit__(None, None, None)


def _register_template_helpers(app: Flask) -> None:
    from . import helpers

    app.jinja_env.filters.update(
        datetime=helpers.format_time,
        size=helpers.format_size,
        duration=helpers.format_duration,
        shape=helpers.format_shape,
    )

    @app.context_processor
    def _globals():
        return {
            "digits_version": __version__,
            "status_class": helpers.status_class,
            "new_dataset_menu": helpers.new_dataset_menu,
            "auth_enabled": bool(app.config["DIGITS_AUTH_TOKEN"]),
        }


def _error_payload(code: int, title: str, message: str):
    if wants_json():
        return jsonify({"error": {"code": code, "title": title, "message": message}}), code
    return render_template("error.html", code=code, title=title, message=message), code


def _register_errors(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def _csrf(exc):
        return _error_payload(
            400, "Bad request", f"CSRF check failed: {exc.description} Reload the page and try again."
        )

    @app.errorhandler(JobNotFoundError)
    def _not_found(exc):
        return _error_payload(404, "Not found", str(exc))

    @app.errorhandler(PluginNotFoundError)
    def _no_plugin(exc):
        return _error_payload(404, "Not found", str(exc))

    @app.errorhandler(DigitsError)
    def _digits(exc):
        return _error_payload(400, "Cannot do that", str(exc))

    @app.errorhandler(DiskFullError)
    def _disk_full(exc):
        return _error_payload(507, "Insufficient storage", str(exc))

    @app.errorhandler(HTTPException)
    def _http(exc):
        return _error_payload(exc.code or 500, exc.name, exc.description or "")

    @app.errorhandler(Exception)
    def _internal(exc):
        full = disk_error_message(
            exc, app.extensions["digits"].jobs_dir, action="The server could not save this", again="try again"
        )
        if full is not None:  # a write path without its own handling: still a 507 that says the disk is full, and where
            logger.warning("%s %s: %s", request.method, request.path, full)
            return _error_payload(507, "Insufficient storage", full)
        logger.exception("internal error on %s", request.path)
        return _error_payload(
            500, "Internal error", "Something went wrong on the server; the details are in the server log."
        )
