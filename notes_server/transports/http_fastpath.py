"""`POST /mcp` in one pass: the hot path of every modern HTTP request, without Starlette.

Every request used to cross Starlette's two layers, our five middleware (each re-reading the
headers and wrapping `send`), the router and request/response objects: about as much CPU as the
exchange itself. Here one pass over the raw headers feeds the same checks, in the order the
middleware makes them, through the same functions: Host/Origin (`http_guard`), authentication
(`http_auth`, 401 with its challenge), Accept and Content-Type (`http_endpoint`), then the body
under the size and time bounds (`http_limits`, 413/408). The body is decoded once and answered by
the same pipeline (`http_exchange.answer`, on the loop or in a worker thread as `McpEndpoint`
decides), with one `http.response.start` and one body, CORS headers added for an allowed Origin.
A failure is answered as `http_errors` answers it (500/503).

2025-era session traffic (an `Mcp-Session-Id`, with legacy sessions enabled) takes the same
checks and body read, then goes to the session handler (`McpEndpoint.legacy`) as the stack's
endpoint would hand it over, and its answer (JSON, 202 or an SSE stream) is sent with the CORS
headers of an allowed Origin: a round's four POSTs skip the stack too.

Whatever is not the plain case goes to the full Starlette app (`fallback`) untouched, so it keeps
its exact behaviour: other paths and methods, a refused Host or Origin (403), an
`Mcp-Session-Id` without legacy sessions; and, once the body is read, a body that is not a
modern request or notification (initialize, a malformed message, a client's response outside
a session) or that asks for progress (an SSE stream), or session traffic that the session
handler leaves to the modern pipeline: the body is replayed to the full app, which answers it
exactly as before.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from notes_server.config import HttpSettings
from notes_server.protocol.envelope import DecodeFailure, decode
from notes_server.protocol.meta import names_version
from notes_server.transports.http.endpoint import MCP_PATH, McpEndpoint, media_problem_for
from notes_server.transports.http.exchange import Reply, answer
from notes_server.transports.http.middleware.auth import PrincipalLookup, base_url_for, unauthorized
from notes_server.transports.http.middleware.cors import EXPOSE_HEADERS
from notes_server.transports.http.middleware.errors import failure_response
from notes_server.transports.http.middleware.guard import HostOriginCheck
from notes_server.transports.http.middleware.limits import (
    BODY_READ_TIMEOUT_S,
    BodyTooLarge,
    BodyTooSlow,
    BoundedBody,
)
from notes_server.transports.http.progress import may_stream
from notes_server.transports.http.responses import error_response

log = logging.getLogger("notes_server.http")

# The request headers this path reads, by their raw (lower-case) ASGI names.
_WANTED = frozenset(
    {
        b"host",
        b"origin",
        b"authorization",
        b"accept",
        b"content-type",
        b"content-length",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
    }
)
_JSON = (b"content-type", b"application/json")
_EXPOSE = (b"access-control-expose-headers", EXPOSE_HEADERS.encode("latin-1"))
_VARY = (b"vary", b"Origin")
# Header values seen to pass the Host and media-type checks (a client repeats its own on every
# request); bounded, so that varied values cannot grow it.
_PASSED_MAX = 256

Answer = Callable[[Scope, Receive, Send], Awaitable[None]]


def _headers_of(scope: Scope) -> dict[bytes, list[str]]:
    """The values of the headers this path reads, in order, as Starlette decodes them."""
    found: dict[bytes, list[str]] = {}
    for name, value in scope["headers"]:
        if name in _WANTED:
            found.setdefault(name, []).append(value.decode("latin-1"))
    return found


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the already read body over once, then the connection's own."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _with_cors(send: Send, origin: str) -> Send:
    """What `CorsMiddleware` adds to the responses of an allowed Origin."""

    async def send_with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message["headers"], *_cors_headers(origin)]
        await send(message)

    return send_with_cors


def _cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), _EXPOSE, _VARY]


class McpPostFastPath:
    """The ASGI app in front of the Starlette one: `POST /mcp` here, everything else there."""

    def __init__(
        self,
        fallback: ASGIApp,
        endpoint: McpEndpoint,
        lookup: PrincipalLookup,
        http: HttpSettings,
    ) -> None:
        self.fallback = fallback
        self.endpoint = endpoint
        self.lookup = lookup
        self.http = http
        self.check = HostOriginCheck(http)
        self.limit = http.max_body_bytes
        self.body_timeout = BODY_READ_TIMEOUT_S
        self.passed: set[tuple[str, ...]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] != MCP_PATH
            or scope.get("root_path")
        ):
            await self.fallback(scope, receive, send)
            return
        try:
            outcome = await self.handle(scope, receive)
        except Exception as exc:
            await failure_response(exc)(scope, receive, send)
            return
        if isinstance(outcome, tuple):
            reply, origin = outcome
            await self.send_reply(send, reply, origin)
        elif outcome is not None:
            await outcome(scope, receive, send)

    async def handle(
        self, scope: Scope, receive: Receive
    ) -> tuple[Reply, str | None] | Answer | None:
        """The reply (with the Origin to answer with CORS), another app to answer with, or
        None when the client went away before its body was read."""
        found = _headers_of(scope)
        origins = found.get(b"origin", [])
        hosts = found.get(b"host", [])
        in_session = b"mcp-session-id" in found
        if (in_session and self.endpoint.legacy is None) or self.host_problem(hosts, origins):
            return self.fallback
        origin = origins[0] if origins else None
        authorization = found.get(b"authorization", [])
        principal = await self.lookup(authorization)
        if principal is None:
            host = found.get(b"host", [""])[0]
            url = base_url_for(host, scope["scheme"], self.http)
            return self.cors(unauthorized(url, presented=bool(authorization)), origin)
        accept = found.get(b"accept", [""])[0]
        content_type = found.get(b"content-type", [""])[0]
        if ("media", accept, content_type) not in self.passed:
            problem = media_problem_for(accept, content_type)
            if problem is not None:
                return self.cors(problem, origin)
            self.remember(("media", accept, content_type))
        declared = found.get(b"content-length", [None])[0]
        try:
            body = await self.read_body(receive, declared)
        except BodyTooLarge:
            return self.cors(error_response(413, "Payload Too Large"), origin)
        except BodyTooSlow:
            return self.cors(error_response(408, "Request Timeout"), origin)
        if body is None:
            log.debug("client disconnected before its request was read")
            return None
        if in_session:
            return await self.in_session(scope, receive, body, principal, origin)
        try:
            message = decode(body)
        except DecodeFailure:
            message = None
        if message is None or not names_version(message.params) or may_stream(body):
            replayed = _replay(body, receive)
            return lambda scope, _receive, send: self.fallback(scope, replayed, send)
        headers = {
            "mcp-protocol-version": found.get(b"mcp-protocol-version", []),
            "mcp-method": found.get(b"mcp-method", []),
            "mcp-name": found.get(b"mcp-name", []),
        }
        call = functools.partial(answer, self.endpoint.server, message, headers, principal)
        if self.endpoint.quick(headers):
            return call(), origin  # cheaper than a hand-off; see `McpEndpoint.quick`
        return await self.endpoint.threads.run(call, self.http.request_timeout), origin

    async def in_session(
        self, scope: Scope, receive: Receive, body: bytes, principal: str, origin: str | None
    ) -> Answer:
        """2025-era session traffic, answered as `McpEndpoint.post` answers it after the
        stack's checks; what the session handler leaves to the modern pipeline is replayed."""
        legacy = self.endpoint.legacy
        assert legacy is not None
        answer = await legacy.post(Request(scope), body, principal)
        if answer is None:
            replayed = _replay(body, receive)
            return lambda scope, _receive, send: self.fallback(scope, replayed, send)
        return self.cors(answer, origin)

    def host_problem(self, hosts: list[str], origins: list[str]) -> bool:
        """`HostOriginCheck.problem`, remembered for a lone Host without an Origin."""
        if len(hosts) != 1 or origins:
            return self.check.problem(hosts, origins) is not None
        if ("host", hosts[0]) in self.passed:
            return False
        if self.check.problem(hosts, origins) is not None:
            return True
        self.remember(("host", hosts[0]))
        return False

    def remember(self, passed: tuple[str, ...]) -> None:
        if len(self.passed) >= _PASSED_MAX:
            self.passed.clear()
        self.passed.add(passed)

    async def read_body(self, receive: Receive, declared: str | None) -> bytes | None:
        """The whole body within the bounds, or None when the client went away."""
        bounded = BoundedBody(receive, declared, self.limit, self.body_timeout)
        chunks: list[bytes] = []
        while True:
            message = await bounded()
            if message["type"] != "http.request":
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    @staticmethod
    def cors(response: Answer, origin: str | None) -> Answer:
        """A refusal behind the CORS layer gets its headers too, as it did in the stack."""
        if origin is None:
            return response
        return lambda scope, receive, send: response(scope, receive, _with_cors(send, origin))

    @staticmethod
    async def send_reply(send: Send, reply: Reply, origin: str | None) -> None:
        """One response, with the headers Starlette's `Response` would have sent."""
        body = b"" if reply.body is None else reply.body
        headers = [(b"content-length", str(len(body)).encode("latin-1"))]
        if reply.body is not None:
            headers.append(_JSON)
        if origin is not None:
            headers.extend(_cors_headers(origin))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
