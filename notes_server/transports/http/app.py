"""The HTTP shell (MCP 2026-07-28 Streamable HTTP, and 2025-era sessions): `/mcp` beside
Starlette.

`HttpApp` hands every request to `/mcp` to the one `McpPostHandler` (`endpoint`: its checks are
one chain, composed once, every message and both eras answered there) and everything else to a
Starlette app serving the other routes: the RFC 9728 metadata, `GET /healthz`, and the routes
contributed as `extra_routes` by extensions (the approval page, OAuth). Starlette's middleware,
outermost first, runs the same checks in the same order, from the same `middleware/` modules:

1. `ErrorMiddleware`: any failure becomes a JSON-RPC -32603 (500; 503 on timeout).
2. `OriginHostGuard`: Origin and Host (403, DNS rebinding).
3. `CorsMiddleware`: preflight for allowed origins (204), CORS response headers; open paths
   (`any_origin` routes: the OAuth endpoints a client's script calls) for any origin.
4. `AuthMiddleware`: the principal into the scope, or 401 with an RFC 9728 challenge.
5. `BodyLimitMiddleware`: 413 / 408 while a route reads its body.

Blocking work runs in a bounded pool (`threads`), so the event loop only moves bytes and
abandoned calls cannot multiply threads; only requests known to be cheap and bounded (static
results, tools whose calls are bounded local reads) and remembered token checks
(`security.token_cache`) run on the loop itself, where a hand-off would cost more than the work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from notes_server.config import HttpSettings
from notes_server.protocol.server import McpServer
from notes_server.security.principals import consented_workspaces
from notes_server.transports.http.endpoint import (
    MCP_PATH,
    LegacyFactory,
    McpPostHandler,
    SessionTraffic,
)
from notes_server.transports.http.health import SchemaCheck, health_routes
from notes_server.transports.http.middleware.auth import (
    Authenticator,
    AuthMiddleware,
    PrincipalLookup,
    PublicRoute,
    metadata_routes,
)
from notes_server.transports.http.middleware.cors import CorsMiddleware, any_origin
from notes_server.transports.http.middleware.errors import ErrorMiddleware
from notes_server.transports.http.middleware.guard import OriginHostGuard, OriginPolicy
from notes_server.transports.http.middleware.limits import BodyLimitMiddleware
from notes_server.transports.http.responses import http_exception
from notes_server.transports.http.threads import WORKER_THREADS, WorkerThreads

log = logging.getLogger("notes_server.http")


def serves_without_credential(route: BaseRoute) -> bool:
    """A `PublicRoute`, or an extension's route that authenticates the person itself (it says
    so with a `serves_without_credential = True` attribute: extensions cannot import this
    layer)."""
    if isinstance(route, PublicRoute):
        return True
    return getattr(route, "serves_without_credential", False) is True


def same_origin_forms(route: BaseRoute) -> bool:
    """An extension's route serving its own HTML forms (`same_origin_forms = True`): a POST
    from its own origin passes the Origin check without `--allow-origin`."""
    return getattr(route, "same_origin_forms", False) is True


def lend_authenticator(routes: Sequence[BaseRoute], auth: Authenticator) -> None:
    """Routes that sign a person in with a credential typed into a page (`use_authenticator`)
    check it with the same authenticator as `/mcp`, so every credential the server accepts
    works there (stored tokens, JWTs). Not under `--auth none`, which accepts anything: such
    routes keep their own stricter check."""
    if not auth.requires_credentials:
        return

    def verify(credential: str) -> str | None:
        principal = auth.principal_for([f"Bearer {credential}"])
        # An OAuth access token is the assistant's credential, not the person's: a page that
        # asks the person to prove who they are must not take it.
        return None if consented_workspaces(principal or "") is not None else principal

    for route in routes:
        hook = getattr(route, "use_authenticator", None)
        if callable(hook):
            hook(verify)


async def sweep_forever(legacy: SessionTraffic, pool: WorkerThreads, http: HttpSettings) -> None:
    """Every `legacy.sweep_every_s`, expired session state leaves the database; a failure is
    logged and the next round tries again."""
    while True:
        await asyncio.sleep(legacy.sweep_every_s)
        try:
            await pool.run(legacy.sweep, http.request_timeout)
        except Exception:
            log.warning("sweeping expired sessions failed", exc_info=True)


class HttpApp:
    """`/mcp` to its handler, every other request (and the lifespan) to Starlette; and to
    Starlette too the methods an extension's own route serves at `/mcp` (`beside`)."""

    def __init__(
        self, mcp: McpPostHandler, others: ASGIApp, beside: frozenset[str] = frozenset()
    ) -> None:
        self.mcp = mcp
        self.others = others
        self.beside = beside

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _at_mcp(scope) and scope["method"] not in self.beside:
            await self.mcp(scope, receive, send)
        else:
            await self.others(scope, receive, send)


