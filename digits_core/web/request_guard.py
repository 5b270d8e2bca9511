"""Who may talk to the server: Host names, request origins and the browser's security headers.

* **Host** (against DNS rebinding): a request is answered only if its
  ``Host`` header names this server: ``localhost``, ``127.0.0.1`` or
  ``[::1]``, the address it was bound to (when that is a specific address),
  and the names given with ``digits serve --allowed-host NAME``. A page on
  ``evil.example`` whose name re-resolves to 127.0.0.1 therefore gets 400,
  whatever it asks.
* **Origin**: a state-changing request (POST, PUT, PATCH, DELETE) sent by a
  browser must come from a page of this server: its ``Origin`` header (or,
  without one, its ``Referer``) must name the same host and port as its
  ``Host``. Clients that send neither (curl, scripts) are not browsers and
  are left to the CSRF and auth-token checks.
* **Sizes**, per route: an upload to a route that takes files
  (:data:`UPLOAD_ENDPOINTS`: the New Dataset forms, Test-the-model) may carry
  the server's upload limit (``--max-upload-mb``) in at most
  :data:`MAX_UPLOAD_PARTS` parts; a JSON API request (``/api/...``,
  ``/v1/...`` or a JSON body) at most :data:`MAX_JSON_BYTES`; any other form
  (URL-encoded, or multipart to a route that takes no file) at most
  :data:`MAX_FORM_BYTES`. Larger ones get 413, naming the limit, before the
  body is read.
* **Headers** on every response: a Content-Security-Policy allowing only
  this server's scripts (inline ``<script>`` blocks carry the per-response
  nonce from the ``csp_nonce()`` template global), ``X-Frame-Options: DENY``,
  ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, abort, current_app, g, request

#: Host names every server answers to.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: Addresses that mean "every interface" (they name no host a browser would use).
WILDCARD_ADDRESSES = {"0.0.0.0", "::", "[::]", ""}
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
#: Largest body of a JSON API request.
MAX_JSON_BYTES = 2 * 1024 * 1024
#: Largest body of a form that uploads no file (URL-encoded, or multipart to a route that takes no file).
MAX_FORM_BYTES = 1024 * 1024
#: The largest body of a request that uploads no file (the JSON limit; kept for callers of the old name).
MAX_BODY_BYTES = MAX_JSON_BYTES
#: Endpoints that take uploaded files (multipart up to ``--max-upload-mb``); a plugin route adds its endpoint
#: to ``app.config["DIGITS_UPLOAD_ENDPOINTS"]``.
UPLOAD_ENDPOINTS = frozenset({"datasets.new", "inference.infer"})
#: Most parts (uploaded files plus form fields) of one multipart request.
MAX_UPLOAD_PARTS = 500


def normalize_host(name: str) -> str:
    """Lower-case a host name, drop a trailing dot and put an IPv6 address in brackets (no port)."""
    name = name.strip().lower().rstrip(".")
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return name


def split_host(value: str) -> tuple[str, str]:
    """Split a ``Host`` header (``name``, ``name:port``, ``[v6]:port``) into (normalized name, port)."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return "", ""
        name, rest = value[: end + 1], value[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        name, _, port = value.partition(":")
    return normalize_host(name), port


def allowed_hosts(bind_host: str | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The Host names a server bound to ``bind_host`` answers to.

    Args:
        bind_host: The address given to ``--host`` (a specific address is
            added; a wildcard such as ``0.0.0.0`` adds nothing).
        extra: Names from ``--allowed-host``.
    """
    names = list(LOOPBACK_HOSTS)
    if bind_host and bind_host not in WILDCARD_ADDRESSES:
        names.append(normalize_host(bind_host))
    names.extend(normalize_host(n) for n in extra if n and n.strip())
    return list(dict.fromkeys(names))


def csp_nonce() -> str:
    """The nonce of this response's Content-Security-Policy (for inline ``<script nonce=...>``)."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(16)
    return g.csp_nonce


def content_security_policy(nonce: str) -> str:
    """The CSP header value: scripts and styles from this server only (plus nonce'd inline scripts)."""
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' 'nonce-{nonce}'",
            # Inline style="" attributes (progress bars, palette swatches) are harmless; scripts are not.
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def _origin_of_request() -> tuple[str, str] | None:
    """(host, port) the browser says the request came from, or None if it said nothing."""
    origin = request.headers.get("Origin")
    if origin is None:
        referer = request.headers.get("Referer")
        if not referer:
            return None
        origin = referer
    if origin.strip() == "null":
        return ("null", "")
    parts = urlsplit(origin.strip())
    if not parts.hostname:
        return ("null", "")
    port = str(parts.port) if parts.port else {"http": "80", "https": "443"}.get(parts.scheme, "")
    return normalize_host(parts.hostname), port


def cross_site_request() -> bool:
    """True when a browser sent this request from another site's page (``Sec-Fetch-Site``, else Origin/Referer).

    For GET routes that do costly work on their first call (an export): a
    link on another site must not make the server do it. Clients that send
    none of these headers (curl, scripts) are not browsers.
    """
    fetch_site = request.headers.get("Sec-Fetch-Site", "").strip().lower()
    if fetch_site:
        return fetch_site in ("cross-site", "same-site")
    origin = _origin_of_request()
    name, port = split_host(request.host or "")
    return origin is not None and origin != (name, _request_port(port))


def body_limit() -> tuple[int, str]:
    """The largest body this request's route accepts, and what kind of request that limit is for (see above)."""
    configured = current_app.config.get("MAX_CONTENT_LENGTH") or MAX_JSON_BYTES
    uploads = UPLOAD_ENDPOINTS | set(current_app.config.get("DIGITS_UPLOAD_ENDPOINTS", ()))
    if request.mimetype == "multipart/form-data" and request.endpoint in uploads:
        return configured, "an upload (digits serve --max-upload-mb)"
    if request.is_json or request.path.startswith(("/api/", "/v1/")):
        return min(MAX_JSON_BYTES, configured), "a JSON API request"
    return min(MAX_FORM_BYTES, configured), "a form that uploads no file"


def _request_port(port: str) -> str:
    return port or ("443" if request.scheme == "https" else "80")


def init_app(app: Flask, hosts: Iterable[str] | None = None) -> None:
    """Install the Host and Origin checks and the security headers on ``app``.

    Must run before the auth and CSRF checks are installed, so a forged
    Host is refused before anything else looks at the request.

    Args:
        hosts: Allowed Host names (default: :data:`LOOPBACK_HOSTS`); kept in
            ``app.config["DIGITS_ALLOWED_HOSTS"]``.
    """
    app.config["DIGITS_ALLOWED_HOSTS"] = list(hosts) if hosts is not None else list(LOOPBACK_HOSTS)
    app.jinja_env.globals["csp_nonce"] = csp_nonce

    @app.before_request
    def _check_host_and_origin() -> None:
        allowed = current_app.config["DIGITS_ALLOWED_HOSTS"]
        name, port = split_host(request.host or "")
        if name not in allowed:
            abort(
                400,
                description=(
                    f"This server does not answer to the host name in the request ({name or 'none'}); it answers to "
                    f"{', '.join(allowed)}. If that name is yours, restart it with --allowed-host NAME."
                ),
            )
        if request.method in UNSAFE_METHODS:
            origin = _origin_of_request()
            if origin is not None and origin != (name, _request_port(port)):
                abort(
                    403,
                    description="Cross-site request refused: this server only accepts changes from its "
                    "own pages (the request's Origin/Referer is another site).",
                )

    @app.before_request
    def _bound_the_body() -> None:
        limit, what = body_limit()
        request.max_content_length = limit
        if request.mimetype == "multipart/form-data":
            request.max_form_parts = MAX_UPLOAD_PARTS
        if request.content_length is not None and request.content_length > limit:
            abort(
                413,
                description=f"The request body ({request.content_length:,} bytes) is larger than "
                f"{limit // 1024:,} KiB, the limit of {what}.",
            )

    @app.after_request
    def _security_headers(response: Any) -> Any:
        headers = response.headers
        headers.setdefault("Content-Security-Policy", content_security_policy(csp_nonce()))
        headers.setdefault("X-Frame-Options", "DENY")
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("Referrer-Policy", "same-origin")
        return response
