"""Authentication, CSRF and safe file paths for the web UI.

* **Auth token** (optional, ``create_app(auth_token=...)`` / ``digits serve
  --auth-token``): every request needs it. API clients send
  ``Authorization: Bearer TOKEN`` (or ``X-Auth-Token: TOKEN``); browsers log
  in once at ``/login`` and keep a signed session cookie holding a
  server-side session id (:mod:`digits_core.web.login`: logout ends it,
  idle sessions expire, wrong tokens are throttled per client with 429).
* **CSRF**: every state-changing request (POST, PUT, PATCH, DELETE) needs a
  CSRF token (form field ``csrf_token`` or header ``X-CSRFToken``; get one at
  ``GET /api/csrf-token``), except requests that carry a valid auth token in
  a header: a cross-site page cannot set that header, so it cannot forge them.
  TF Serving's JSON predict (:data:`TOKEN_ONLY_ENDPOINTS`) needs no CSRF token:
  its clients send none, and a cross-site page cannot send JSON without a CORS
  preflight (refused) while the Origin check refuses a browser's cross-site POST.
* **Paths**: :func:`safe_join` refuses any path that leaves its base folder
  (``..``, absolute paths, symlinks pointing outside), after URL decoding.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from flask import abort, current_app, jsonify, redirect, request, session, url_for

from .helpers import wants_json

#: Endpoints reachable without logging in.
PUBLIC_ENDPOINTS = {"home.login", "static"}
#: JSON endpoints for clients that send no CSRF token (TF Serving's predict): the auth token and Origin check apply.
TOKEN_ONLY_ENDPOINTS = {"tf_serving.predict", "tf_serving.predict_version"}


def _header_token() -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("X-Auth-Token")


def token_matches(candidate: str | None) -> bool:
    """True when ``candidate`` equals the configured auth token (constant-time)."""
    expected = current_app.config.get("DIGITS_AUTH_TOKEN")
    return bool(expected and candidate) and hmac.compare_digest(str(candidate).encode(), str(expected).encode())


def header_authenticated() -> bool:
    """True when the request carries the right auth token in a header."""
    return token_matches(_header_token())


def login_state():
    """The app's :class:`~digits_core.web.login.LoginState`."""
    return current_app.extensions["digits"]["login"]


def client_address() -> str:
    """Who failed logins are counted against (the peer address)."""
    return request.remote_addr or "unknown"


def is_authenticated() -> bool:
    """True when no token is configured, or the request (header) or a live login session proves it."""
    if not current_app.config.get("DIGITS_AUTH_TOKEN"):
        return True
    return header_authenticated() or login_state().touch(session.get("digits_sid"))


def too_many_tries():
    """A 429 answer with ``Retry-After`` if this client must wait before trying a token again, else ``None``."""
    wait = login_state().retry_after(client_address())
    if not wait:
        return None
    response = jsonify(error=f"Too many wrong auth tokens from this address; try again in {wait} s.")
    response.status_code = 429
    response.headers["Retry-After"] = str(wait)
    return response


def _throttle_header_token():
    """Count a wrong header token as a failed login; refuse tries that come too soon (429)."""
    if not current_app.config.get("DIGITS_AUTH_TOKEN") or _header_token() is None:
        return None
    refused = too_many_tries()
    if refused is not None:
        return refused
    if header_authenticated():
        login_state().succeeded(client_address())
    else:
        login_state().failed(client_address())
    return None


def init_app(app, csrf) -> None:
    """Install the auth and CSRF checks on ``app``."""

    @app.before_request
    def _check():
        refused = _throttle_header_token()
        if refused is not None:
            return refused
        if not is_authenticated() and request.endpoint not in PUBLIC_ENDPOINTS:
            if wants_json() or request.method != "GET":
                abort(401, description="This server needs an auth token: send 'Authorization: Bearer TOKEN'.")
            return redirect(url_for("home.login", next=request.full_path if request.query_string else request.path))
        if (
            request.method in ("POST", "PUT", "PATCH", "DELETE")
            and not header_authenticated()
            and not (request.endpoint in TOKEN_ONLY_ENDPOINTS and request.is_json)
        ):
            csrf.protect()
        return None


def safe_join(base: str | os.PathLike, relative: str) -> Path:
    """Return ``base/relative`` resolved, or abort with 404 if it would leave ``base``.

    Args:
        base: The folder files may come from.
        relative: The path from the URL (already URL-decoded by the router).
    """
    base_path = Path(base).resolve()
    if not relative or "\x00" in relative or "\\" in relative:
        abort(404)
    rel = Path(relative)
    if rel.is_absolute() or any(part in ("..", "") for part in rel.parts):
        abort(404)
    target = (base_path / rel).resolve()
    try:
        target.relative_to(base_path)
    except ValueError:
        abort(404)
    return target
