"""CORS, so a browser-based MCP client can call `/mcp` and run the OAuth flow from script.

It runs after `OriginHostGuard`: a request that reaches it carries no Origin (not a browser, or
same-origin) or one the guard let through. There are two kinds of path:

- `/mcp` and the rest: only allowed origins (`--allow-origin`, or a loopback origin on a
  loopback bind) get here with an Origin; a disallowed one, preflight included, was already
  refused with 403. Their answers echo the Origin (`Vary: Origin`).
- Open paths (a route with `any_origin = True`: the OAuth and resource metadata documents and
  the token, revocation and registration endpoints): public, no cookie or other ambient
  credential, authenticated only by what the request itself carries. Any origin may call them,
  and every answer, errors included and with or without an Origin, says
  `Access-Control-Allow-Origin: *`: the same bytes for everyone, so a shared cache cannot hand
  a browser a copy without it. `*` rather than an echo because nothing is credentialed there:
  browsers refuse `*` to a request sent with cookies, which is the point, and no
  `Access-Control-Allow-Credentials` is ever sent. The sign-in and consent pages are not open:
  a browser reaches them by navigation, not by script.

A preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered here with 204, before
authentication, since browsers send no credentials on it; it lists only the methods that have
routes on that path. Answers expose the headers a client needs (`WWW-Authenticate`, and on
`/mcp` `Mcp-Session-Id`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notes_server.transports.http.middleware.guard import SAME_ORIGIN_KEY
from notes_server.transports.http.request import McpRequest
from notes_server.transports.http.responses import error_response

ALLOW_HEADERS = (
    "authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, "
    "mcp-session-id, last-event-id"
)
EXPOSE_HEADERS = "mcp-session-id, www-authenticate"
OPEN_EXPOSE_HEADERS = "www-authenticate"  # a 401 invalid_client says how to authenticate
MAX_AGE_S = 600
_IMPLICIT = frozenset({"HEAD", "OPTIONS"})
_EXPOSE = (b"access-control-expose-headers", EXPOSE_HEADERS.encode("latin-1"))
_VARY = (b"vary", b"Origin")


def cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    """The headers `with_cors` adds, for a response built here (which has none of them)."""
    return [(b"access-control-allow-origin", origin.encode("latin-1")), _EXPOSE, _VARY]


def with_cors(send: Send, origin: str) -> Send:
    """A `send` that gives the response the CORS headers of an allowed Origin."""

    async def send_with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            response_headers = MutableHeaders(scope=message)
            response_headers["Access-Control-Allow-Origin"] = origin
            response_headers["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
            response_headers.add_vary_header("Origin")
        await send(message)

    return send_with_cors


def preflight(origin: str, methods: Sequence[str], vary: bool = True) -> Response:
    """204 for a preflight from an allowed Origin (or `*` on an open path, which does not vary
    by Origin), listing the methods served at its path."""
    headers = {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": ", ".join(methods),
        "Access-Control-Allow-Headers": ALLOW_HEADERS,
        "Access-Control-Max-Age": str(MAX_AGE_S),
    }
    if vary:
        headers["Vary"] = "Origin"
    return Response(status_code=204, headers=headers)


class CorsCheck:
    """The `/mcp` chain's CORS step, after the guard: a preflight is answered (before
    authentication: browsers send no credentials on it); any other request from an allowed
    Origin is marked, so that its answer, refusals included, carries the CORS headers."""

    def __init__(self, origin_allowed: Callable[[str], bool], methods: Sequence[str]) -> None:
        self.origin_allowed = origin_allowed
        self.methods = sorted(set(methods) - _IMPLICIT)

    async def __call__(self, request: McpRequest) -> Response | None:
        origins = request.all(b"origin")
        if not origins:
            return None
        origin = origins[0]
        if not self.origin_allowed(origin):  # the guard refused it already: fail closed anyway
            return error_response(403, "Forbidden: Origin not allowed")
        if request.method == "OPTIONS" and request.has(b"access-control-request-method"):
            return preflight(origin, self.methods)
        request.cors_origin = origin
        return None


def any_origin(route: BaseRoute) -> bool:
    """A route any site's script may call (`any_origin = True`; extensions say so with the
    attribute, as they cannot import this layer)."""
    return getattr(route, "any_origin", False) is True


class CorsMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        origin_allowed: Callable[[str], bool],
        routes: Sequence[BaseRoute],
        open_paths: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.origin_allowed = origin_allowed
        self.routes = routes
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] in self.open_paths:
            await self.open(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None or scope.get(SAME_ORIGIN_KEY) is True:
            await self.app(scope, receive, send)
            return
        if not self.origin_allowed(origin):  # the guard refused it already: fail closed anyway
            await error_response(403, "Forbidden: Origin not allowed")(scope, receive, send)
            return
        if is_preflight(scope, headers):
            methods = self.methods_at(scope)
            if methods:
                await preflight(origin, methods)(scope, receive, send)
                return
        await self.app(scope, receive, with_cors(send, origin))

    async def open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An open path: `*` on every answer; a preflight from anywhere gets 204."""
        if is_preflight(scope, Headers(scope=scope)):
            methods = self.methods_at(scope)
            if methods:
                await preflight("*", methods, vary=False)(scope, receive, send)
                return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                response_headers["Access-Control-Allow-Origin"] = "*"
                response_headers["Access-Control-Expose-Headers"] = OPEN_EXPOSE_HEADERS
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def methods_at(self, scope: Scope) -> list[str]:
        """The methods routed at this request's path (none: not a path of ours, so 404)."""
        methods: set[str] = set()
        for route in self.routes:
            match, _ = route.matches(scope)
            route_methods = getattr(route, "methods", None)
            if match is not Match.NONE and route_methods:
                methods.update(route_methods)
        return sorted(methods - _IMPLICIT)


def is_preflight(scope: Scope, headers: Headers) -> bool:
    return scope["method"] == "OPTIONS" and "access-control-request-method" in headers
