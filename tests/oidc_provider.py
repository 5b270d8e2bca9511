"""A real OpenID Connect provider on 127.0.0.1 for tests, built from Authlib's server side.

Authorization code flow with PKCE (S256 required) and nonces; ID tokens signed
RS256 with a key made per provider, published at ``/jwks``; discovery at
``/.well-known/openid-configuration``. The authorization endpoint signs in
:attr:`OidcProvider.user` without asking (the test sets who that is), like a
provider where the browser already has a session.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from flask import Flask, jsonify
from joserfc.jwk import RSAKey
from werkzeug.serving import make_server


@dataclass
class _Client:
    client_id: str
    client_secret: str
    redirect_uris: list[str]

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope):
        return " ".join(s for s in (scope or "").split() if s in ("openid", "profile", "groups"))

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret):
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type == "authorization_code"


@dataclass
class _Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: dict
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return self.auth_time

    def get_acr(self):
        return None

    def get_amr(self):
        return None


class OidcProvider:
    """The provider: start it, register one client, set :attr:`user`, stop it.

    Attributes:
        issuer: ``http://127.0.0.1:PORT``.
        user: The end user the next authorization signs in: ``{"sub", "preferred_username", "groups"}``.
    """

    def __init__(self, client_id: str, client_secret: str, redirect_uri: str):
        self.client = _Client(client_id, client_secret, [redirect_uri])
        self.key = RSAKey.generate_key(2048, private=True, auto_kid=True)
        self.user: dict = {}
        self.codes: dict[str, _Code] = {}
        self.nonces: set[str] = set()
        self.app = Flask("oidc-provider")
        self.app.secret_key = secrets.token_hex(16)
        self._server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.issuer = f"http://127.0.0.1:{self._server.server_port}"
        self._build()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _build(self) -> None:
        provider = self

        class Code(AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

            def save_authorization_code(self, code, request):
                data = request.payload.data
                provider.codes[code] = _Code(
                    code,
                    request.client.get_client_id(),
                    request.payload.redirect_uri,
                    request.scope,
                    dict(request.user),
                    data.get("nonce"),
                    data.get("code_challenge"),
                    data.get("code_challenge_method"),
                )

            def query_authorization_code(self, code, client):
                item = provider.codes.get(code)
                return item if item and item.client_id == client.get_client_id() else None

            def delete_authorization_code(self, authorization_code):
                provider.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code):
                return authorization_code.user

        class OpenID(OpenIDCode):
            def exists_nonce(self, nonce, request):
                if nonce in provider.nonces:
                    return True
                provider.nonces.add(nonce)
                return False

            def resolve_client_private_key(self, client):
                return provider.key

            def get_client_algorithm(self, client):
                return "RS256"

            def get_client_claims(self, client):
                return {"iss": provider.issuer, "aud": [client.get_client_id()]}

            def get_encode_header(self, client):
                return {"alg": "RS256", "kid": provider.key.kid}

            def generate_user_info(self, user, scope):
                return UserInfo(user)

        server = AuthorizationServer(
            self.app,
            query_client=lambda cid: self.client if cid == self.client.client_id else None,
            save_token=lambda token, request: None,
        )
        server.register_grant(Code, [OpenID(require_nonce=True), CodeChallenge(required=True)])
        self._routes(server)

    def _routes(self, server: AuthorizationServer) -> None:
        @self.app.get("/.well-known/openid-configuration")
        def discovery():
            return jsonify(
                issuer=self.issuer,
                authorization_endpoint=f"{self.issuer}/authorize",
                token_endpoint=f"{self.issuer}/token",
                jwks_uri=f"{self.issuer}/jwks",
                response_types_supported=["code"],
                subject_types_supported=["public"],
                id_token_signing_alg_values_supported=["RS256"],
                code_challenge_methods_supported=["S256"],
                token_endpoint_auth_methods_supported=["client_secret_basic", "client_secret_post"],
            )

        @self.app.get("/jwks")
        def jwks():
            return jsonify(keys=[self.key.as_dict(private=False)])

        @self.app.get("/authorize")
        def authorize():
            return server.create_authorization_response(grant_user=self.user)

        @self.app.post("/token")
        def token():
            return server.create_token_response()

    def start(self) -> OidcProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=10)
