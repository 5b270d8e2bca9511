"""Single sign-on through OpenID Connect (authorisation code flow with PKCE, Authlib), groups mapped to roles.

Configured by ``oidc.json`` in the jobs folder (read when the server starts)::

    {"issuer": "https://login.example.org/realms/lab", "client_id": "digits",
     "client_secret_env": "DIGITS_OIDC_SECRET",
     "roles": {"lab-admins": "admin", "lab-ml": "trainer", "lab": "viewer"}}

``client_secret`` may be given in the file instead (keep it readable by the
server's user only). A provider user signs in at ``/account/oidc``; the
highest role its ``groups`` claim (``groups_claim``) maps to is given at each
sign-in; a user in no mapped group is refused. Names come from
``preferred_username`` (else ``sub``); a provider user never signs in as a
local (password) user of the same name.
"""

from __future__ import annotations

import json
import os
from typing import Any

from flask import Blueprint, abort, current_app, redirect, request, url_for

from ..accounts import ROLES
from ..errors import ConfigurationError, DigitsError
from . import security

bp = Blueprint("accounts_oidc", __name__)

#: The configuration file in the jobs folder.
FILENAME = "oidc.json"


def read_config(jobs_dir) -> dict[str, Any] | None:
    """The checked ``oidc.json`` of ``jobs_dir``, or ``None`` when there is none.

    Raises:
        ConfigurationError: The file is unreadable, or a field is missing or wrong (named).
    """
    path = os.path.join(jobs_dir, FILENAME)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path}: cannot read it as JSON ({exc}).") from None
    if not isinstance(config, dict):
        raise ConfigurationError(f"{path}: give a JSON object.")
    for key in ("issuer", "client_id"):
        if not isinstance(config.get(key), str) or not config[key]:
            raise ConfigurationError(f'{path}: "{key}" is missing: give the provider\'s {key}.')
    secret = config.get("client_secret") or os.environ.get(str(config.get("client_secret_env") or ""), "")
    if not secret:
        raise ConfigurationError(f'{path}: give "client_secret", or "client_secret_env" naming a set variable.')
    roles = config.get("roles")
    if not isinstance(roles, dict) or not roles or any(r not in ROLES for r in roles.values()):
        raise ConfigurationError(f'{path}: "roles" maps provider groups to roles ({", ".join(ROLES)}).')
    groups = config.get("groups") or {}
    if not isinstance(groups, dict) or not all(isinstance(v, str) and v for v in groups.values()):
        raise ConfigurationError(f'{path}: "groups" maps provider groups to DIGITS group names (text).')
    claim = config.get("groups_claim") or "groups"
    return {**config, "client_secret": secret, "groups_claim": claim, "groups": groups}


def groups_of(groups: Any, mapping: dict[str, str]) -> list[str]:
    """The DIGITS groups that ``groups`` (a claim: list or text) map to, without repeats, in the mapping's order."""
    names = {groups} if isinstance(groups, str) else {g for g in groups or [] if isinstance(g, str)}
    return list(dict.fromkeys(target for source, target in mapping.items() if source in names))


def role_of(groups: Any, mapping: dict[str, str]) -> str | None:
    """The highest role that ``groups`` (a claim: list or text) map to, or ``None``."""
    names = [groups] if isinstance(groups, str) else [g for g in groups or [] if isinstance(g, str)]
    mapped = [mapping[g] for g in names if g in mapping]
    return max(mapped, key=ROLES.index) if mapped else None


def init_app(app) -> None:
    """Register the sign-on routes; set up the Authlib client when ``oidc.json`` exists."""
    config = read_config(app.extensions["digits"].jobs_dir)
    app.extensions["digits_oidc"] = None
    if config is not None:
        from authlib.integrations.flask_client import OAuth  # only servers that use sign-on load Authlib

        oauth = OAuth(app)
        client = oauth.register(
            "oidc",
            client_id=config["client_id"],
            client_secret=config["client_secret"],
            server_metadata_url=config["issuer"].rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={"scope": "openid profile groups", "code_challenge_method": "S256"},
        )
        app.extensions["digits_oidc"] = (client, config)
    app.register_blueprint(bp)


def _client():
    found = current_app.extensions.get("digits_oidc")
    if found is None:
        abort(404, description="This server has no single sign-on (oidc.json in the jobs folder).")
    return found


@bp.get("/account/oidc")
def start():
    """Send the browser to the provider (state, nonce and PKCE verifier kept in the session)."""
    client, _ = _client()
    return client.authorize_redirect(url_for("accounts_oidc.callback", _external=True))


@bp.get("/account/oidc/callback")
def callback():
    """The provider's answer: check it (state, PKCE, ID token and nonce), map the groups, sign in."""
    from authlib.integrations.base_client import OAuthError  # loaded with the client above
    from joserfc.errors import JoseError  # Authlib's JOSE library: a bad or expired ID token

    client, config = _client()
    try:
        token = client.authorize_access_token()
    except (OAuthError, JoseError, ValueError) as exc:
        abort(400, description=f"Single sign-on failed: {getattr(exc, 'error', None) or exc}.")
    claims = token.get("userinfo") or {}
    name = str(claims.get("preferred_username") or claims.get("sub") or "")
    role = role_of(claims.get(config["groups_claim"]), config["roles"])
    accounts = current_app.extensions["digits_accounts"]  # accounts_views.Accounts (installed before this)
    try:
        user = accounts.store.sign_in_external(name, role) if role else None
        if user is not None and config["groups"]:  # memberships follow the provider's groups at each sign-in
            wanted = groups_of(claims.get(config["groups_claim"]), config["groups"])
            user = accounts.store.sync_groups(name, wanted, list(config["groups"].values()))
    except DigitsError:  # a name or group the store cannot take
        user = None
    accounts.audit.record(
        name or None,
        "sign-in (oidc)",
        name or None,
        allowed=user is not None,
        address=security.client_address(),
        endpoint=request.endpoint,
    )
    if user is None:
        abort(403, description="Your account has no role on this server (no mapped group), or is disabled.")
    accounts.start_session(user)
    return redirect(url_for("home.index"))
