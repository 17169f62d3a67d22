"""`/mcp`: one handler for every message of both eras, its checks one chain composed once.

`McpPostHandler` answers every request to `/mcp`; Starlette serves the other routes beside it
(`http.app`). The checks come from `middleware/`, the same functions Starlette's routes use, in
this order, each able to end the request with its refusal:

1. errors (around everything): a failure is a JSON-RPC -32603, 500 (503 on a timeout);
2. guard: Host and Origin (403, DNS rebinding); nothing else runs for a refused request;
3. CORS: a preflight is answered (204); from here on an allowed Origin's answer, refusals
   included, carries the CORS headers;
4. auth: the principal, or 401 with the RFC 9728 challenge;
5. media (POST): Accept (406), Content-Type (415);
6. limits (POST): the whole body, read once under the size and time bounds (413, 408).

Then the method. A POST's era is chosen once, by `answer_post`: a message whose `_meta` names
a protocol version is modern; with 2025-era sessions enabled (`legacy.http`, composed by the
app) anything else is offered to the session handler, which answers it or declines (None: a
modern client's `initialize`, an undecodable body outside a session...), and then the modern
pipeline answers that same body. Modern responses are `application/json`, except that a request
whose tool reports progress (`_meta.progressToken`) or logs gets `text/event-stream`
(`progress`); they hold nothing per client, and a modern request's `Mcp-Session-Id` is ignored.
A modern request runs on the event loop when its standard headers name one the server runs
there (`McpServer.runs_on_loop`: cheaper than a hand-off), else in a worker thread.
A GET from a 2025 client opens its session's stream of change notifications
(`compat_2025.http_get_stream`; 405 naming `DELETE, POST` when the server serves no change
subscriptions); DELETE ends a 2025 session; a GET or DELETE naming a 2026-07-28
`MCP-Protocol-Version` is 405 with `Allow: POST` (that revision has no sessions and no GET
stream), as is every other method without sessions.

No Starlette `Request` is built: the head is read once (`request.McpRequest`), and the plain
reply goes out as one `http.response.start` and one body.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from notes_server.config import HttpSettings
from notes_server.errors import INTERNAL_ERROR
from notes_server.protocol.envelope import (
    DecodeFailure,
    Notification,
    Request,
    decode,
    encode_error,
    parse_json,
    request_id_of,
)
from notes_server.protocol.meta import names_version
from notes_server.protocol.server import McpServer, internal_error
from notes_server.protocol.versions import MODERN_VERSIONS
from notes_server.transports.http.exchange import Reply, answer, open_listen, undecodable
from notes_server.transports.http.listen import ListenResponse
from notes_server.transports.http.middleware.auth import AuthCheck, PrincipalLookup
from notes_server.transports.http.middleware.cors import CorsCheck, cors_headers, with_cors
from notes_server.transports.http.middleware.errors import answer_or_fail, failure_response
from notes_server.transports.http.middleware.guard import GuardCheck, OriginPolicy
from notes_server.transports.http.middleware.limits import BodyCheck
from notes_server.transports.http.middleware.media import MediaCheck
from notes_server.transports.http.progress import ProgressStream, Relay, may_stream
from notes_server.transports.http.request import McpRequest
from notes_server.transports.http.responses import error_response
from notes_server.transports.http.threads import RequestTimeout, WorkerThreads

MCP_PATH = "/mcp"
_JSON = (b"content-type", b"application/json")

#: One step of the chain: None to go on, or the answer that ends the request (a refusal).
Check = Callable[[McpRequest], Awaitable[ASGIApp | None]]


class SessionTraffic(Protocol):
    """2025-era Streamable HTTP sessions (`legacy.http.LegacyHttp`)."""

    async def post(self, request: McpRequest, body: bytes, principal: str) -> ASGIApp | None:
        """The answer when the POST is session traffic; None when it is not (modern)."""

    async def delete(self, request: McpRequest, principal: str) -> ASGIApp:
        """`DELETE /mcp`: end the session."""

    async def get(self, request: McpRequest, principal: str) -> ASGIApp:
        """`GET /mcp`: the session's stream of change notifications (or 405)."""

    @property
    def methods(self) -> frozenset[str]:
        """The methods besides POST the sessions serve at `/mcp` (`Allow` of a 405)."""

    @property
    def sweep_every_s(self) -> float:
        """How often `sweep` runs."""

    def sweep(self) -> None:
        """Delete expired session state (blocking; run in a worker thread, on a timer)."""


LegacyFactory = Callable[[WorkerThreads], SessionTraffic]


def check_chain(
    http: HttpSettings, lookup: PrincipalLookup, methods: Sequence[str]
) -> tuple[Check, ...]:
    """The checks of `/mcp`, in their order (errors wrap them all, in `McpPostHandler`);
    `methods`: what a CORS preflight is told is served here."""
    return (
        GuardCheck(http),
        CorsCheck(OriginPolicy(http), methods),
        AuthCheck(lookup, http),
        MediaCheck(),
        BodyCheck(http.max_body_bytes),
    )


