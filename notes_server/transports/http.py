"""Streamable HTTP transport (MCP 2026-07-28): `POST /mcp`, one JSON-RPC message per request.

Order of checks, cheapest and most security-relevant first: Origin/Host (403, DNS rebinding),
authentication (401 with an RFC 9728 challenge), `Accept` (406), `Content-Type` (415), body size
(413) and read time (408); then the protocol pipeline in `http_exchange` (parse, envelope,
notification 202, `_meta`, headers, version, method, handler). Responses are always
`application/json`: no SSE stream is ever opened, so nothing is held per client. `Mcp-Session-Id`
is ignored and never minted. GET and DELETE (legacy session traffic) get 405 with `Allow: POST`.

The protocol work and the token lookup use a synchronous database, so they run in worker threads;
the event loop only moves bytes.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from notes_server.config import HttpSettings
from notes_server.errors import INTERNAL_ERROR
from notes_server.protocol.dispatch import McpServer, internal_error
from notes_server.transports.http_auth import (
    METADATA_PATH,
    Authenticator,
    challenge,
    resource_metadata,
)
from notes_server.transports.http_exchange import exchange
from notes_server.transports.http_guard import OriginHostGuard, error_response, json_response
from notes_server.values import is_ascii_digits

log = logging.getLogger("notes_server.http")

BODY_READ_TIMEOUT_S = 10.0
_HEADERS_USED = ("mcp-protocol-version", "mcp-method", "mcp-name")
_PLAIN_HOST = re.compile(r"([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")
_T = TypeVar("_T")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_PARAM_VALUE = re.compile(r'[!#$%&\'*+.^_`|~0-9A-Za-z-]+|"[^"\\]*"')


async def in_thread(func: Callable[[], _T], timeout: float) -> _T:
    """Run blocking work off the event loop, bounded in time.

    Starlette's `run_in_threadpool` cannot time out: cancelling it waits for the thread. Here a
    timed-out call is abandoned (the thread finishes on its own and its result is dropped), so
    one stuck request can never pin a connection forever. Writes stay safe: a confirmation that
    commits after its client gave up is recorded, and the client's retry gets the same outcome.
    """
    with anyio.fail_after(timeout):
        return await anyio.to_thread.run_sync(func, abandon_on_cancel=True)


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
    accepted = _media_types(request.headers.get("accept", ""))
    if not {"application/json", "text/event-stream"} <= accepted:
        return error_response(
            406, "Not Acceptable: Accept must list application/json and text/event-stream"
        )
    if not json_content_type(request.headers.get("content-type", "")):
        return error_response(
            415, "Unsupported Media Type: Content-Type must be application/json (UTF-8)"
        )
    return None


def _within(declared: str, limit: int) -> bool:
    """A Content-Length of ASCII digits only, no longer than the limit's own (so `int` never
    meets thousands of digits), and at most `limit`."""
    return is_ascii_digits(declared) and len(declared) <= len(str(limit)) and int(declared) <= limit


async def read_body(request: Request, limit: int) -> bytes | Response:
    """The whole body, or 413 past `limit` bytes (checked before and while reading), or 408."""
    declared = request.headers.get("content-length")
    if declared is not None and not _within(declared, limit):
        return error_response(413, "Payload Too Large")
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(BODY_READ_TIMEOUT_S):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return error_response(413, "Payload Too Large")
                chunks.append(chunk)
    except TimeoutError:
        return error_response(408, "Request Timeout")
    return b"".join(chunks)


class McpEndpoint:
    def __init__(self, server: McpServer, auth: Authenticator, http: HttpSettings) -> None:
        self.server = server
        self.auth = auth
        self.http = http

    def base_url(self, request: Request) -> str:
        """`--public-url`, else this request's Host when it is a plain host[:port] (it goes into
        a quoted header parameter, so anything else falls back to the bound address)."""
        if self.http.public_url:
            return self.http.public_url.rstrip("/")
        host = request.headers.get("host", "")
        if not _PLAIN_HOST.fullmatch(host):
            host = f"{self.http.host}:{self.http.port}"
        return f"{request.url.scheme}://{host}"

    async def principal(self, request: Request) -> str | Response:
        values = request.headers.getlist("authorization")
        if not self.auth.requires_credentials:
            found = self.auth.principal_for(values)
        else:
            call = functools.partial(self.auth.principal_for, values)
            found = await in_thread(call, self.http.request_timeout)
        if found is not None:
            return found
        return json_response(
            401,
            {"error": "invalid_token", "error_description": "Missing or invalid access token"},
            {"WWW-Authenticate": challenge(self.base_url(request), presented=bool(values))},
        )

    async def post(self, request: Request) -> Response:
        """Never plain text: a timeout is 503 and any other failure (authentication included)
        500, both as a JSON-RPC -32603; a database fault names its cause, nothing else does."""
        try:
            return await self._post(request)
        except TimeoutError:
            log.warning("request timed out after %.0fs", self.http.request_timeout)
            return error_response(503, "Request timed out", code=INTERNAL_ERROR)
        except Exception as exc:
            error = internal_error(exc, "an HTTP request")
            return error_response(500, str(error["message"]), code=INTERNAL_ERROR)

    async def _post(self, request: Request) -> Response:
        principal = await self.principal(request)
        if isinstance(principal, Response):
            return principal
        problem = media_problem(request)
        if problem is not None:
            return problem
        body = await read_body(request, self.http.max_body_bytes)
        if isinstance(body, Response):
            return body
        headers = {name: request.headers.getlist(name) for name in _HEADERS_USED}
        call = functools.partial(exchange, self.server, body, headers, principal)
        reply = await in_thread(call, self.http.request_timeout)
        if reply.body is None:
            return Response(status_code=reply.status)
        return Response(reply.body, reply.status, media_type="application/json")

    async def metadata(self, request: Request) -> Response:
        return json_response(200, resource_metadata(self.base_url(request), self.http))


def build_http_app(server: McpServer, auth: Authenticator, http: HttpSettings) -> Starlette:
    """The ASGI application for an already composed server and authenticator."""
    endpoint = McpEndpoint(server, auth, http)
    routes = [Route("/mcp", endpoint.post, methods=["POST"])]
    if auth.requires_credentials:
        for path in (METADATA_PATH, METADATA_PATH + "/mcp"):
            routes.append(Route(path, endpoint.metadata, methods=["GET"]))
    app = Starlette(routes=routes)
    app.add_middleware(OriginHostGuard, http=http)
    return app
