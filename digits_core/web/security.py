"""Authentication, CSRF and safe file paths for the web UI.

* **Auth token** (optional, ``create_app(auth_token=...)`` / ``digits serve
  --auth-token``): every request needs it. API clients send
  ``Authorization: Bearer TOKEN`` (or ``X-Auth-Token: TOKEN``); browsers log
  in once at ``/login`` and keep a signed session cookie holding a
  server-side session id (:mod:`digits_core.web.login`: logout ends it,
  idle sessions expire, wrong tokens are throttled per network and per
  known client with 429, never locking out a client that used the right
  token before: the answer to a right token carries a signed
  ``digits_client`` cookie naming it).
* **Cookies** are ``HttpOnly`` and ``SameSite=Lax``, and ``Secure`` with
  ``digits serve --secure-cookies``, for a request that came over HTTPS,
  or one a trusted proxy (``--trusted-proxy``) says came over HTTPS
  (``X-Forwarded-Proto: https``). Logout is a POST (CSRF-checked); ``GET
  /logout`` only shows its button.
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
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from flask import abort, current_app, g, has_request_context, jsonify, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature, URLSafeTimedSerializer

from .helpers import wants_json
from .login import client_network, forwarded_client, in_networks

if TYPE_CHECKING:
    from flask import Flask
    from flask.typing import ResponseReturnValue
    from flask_wtf.csrf import CSRFProtect
    from werkzeug.wrappers import Response

    from .login import LoginState

#: Endpoints reachable without logging in.
PUBLIC_ENDPOINTS = {"home.login", "accounts.login", "accounts_oidc.start", "accounts_oidc.callback", "static"}
#: The cookie naming a browser that has logged in before (its own throttling source).
CLIENT_COOKIE = "digits_client"
#: Days a browser stays known after its last login.
CLIENT_COOKIE_DAYS = 30
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
    """True when the request carries the right auth token, or a user's live API token, in a header."""
    return bool(g.get("digits_bearer")) or token_matches(_header_token())


def login_state() -> LoginState:
    """The app's :class:`~digits_core.web.login.LoginState`."""
    return current_app.extensions["digits"]["login"]


def client_address() -> str:
    """The client's address: the peer, or what a trusted proxy (``--trusted-proxy``) forwarded for."""
    peer = request.remote_addr or "unknown"
    return forwarded_client(
        peer, request.headers.get("X-Forwarded-For"), current_app.config.get("DIGITS_TRUSTED_PROXIES", ())
    )


def _client_signer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.secret_key or "", salt="digits-known-client")


def throttle_source() -> str:
    """Who failed logins are counted against: this known browser (``client:ID``), else its network."""
    cookie = request.cookies.get(CLIENT_COOKIE)
    if cookie:
        try:
            return f"client:{_client_signer().loads(cookie, max_age=CLIENT_COOKIE_DAYS * 86400)}"
        except BadSignature:  # forged or expired (SignatureExpired is one): counted by network
            pass
    return client_network(client_address())


def attempt_login(candidate: str | None) -> tuple[bool, int]:
    """One try of a token: ``(right, 0)``, or ``(False, seconds)`` when refused uncompared (429).

    A right token clears only a known browser's own count; a wrong one
    counts against this request's source and the server's token.
    """
    state, source = login_state(), throttle_source()
    wait = state.retry_after(source)
    if wait:
        return False, wait
    if token_matches(candidate):
        state.succeeded(source)
        g.digits_remember_client = True  # its own source from now on: the cookie goes out with this answer
        return True, 0
    state.failed(source)
    return False, 0


def remember_client(response: Response) -> Response:
    """Mark this client known (its own throttling source) on ``response`` after a right token; returns it.

    Set once per request (by the login page, or after any request with a right
    header token): a browser, or a script that keeps cookies, then counts on its own.
    """
    if g.get("digits_client_set"):
        return response
    g.digits_client_set = True
    source = throttle_source()
    ident = source[len("client:") :] if source.startswith("client:") else secrets.token_urlsafe(16)
    response.set_cookie(
        CLIENT_COOKIE,
        _client_signer().dumps(ident),
        max_age=CLIENT_COOKIE_DAYS * 86400,
        httponly=True,
        samesite="Lax",
        secure=cookies_secure(),
    )
    return response


def request_is_https() -> bool:
    """True when this request came over HTTPS (to this server, or to a trusted proxy that says so)."""
    if request.scheme == "https":
        return True
    trusted = current_app.config.get("DIGITS_TRUSTED_PROXIES", ())
    if not trusted or not in_networks(request.remote_addr or "", trusted):
        return False
    proto = request.headers.get("X-Forwarded-Proto", "").split(",")[-1].strip().lower()
    return proto == "https"


def cookies_secure() -> bool:
    """Whether cookies set now get ``Secure`` (``--secure-cookies``, or this request came over HTTPS)."""
    if current_app.config.get("DIGITS_SECURE_COOKIES"):
        return True
    return has_request_context() and request_is_https()


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, ``Secure`` when :func:`cookies_secure` says so."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return cookies_secure()


def is_authenticated() -> bool:
    """True when no token is configured, or the request (header) or a live login session proves it."""
    if not current_app.config.get("DIGITS_AUTH_TOKEN") or g.get("digits_user") is not None:  # accounts_views
        return True
    return header_authenticated() or login_state().touch(session.get("digits_sid"))


def too_many_tries(wait: int) -> Response:
    """The 429 answer with ``Retry-After`` for a try refused ``wait`` seconds too early."""
    response = jsonify(error=f"Too many wrong auth tokens from your network; try again in {wait} s.")
    response.status_code = 429
    response.headers["Retry-After"] = str(wait)
    return response


def _throttle_header_token() -> Response | None:
    """Check a header token as one login try; refuse tries that come too soon (429)."""
    if not current_app.config.get("DIGITS_AUTH_TOKEN") or _header_token() is None or "digits_bearer" in g:
        return None  # none to check, or accounts_views checked it already
    _, wait = attempt_login(_header_token())
    return too_many_tries(wait) if wait else None


def init_app(app: Flask, csrf: CSRFProtect) -> None:
    """Install the auth and CSRF checks on ``app``."""

    @app.after_request
    def _remember_client(response: Response) -> Response:
        return remember_client(response) if g.get("digits_remember_client") else response

    @app.before_request
    def _check() -> ResponseReturnValue | None:
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