class McpPostHandler:
    """The ASGI app of `/mcp`: the chain, then the answer of one era."""

    def __init__(
        self,
        server: McpServer,
        http: HttpSettings,
        threads: WorkerThreads,
        lookup: PrincipalLookup,
        sessions: SessionTraffic | None = None,
        methods: Sequence[str] = ("POST",),
    ) -> None:
        """`methods`: what a CORS preflight is told `/mcp` serves (extensions' included)."""
        self.server = server
        self.http = http
        self.threads = threads
        self.sessions = sessions
        self.checks = check_chain(http, lookup, methods)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = McpRequest(scope, receive)
        try:
            outcome = await self.outcome(request)
        except Exception as exc:
            await failure_response(exc)(scope, receive, send)
            return
        origin = request.cors_origin
        if isinstance(outcome, Reply):
            await self.send_reply(send, outcome, origin)
            return
        if origin is not None:
            outcome = _with_cors(outcome, origin)
        await answer_or_fail(outcome, scope, receive, send)  # a failure: without CORS headers

    async def outcome(self, request: McpRequest) -> Reply | ASGIApp:
        """The refusal of the first check that refuses, else this method's answer."""
        for check in self.checks:
            refusal = await check(request)
            if refusal is not None:
                return refusal
        if request.method == "POST":
            return await self.answer_post(request)
        return await self.answer_other(request)

    async def answer_post(self, request: McpRequest) -> Reply | ASGIApp:
        """The era, chosen once here; the body was read once, by the chain."""
        body, principal = request.body, request.principal
        message: Request | Notification | None = None
        try:
            message = decode(body)
        except DecodeFailure as exc:
            failure = exc
        if self.sessions is not None and (message is None or not names_version(message.params)):
            session_answer = await self.sessions.post(request, body, principal)
            if session_answer is not None:
                return session_answer
        if message is None:
            return undecodable(failure)
        headers = {
            "mcp-protocol-version": request.all(b"mcp-protocol-version"),
            "mcp-method": request.all(b"mcp-method"),
            "mcp-name": request.all(b"mcp-name"),
        }
        if isinstance(message, Request) and self.server.serves_stream(message):
            return await self.listen(message, headers, principal)
        if may_stream(body):
            return await self.with_progress(message, body, headers, principal)
        call = functools.partial(answer, self.server, message, headers, principal)
        if self.runs_on_loop(headers):
            return call()  # cheaper than a hand-off; a body that differs fails the header check
        return await self.threads.run(call, self.http.request_timeout)

    async def answer_other(self, request: McpRequest) -> ASGIApp:
        """GET, DELETE and the rest: only a 2025 session's DELETE and GET stream are served."""
        if self.sessions is None:
            return not_allowed("POST")
        if request.method in ("GET", "HEAD", "DELETE") and modern_version(
            request.all(b"mcp-protocol-version")
        ):
            return not_allowed("POST")
        if request.method == "DELETE":
            return await self.sessions.delete(request, request.principal)
        if request.method == "GET" and "GET" in self.sessions.methods:
            return await self.sessions.get(request, request.principal)
        return not_allowed(", ".join(sorted({"POST", *self.sessions.methods})))

    async def listen(
        self, message: Request, headers: dict[str, list[str]], principal: str
    ) -> Reply | ASGIApp:
        """A long-lived request: opened on a worker thread (it reads the database), then
        served by the event loop alone (`listen.ListenResponse`)."""
        opening = functools.partial(open_listen, self.server, message, headers, principal)
        opened = await self.threads.run(opening, self.http.request_timeout)
        return opened if isinstance(opened, Reply) else ListenResponse(opened)

    async def with_progress(
        self,
        message: Request | Notification,
        body: bytes,
        headers: dict[str, list[str]],
        principal: str,
    ) -> Reply | ASGIApp:
        """Plain JSON unless the handler reports progress before it replies; then an SSE
        stream of the notifications and the reply (`progress`)."""
        relay = Relay()
        call = functools.partial(answer, self.server, message, headers, principal, relay.emit)
        work = asyncio.ensure_future(self.threads.run(call, self.http.request_timeout))
        first = await relay.first(work)
        if first is None:
            return work.result()
        return ProgressStream(relay, first, work, functools.partial(_final, body))

    def runs_on_loop(self, headers: dict[str, list[str]]) -> bool:
        """The standard headers name a request the server runs on the event loop
        (`runs_on_loop`). They are checked against the body before dispatch (-32020), so they
        cannot smuggle other work onto the loop."""
        methods, names = headers["mcp-method"], headers["mcp-name"]
        if len(methods) != 1 or len(names) > 1:
            return False
        return self.server.runs_on_loop(methods[0], names[0] if names else None)

    @staticmethod
    async def send_reply(send: Send, reply: Reply, origin: str | None) -> None:
        """One response, with the headers a Starlette `Response` of the reply would have."""
        body = b"" if reply.body is None else reply.body
        headers = [(b"content-length", str(len(body)).encode("latin-1"))]
        if reply.body is not None:
            headers.append(_JSON)
        if origin is not None:
            headers.extend(cors_headers(origin))
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _with_cors(app: ASGIApp, origin: str) -> ASGIApp:
    """`app` answering with the CORS headers of an allowed Origin."""

    async def answer_with_cors(scope: Scope, receive: Receive, send: Send) -> None:
        await app(scope, receive, with_cors(send, origin))

    return answer_with_cors


def modern_version(values: list[str]) -> bool:
    """The request names one 2026-07-28-era `MCP-Protocol-Version`."""
    return len(values) == 1 and values[0].strip() in MODERN_VERSIONS


def not_allowed(allow: str) -> Response:
    """405 in the shape of Starlette's own (`responses.http_exception`)."""
    return error_response(405, "Method Not Allowed", headers={"Allow": allow})


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
