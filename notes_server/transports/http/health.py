"""`GET /healthz`: whether this instance can serve, for load balancers and orchestrators.

200 `{"status": "ok", "schema": HEAD}` when the database answers and its schema is the one this
build needs; otherwise 503 with a reason a person can act on ("database unreachable", "schema
is at 0008, not 0009: run notes-server migrate"), never a driver message, URL or path. Public (a
load balancer holds no token) but behind the Origin/Host guard like every route. The check runs
in a worker thread, bounded by the request timeout, so a hung database answers 503, not never.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from notes_server.transports.http.middleware.auth import PublicRoute
from notes_server.transports.http.responses import json_response
from notes_server.transports.http.threads import WorkerThreads

HEALTH_PATH = "/healthz"
log = logging.getLogger("notes_server.http")

#: Returns (schema revision the database has, revision this build needs); raises when the
#: database cannot be reached.
SchemaCheck = Callable[[], tuple[str | None, str]]


def health_routes(check: SchemaCheck, threads: WorkerThreads, timeout: float) -> list[BaseRoute]:
    """The health route, answered from `check` run on a worker thread."""

    async def health(request: Request) -> Response:
        try:
            current, head = await threads.run(check, timeout)
        except Exception as exc:  # unreachable, refused, timed out: all "not ready"
            log.warning("health check failed: %s", type(exc).__name__)
            return _unhealthy("database unreachable")
        if current != head:
            return _unhealthy(
                f"schema is at {current or 'nothing'}, not {head}: run notes-server migrate"
            )
        return json_response(200, {"status": "ok", "schema": head}, _NO_STORE)

    return [PublicRoute(HEALTH_PATH, health, methods=["GET"])]


_NO_STORE = {"Cache-Control": "no-store"}


def _unhealthy(reason: str) -> Response:
    return json_response(503, {"status": "unavailable", "reason": reason}, _NO_STORE)
