"""Who is calling: every HTTP request is authenticated on its own, from its own headers.

There is no session: a principal is never remembered between requests, and it comes only from
the credential (a stored API token or a verified JWT), never from anything the client asserts
in the body. `--auth none` (loopback only) maps every request to one configured principal.

`AuthMiddleware` runs after the Origin/Host guard and CORS, before any route: it either puts
the principal in the scope (`principal_of`) or answers 401 with the RFC 9728 challenge. Every
path needs a credential (fail closed) except the public ones (the metadata document).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import PREFIX
from notes_server.transports.http.request import McpRequest
from notes_server.transports.http.responses import json_response
from notes_server.transports.http.stream_end import mark_credential
from notes_server.transports.http.threads import WorkerThreads

if TYPE_CHECKING:
    from notes_server.features.oauth.access import AccessTokenVerifier
    from notes_server.security.jwt_auth import JwtVerifier
    from notes_server.security.token_cache import CachedTokenVerifier
    from notes_server.tools.services import Services

MAX_CREDENTIAL = 8192
ACCESS_PREFIX = (
    "nsa_"  # notes_server.features.oauth.secrets.ACCESS_PREFIX, without importing Authlib
)
METADATA_PATH = "/.well-known/oauth-protected-resource"
PRINCIPAL_KEY = "notes_principal"
_PLAIN_HOST = re.compile(r"([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")
_METADATA_OF = "/mcp"  # the resource whose metadata is served (`endpoint.MCP_PATH`)


class PublicRoute(Route):
    """A route served without a credential (a discovery document); every other needs one."""


class DiscoveryRoute(PublicRoute):
    """A public document any site's script may read (an open path for CORS), as a client
    running in a browser discovers the authorization server through it."""

    any_origin = True


class Authenticator(Protocol):
    #: True when requests must carry a credential (and a 401 carries a challenge).
    requires_credentials: bool

    def principal_for(self, authorization: Sequence[str]) -> str | None:
        """The principal for these `Authorization` header values, or None (401)."""


class FixedPrincipal:
    """`--auth none`: local development and the conformance run on a loopback port."""

    requires_credentials = False

    def __init__(self, principal: str) -> None:
        self.principal = principal

    def principal_for(self, authorization: Sequence[str]) -> str | None:
        return self.principal


class BearerAuthenticator:
    """`Authorization: Bearer nst_...` (stored token) or, when configured, a JWT."""

    requires_credentials = True

    def __init__(
        self,
        tokens: CachedTokenVerifier,
        jwt: JwtVerifier | None = None,
        oauth: AccessTokenVerifier | None = None,
    ) -> None:
        self.tokens = tokens
        self.jwt = jwt
        self.oauth = oauth

    def remembered_principal(self, authorization: Sequence[str]) -> str | None:
        """The principal of a stored token accepted since the database last changed, without
        blocking (answered on the event loop); None: call `principal_for` in a thread."""
        credential = bearer_credential(authorization)
        if credential is None or not credential.startswith(PREFIX):
            return None
        return self.tokens.remembered(credential)

    def principal_for(self, authorization: Sequence[str]) -> str | None:
        credential = bearer_credential(authorization)
        if credential is None:
            return None
        if credential.startswith(PREFIX):
            return self.tokens.principal_for(credential)
        if self.oauth is not None and credential.startswith(ACCESS_PREFIX):
            return self.oauth.principal_for(credential)
        if self.jwt is not None and credential.count(".") == 2:
            return self.jwt.principal_for(credential)
        return None


def bearer_credential(authorization: Sequence[str]) -> str | None:
    """The credential of exactly one well-formed `Bearer` header, else None."""
    if len(authorization) != 1:
        return None
    scheme, _, credential = authorization[0].strip().partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential or len(credential) > MAX_CREDENTIAL:
        return None
    return credential


def build_authenticator(
    settings: Settings, http: HttpSettings, services: Services
) -> Authenticator:
    if http.auth == "none":
        return FixedPrincipal(settings.principal)
    from notes_server.security.token_cache import CachedTokenVerifier
    from notes_server.security.tokens import TokenVerifier
    from notes_server.store.freshness import change_counter
    from notes_server.store.tokens import SqlTokenRecords

    verifier = None
    if http.jwt_jwks:
        from notes_server.security.jwt_auth import JwtVerifier

        assert http.jwt_issuer and http.jwt_audience, "checked at start-up"
        verifier = JwtVerifier(
            http.jwt_issuer, http.jwt_audience, Path(http.jwt_jwks), http.jwt_client_ids
        )
    oauth = None
    if http.auth == "oauth":
        from notes_server.features.oauth.access import AccessTokenVerifier

        assert http.public_url, "checked at start-up"
        oauth = AccessTokenVerifier(services, http.public_url.rstrip("/") + "/mcp")
    counter = change_counter(settings.sqlite_path)
    records = SqlTokenRecords(services.engine)
    tokens = CachedTokenVerifier(TokenVerifier(records), counter, recheck_here=records.runs_on_loop)
    return BearerAuthenticator(tokens, verifier, oauth)


def challenge(base_url: str, *, presented: bool) -> str:
    """RFC 6750 / RFC 9728 challenge; `error` only when a credential was actually presented."""
    value = f'Bearer resource_metadata="{base_url}{METADATA_PATH}/mcp"'
    if presented:
        value += ', error="invalid_token"'
    return value


def resource_metadata(base_url: str, http: HttpSettings) -> dict[str, object]:
    """RFC 9728 Protected Resource Metadata for the `/mcp` endpoint."""
    metadata: dict[str, object] = {
        "resource": f"{base_url}/mcp",
        "bearer_methods_supported": ["header"],
        "resource_name": "notes-server",
    }
    servers = []
    if http.auth == "oauth":
        servers.append(base_url)
    if http.jwt_issuer:
        servers.append(http.jwt_issuer)
    if servers:
        metadata["authorization_servers"] = servers
    return metadata


def base_url(headers: Headers, scheme: str, http: HttpSettings) -> str:
    """`--public-url`, else this request's Host when it is a plain host[:port] (it goes into
    a quoted header parameter, so anything else falls back to the bound address)."""
    return base_url_for(headers.get("host", ""), scheme, http)


def base_url_for(host: str, scheme: str, http: HttpSettings) -> str:
    """`base_url` from the (first) Host value alone."""
    if http.public_url:
        return http.public_url.rstrip("/")
    if not _PLAIN_HOST.fullmatch(host):
        host = f"{http.host}:{http.port}"
    return f"{scheme}://{host}"


def principal_of(scope: Scope) -> str:
    """The principal `AuthMiddleware` authenticated; a route behind it cannot run without one."""
    principal = scope.get(PRINCIPAL_KEY)
    if not isinstance(principal, str):
        raise RuntimeError("route reached without authentication")
    return principal


def unauthorized(url: str, *, presented: bool) -> Response:
    """401 with the RFC 9728 challenge pointing at this server's metadata document."""
    return json_response(
        401,
        {"error": "invalid_token", "error_description": "Missing or invalid access token"},
        {"WWW-Authenticate": challenge(url, presented=presented)},
    )


