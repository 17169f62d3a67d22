"""The routes this server contributes: `POST /mcp` and, with credentials, its RFC 9728 metadata.

By the time `McpEndpoint.post` runs, the middleware has checked Origin/Host (403) and
authenticated (401); it checks `Accept` (406) and `Content-Type` (415), then reads the body
under the size and time bounds of `http_limits` (413, 408), and hands it to the protocol
pipeline in `http_exchange`: in a worker thread, or on the event loop when the standard headers
name a request the server marks as quick (`McpServer.runs_quickly`). Modern responses are
`application/json`, except that a request whose tool reports progress (it sent
`_meta.progressToken`) gets `text/event-stream` (`http_progress`); they hold nothing per client,
and a modern request's `Mcp-Session-Id` is ignored.
With legacy sessions enabled (`legacy.http`, composed by the app), 2025-era traffic is answered
there first, `DELETE /mcp` included; GET gets 405 (no standalone stream), as does DELETE without
them. A GET or DELETE that names a 2026-07-28 `MCP-Protocol-Version` is 405 with `Allow: POST`
(that revision has no sessions and no standalone stream), whether or not sessions are enabled.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from notes_server.config import HttpSettings
from notes_server.errors import INTERNAL_ERROR
from notes_server.protocol.dispatch import McpServer, internal_error
from notes_server.protocol.envelope import DecodeFailure, encode_error, parse_json, request_id_of
from notes_server.protocol.versions import MODERN_VERSIONS
from notes_server.transports.http.exchange import Reply, exchange
from notes_server.transports.http.middleware.auth import (
    METADATA_PATH,
    Authenticator,
    base_url,
    principal_of,
    resource_metadata,
)
from notes_server.transports.http.progress import ProgressStream, Relay, may_stream
from notes_server.transports.http.responses import error_response, json_response
from notes_server.transports.http.threads import RequestTimeout, WorkerThreads

MCP_PATH = "/mcp"
_HEADERS_USED = ("mcp-protocol-version", "mcp-method", "mcp-name")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PARAM_VALUE = re.compile(r'[!#$%&\'*+.^_`|~0-9A-Za-z-]+|"[^"\\]*"')


class PublicRoute(Route):
    """A route served without a credential (a discovery document); every other needs one."""


def _media_types(header: str) -> set[str]:
    return {part.split(";", 1)[0].strip().lower() for part in header.split(",")}


def json_content_type(header: str) -> bool:
    """`application/json` with any parameters (RFC 9110 §8.3.1), of which `charset`, if given,
    must be UTF-8: `application/json; charset="UTF-8"; foo=bar` is fine, `charset=latin-1` or a
    malformed parameter is not."""
    media, *params = header.split(";")
    if media.strip().lower() != "application/json":
        return False
    for param in params:
        if not param.strip():
            continue  # an empty parameter (`application/json;`) is allowed by the grammar
        name, sep, value = param.strip().partition("=")
        if not sep or not _TOKEN.fullmatch(name) or not _PARAM_VALUE.fullmatch(value):
            return False
        if name.lower() == "charset" and value.strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def media_problem(request: Request) -> Response | None:
    """406 unless both response types are acceptable; 415 unless the body is UTF-8 JSON."""
    return media_problem_for(
        request.headers.get("accept", ""), request.headers.get("content-type", "")
    )


def media_problem_for(accept: str, content_type: str) -> Response | None:
    """`media_problem` from the (first) `Accept` and `Content-Type` values."""
    accepted = _media_types(accept)
    if not {"application/json", "text/event-stream"} <= accepted:
        return error_response(
            406, "Not Acceptable: Accept must list application/json and text/event-stream"
        )
    if not json_content_type(content_type):
        return error_response(
            415, "Unsupported Media Type: Content-Type must be application/json (UTF-8)"
        )
    return None


class SessionTraffic(Protocol):
    """2025-era Streamable HTTP sessions, answered before the modern pipeline."""

    async def post(self, request: Request, body: bytes, principal: str) -> ASGIApp | None:
        """The answer when the POST is session traffic; None for the modern pipeline."""

    async def delete(self, request: Request, principal: str) -> ASGIApp:
        """`DELETE /mcp`: end the session."""

    @property
    def sweep_every_s(self) -> float:
        """How often `sweep` runs."""

    def sweep(self) -> None:
        """Delete expired session state (blocking; run in a worker thread, on a timer)."""


LegacyFactory = Callable[[WorkerThreads], SessionTraffic]


class McpEndpoint:
    def __init__(
        self,
        server: McpServer,
        http: HttpSettings,
        threads: WorkerThreads,
        legacy: SessionTraffic | None = None,
    ) -> None:
        self.server = server
        self.http = http
        self.threads = threads
        self.legacy = legacy

    async def dispatch(self, request: Request) -> ASGIApp:
        """POST, and with legacy sessions DELETE (a modern client's DELETE is 405)."""
        if request.method == "POST":
            return await self.post(request)
        if self.legacy is None or modern_version(request.headers.getlist("mcp-protocol-version")):
            return not_allowed("POST")
        return await self.legacy.delete(request, principal_of(request.scope))

    async def refuse(self, request: Request) -> ASGIApp:
        """GET (no standalone stream in either era): 405 naming what this client may use."""
        if self.legacy is None or modern_version(request.headers.getlist("mcp-protocol-version")):
            return not_allowed("POST")
        return not_allowed("DELETE, POST")

    async def post(self, request: Request) -> ASGIApp:
        problem = media_problem(request)
        if problem is not None:
            return problem
        body = await request.body()
        if self.legacy is not None:
            answer = await self.legacy.post(request, body, principal_of(request.scope))
            if answer is not None:
                return answer
        headers = {name: request.headers.getlist(name) for name in _HEADERS_USED}
        if may_stream(body):
            return await self.with_progress(body, headers, principal_of(request.scope))
        call = functools.partial(exchange, self.server, body, headers, principal_of(request.scope))
        if self.quick(headers):
            reply = call()  # cheaper than a hand-off; a body that differs fails the header check
        else:
            reply = await self.threads.run(call, self.http.request_timeout)
        return _response(reply)

    async def with_progress(
        self, body: bytes, headers: dict[str, list[str]], principal: str
    ) -> ASGIApp:
        """Plain JSON unless the handler reports progress before it replies; then an SSE
        stream of the notifications and the reply (`http_progress`)."""
        relay = Relay()
        call = functools.partial(exchange, self.server, body, headers, principal, relay.emit)
        work = asyncio.ensure_future(self.threads.run(call, self.http.request_timeout))
        first = await relay.first(work)
        if first is None:
            return _response(work.result())
        return ProgressStream(relay, first, work, functools.partial(_final, body))

    def quick(self, headers: dict[str, list[str]]) -> bool:
        """The standard headers name a request the server marks as quick (`runs_quickly`).
        They are checked against the body before dispatch (-32020), so they cannot smuggle
        other work onto the event loop."""
        methods, names = headers["mcp-method"], headers["mcp-name"]
        if len(methods) != 1 or len(names) > 1:
            return False
        return self.server.runs_quickly(methods[0], names[0] if names else None)


def modern_version(values: list[str]) -> bool:
    """The request names one 2026-07-28-era `MCP-Protocol-Version`."""
    return len(values) == 1 and values[0].strip() in MODERN_VERSIONS


def not_allowed(allow: str) -> Response:
    """405 in the shape of Starlette's own (`http_responses.http_exception`)."""
    return error_response(405, "Method Not Allowed", headers={"Allow": allow})


def _response(reply: Reply) -> Response:
    if reply.body is None:
        return Response(status_code=reply.status)
    return Response(reply.body, reply.status, media_type="application/json")


def _final(body: bytes, work: asyncio.Future[Reply]) -> bytes:
    """The last event of a progress stream: the reply, or the error that ended the work."""
    exc = work.exception()
    if exc is None and work.result().body is not None:
        reply_body = work.result().body
        assert reply_body is not None
        return reply_body
    try:
        request_id = request_id_of(parse_json(body))
    except DecodeFailure:
        request_id = None
    if isinstance(exc, RequestTimeout):
        return encode_error(request_id, {"code": INTERNAL_ERROR, "message": str(exc)})
    failure = exc if isinstance(exc, Exception) else RuntimeError("no reply")
    return encode_error(request_id, internal_error(failure, "an HTTP request"))


def mcp_routes(endpoint: McpEndpoint) -> list[BaseRoute]:
    """`POST /mcp`, the Streamable HTTP endpoint (and `DELETE /mcp` with legacy sessions)."""
    if endpoint.legacy is None:
        return [Route(MCP_PATH, endpoint.post, methods=["POST"])]
    return [Route(MCP_PATH, endpoint.dispatch, methods=["POST", "DELETE"])]


def refusal_routes(endpoint: McpEndpoint) -> list[BaseRoute]:
    """`GET /mcp` with legacy sessions, only to say which methods this client may use. Not
    among the routes CORS lists in a preflight: nothing is served on GET."""
    if endpoint.legacy is None:
        return []  # Starlette's own 405 says `Allow: POST`
    return [Route(MCP_PATH, endpoint.refuse, methods=["GET"])]


def metadata_routes(auth: Authenticator, http: HttpSettings) -> list[BaseRoute]:
    """RFC 9728 Protected Resource Metadata, at the root and per resource; only when requests
    need credentials (with `--auth none` there is nothing to discover)."""
    if not auth.requires_credentials:
        return []

    async def metadata(request: Request) -> Response:
        url = base_url(request.headers, request.url.scheme, http)
        return json_response(200, resource_metadata(url, http))

    paths = (METADATA_PATH, METADATA_PATH + MCP_PATH)
    return [PublicRoute(path, metadata, methods=["GET"]) for path in paths]