async def _answered_beside(request: Request) -> Response:
    """Never called (`HttpApp` hands `/mcp` to its handler first): the route only lets
    Starlette's router know the path, so that `/mcp/` is redirected to it as before."""
    raise RuntimeError("/mcp is answered by McpPostHandler")


_MCP_ROUTE = Route(MCP_PATH, _answered_beside)


def _at_mcp(scope: Scope) -> bool:
    """The request is for `/mcp` (under a `root_path`, as Starlette's router matches it)."""
    if not scope.get("root_path"):
        return bool(scope["path"] == MCP_PATH)
    return _MCP_ROUTE.matches(scope)[0] is not Match.NONE


def build_http_app(
    server: McpServer,
    auth: Authenticator,
    http: HttpSettings,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    threads: int = WORKER_THREADS,
    legacy: LegacyFactory | None = None,
    health: SchemaCheck | None = None,
    background: Callable[[], Callable[[], None]] | None = None,
) -> HttpApp:
    """The ASGI application for an already composed server and authenticator; `extra_routes`
    are served behind the same guard, CORS, authentication (unless a `PublicRoute`) and limits;
    `legacy` builds the 2025-era session handler (on this app's worker threads); `health`
    answers `GET /healthz`; `background` starts this process's background work (the semantic
    indexer) at startup and returns what stops it at shutdown. An extension's route at `/mcp`
    serves its methods there, except POST (and DELETE and GET with 2025 sessions), which stay
    the handler's."""
    pool = WorkerThreads(threads)
    sessions = None if legacy is None else legacy(pool)
    lookup = PrincipalLookup(auth, http, pool)
    ours = frozenset({"POST"} if sessions is None else {"POST", *sessions.methods})
    beside = frozenset(
        method
        for route in extra_routes
        if getattr(route, "path", None) == MCP_PATH
        for method in getattr(route, "methods", None) or ()
    )
    mcp = McpPostHandler(server, http, pool, lookup, sessions, methods=sorted(ours | beside))
    routes = [*metadata_routes(auth, http), *extra_routes]
    if health is not None:
        routes.extend(health_routes(health, pool, http.request_timeout))
    public = frozenset(
        getattr(route, "path", "") for route in routes if serves_without_credential(route)
    )
    forms = frozenset(getattr(route, "path", "") for route in routes if same_origin_forms(route))
    opened = frozenset(getattr(route, "path", "") for route in routes if any_origin(route)) - forms
    lend_authenticator(routes, auth)
    middleware = [
        Middleware(ErrorMiddleware),
        Middleware(OriginHostGuard, http=http, same_origin_paths=forms, open_paths=opened),
        Middleware(
            CorsMiddleware, origin_allowed=OriginPolicy(http), routes=routes, open_paths=opened
        ),
        Middleware(AuthMiddleware, auth=auth, http=http, threads=pool, public_paths=public),
        Middleware(BodyLimitMiddleware, limit=http.max_body_bytes),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeping = None
        if sessions is not None:
            sweeping = asyncio.ensure_future(sweep_forever(sessions, pool, http))
        stop_background = background() if background is not None else None
        try:
            yield
        finally:
            if sweeping is not None:
                sweeping.cancel()
            if stop_background is not None:
                await asyncio.get_running_loop().run_in_executor(None, stop_background)
            pool.close()

    others = Starlette(
        routes=[*routes, Route(MCP_PATH, _answered_beside, methods=sorted(ours))],
        middleware=middleware,
        exception_handlers={HTTPException: http_exception},
        lifespan=lifespan,
    )
    return HttpApp(mcp, others, beside - ours)