class PrincipalLookup:
    """The principal for a request's `Authorization` values, or None (401): from memory on the
    event loop when the authenticator can (`remembered_principal`), else in a worker thread
    (a token lookup reads the database). Shared by `AuthMiddleware` and `AuthCheck`."""

    def __init__(self, auth: Authenticator, http: HttpSettings, threads: WorkerThreads) -> None:
        self.auth = auth
        self.timeout = http.request_timeout
        self.threads = threads
        # Optional: an authenticator that can answer from memory without blocking.
        self.remembered: Callable[[Sequence[str]], str | None] | None = getattr(
            auth, "remembered_principal", None
        )

    async def __call__(self, values: Sequence[str]) -> str | None:
        if not self.auth.requires_credentials:
            return self.auth.principal_for(values)
        principal = None if self.remembered is None else self.remembered(values)
        if principal is None:
            call = functools.partial(self.auth.principal_for, values)
            principal = await self.threads.run(call, self.timeout)
        return principal


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        auth: Authenticator,
        http: HttpSettings,
        threads: WorkerThreads,
        public_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.http = http
        self.public_paths = public_paths
        self.lookup = PrincipalLookup(auth, http, threads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.public_paths:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        values = headers.getlist("authorization")
        principal = await self.lookup(values)
        if principal is None:
            url = base_url(headers, scope["scheme"], self.http)
            await unauthorized(url, presented=bool(values))(scope, receive, send)
            return
        scope[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)


class AuthCheck:
    """The `/mcp` chain's authentication step: the principal into the request, or 401 with the
    RFC 9728 challenge (after CORS, so an allowed Origin reads it)."""

    def __init__(self, lookup: PrincipalLookup, http: HttpSettings) -> None:
        self.lookup = lookup
        self.http = http

    async def __call__(self, request: McpRequest) -> Response | None:
        authorization = request.all(b"authorization")
        principal = await self.lookup(authorization)
        if principal is None:
            url = base_url_for(request.first(b"host"), request.scope["scheme"], self.http)
            return unauthorized(url, presented=bool(authorization))
        request.principal = principal
        lookup = self.lookup

        async def still_accepted() -> bool:
            return await lookup(authorization) == principal

        mark_credential(request.scope, still_accepted)  # for a stream that outlives this check
        return None


def metadata_routes(auth: Authenticator, http: HttpSettings) -> list[BaseRoute]:
    """RFC 9728 Protected Resource Metadata, at the root and per resource; only when requests
    need credentials (with `--auth none` there is nothing to discover)."""
    if not auth.requires_credentials:
        return []

    async def metadata(request: Request) -> Response:
        url = base_url(request.headers, request.url.scheme, http)
        return json_response(200, resource_metadata(url, http))

    paths = (METADATA_PATH, METADATA_PATH + _METADATA_OF)
    return [DiscoveryRoute(path, metadata, methods=["GET"]) for path in paths]
