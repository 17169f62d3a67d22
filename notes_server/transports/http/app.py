"""The HTTP shell (MCP 2026-07-28 Streamable HTTP) as a Starlette composition.

Middleware, outermost first, in the order the checks must happen:

1. `ErrorMiddleware` (`http_errors`): any failure becomes a JSON-RPC -32603 (500; 503 on timeout).
2. `OriginHostGuard` (`http_guard`): Origin and Host (403, DNS rebinding).
3. `CorsMiddleware` (`http_cors`): preflight for allowed origins (204), CORS response headers.
4. `AuthMiddleware` (`http_auth`): the principal into the scope, or 401 with an RFC 9728 challenge.
5. `BodyLimitMiddleware` (`http_limits`): 413 / 408 while a route reads its body.

In front of it all, `McpPostFastPath` (`http_fastpath`) answers the plain `POST /mcp` (the hot
path) in one pass with the same checks and hands everything else to this stack unchanged.

Routes are contributions: `/mcp` and the metadata document (`http_endpoint`) come the same way
as `extra_routes` from extensions. Blocking work runs in a bounded pool (`http_threads`), so the
event loop only moves bytes and abandoned calls cannot multiply threads; only requests known
to be cheap and bounded (static results, tools whose calls are quick) and remembered token checks
(`security.token_cache`) run on the loop itself, where a hand-off would cost more than the work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from notes_server.config import HttpSettings
from notes_server.protocol.dispatch import McpServer
from notes_server.security.principals import consented_workspaces
from notes_server.transports.http.endpoint import (
    MCP_PATH,
    LegacyFactory,
    McpEndpoint,
    PublicRoute,
    SessionTraffic,
    mcp_routes,
    metadata_routes,
    refusal_routes,
)
from notes_server.transports.http.health import SchemaCheck, health_routes
from notes_server.transports.http.middleware.auth import (
    Authenticator,
    AuthMiddleware,
    PrincipalLookup,
)
from notes_server.transports.http.middleware.cors import CorsMiddleware
from notes_server.transports.http.middleware.errors import ErrorMiddleware
from notes_server.transports.http.middleware.guard import OriginHostGuard, OriginPolicy
from notes_server.transports.http.middleware.limits import BodyLimitMiddleware
from notes_server.transports.http.responses import http_exception
from notes_server.transports.http.threads import WORKER_THREADS, WorkerThreads
from notes_server.transports.http_fastpath import McpPostFastPath

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


def build_http_app(
    server: McpServer,
    auth: Authenticator,
    http: HttpSettings,
    *,
    extra_routes: Sequence[BaseRoute] = (),
    threads: int = WORKER_THREADS,
    legacy: LegacyFactory | None = None,
    health: SchemaCheck | None = None,
) -> ASGIApp:
    """The ASGI application for an already composed server and authenticator; `extra_routes`
    are served behind the same guard, CORS, authentication (unless a `PublicRoute`) and limits;
    `legacy` builds the 2025-era session handler (on this app's worker threads); `health`
    answers `GET /healthz`."""
    pool = WorkerThreads(threads)
    endpoint = McpEndpoint(server, http, pool, None if legacy is None else legacy(pool))
    routes = [*mcp_routes(endpoint), *metadata_routes(auth, http), *extra_routes]
    if health is not None:
        routes.extend(health_routes(health, pool, http.request_timeout))
    public = frozenset(
        getattr(route, "path", "") for route in routes if serves_without_credential(route)
    )
    forms = frozenset(getattr(route, "path", "") for route in routes if same_origin_forms(route))
    lend_authenticator(routes, auth)
    middleware = [
        Middleware(ErrorMiddleware),
        Middleware(OriginHostGuard, http=http, same_origin_paths=forms),
        Middleware(CorsMiddleware, origin_allowed=OriginPolicy(http), routes=routes),
        Middleware(AuthMiddleware, auth=auth, http=http, threads=pool, public_paths=public),
        Middleware(BodyLimitMiddleware, limit=http.max_body_bytes),
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeping = None
        if endpoint.legacy is not None:
            sweeping = asyncio.ensure_future(sweep_forever(endpoint.legacy, pool, http))
        try:
            yield
        finally:
            if sweeping is not None:
                sweeping.cancel()
            pool.close()

    app = Starlette(
        routes=[*routes, *refusal_routes(endpoint)],
        middleware=middleware,
        exception_handlers={HTTPException: http_exception},
        lifespan=lifespan,
    )
    if MCP_PATH in public or MCP_PATH in forms:  # an extension's own rules for `/mcp`
        return app
    return McpPostFastPath(app, endpoint, PrincipalLookup(auth, http, pool), http)
