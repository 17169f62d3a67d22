"""MCP 2025-11-25 (also 2025-06-18, 2025-03-26) Streamable HTTP sessions on `/mcp`.

Routing per message, as on stdio: a request whose `_meta` names a protocol version is modern and
goes to the stateless pipeline untouched (a session id on it is ignored). Otherwise:
- `initialize` starts a session: a random `Mcp-Session-Id` (32 bytes, URL-safe) comes back with
  the result; the database keeps its SHA-256, the principal, the negotiated version and the
  client's capabilities, so every worker can serve it;
- later messages must carry that header: without it 400 (a request without `_meta` is told to
  send `_meta` or `initialize` first), unknown, expired or another principal's session 404;
  `MCP-Protocol-Version`, when sent, must be the negotiated version (400);
- requests are translated by `compat_2025.session.LegacyHandler`; a `tools/call` that needs the
  user's input continues on an SSE stream (`http_stream`); notifications and the
  client's responses to our questions are accepted with 202;
- a client that declared `roots` is asked `roots/list` on the SSE stream of its first request
  that depends on them (tools/call, resources/*), and again after `notifications/initialized`
  or `.../roots/list_changed`; the answer is kept in the session row (`compat_2025.roots`);
- `logging/setLevel` keeps the level in the session row; later `tools/call` and `prompts/get`
  requests carry it to the core and are answered on an SSE stream with their log messages;
- `resources/subscribe` / `resources/unsubscribe` are kept in the database
  (`http_subscriptions`), and `GET /mcp` with the header opens the session's one stream of change
  notifications, resumable with `Last-Event-ID` at any worker (`http_get_stream`); a server
  without change subscriptions answers GET 405 and declares no `subscribe`;
- `DELETE /mcp` with the header ends the session (204), and its GET stream with it.

The credential on every request stays the security boundary; a session only remembers what
was negotiated.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from starlette.datastructures import Headers
from starlette.responses import Response

from notes_server.compat_2025 import http_subscriptions
from notes_server.compat_2025.http_get_stream import (
    GetStreamResponse,
    LocalStreams,
    open_stream,
    release,
)
from notes_server.compat_2025.http_sessions import (
    LegacyHttpOptions,
    SessionStore,
    session_hash,
)
from notes_server.compat_2025.http_stream import (
    MAX_ANSWER_BYTES,
    Conversation,
    Wakeups,
    request_key,
)
from notes_server.compat_2025.roots import ROOTS_CHANGED, declares_roots
from notes_server.compat_2025.rounds import needs_input
from notes_server.compat_2025.session import LegacyHandler, LegacySession, start_session
from notes_server.compat_2025.subscriptions import METHODS as SUBSCRIBE_METHODS
from notes_server.compat_2025.subscriptions import session_hub
from notes_server.compat_2025.translate import (
    LOGGED_METHODS,
    NOT_INITIALIZED,
    is_modern,
    is_response,
)
from notes_server.errors import InvalidParams, McpError, to_wire
from notes_server.protocol.envelope import (
    DecodeFailure,
    Notification,
    Request,
    decode,
    encode_error,
    encode_result,
    parse_json,
)
from notes_server.protocol.meta import ClientMeta
from notes_server.protocol.progress import progress_token
from notes_server.protocol.server import McpServer
from notes_server.protocol.versions import LATEST
from notes_server.transports.http.responses import error_response
from notes_server.transports.http.threads import WorkerThreads

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
SESSION_NOT_FOUND = "Session not found: it ended or expired; send initialize to start a new one"
_T = TypeVar("_T")
log = logging.getLogger("notes_server.legacy")


class HttpRequest(Protocol):
    """What this handler reads of an HTTP request: its headers (the `/mcp` handler's request
    head, or a Starlette `Request`)."""

    @property
    def headers(self) -> Headers: ...


class LegacyHttp:
    def __init__(
        self, server: McpServer, options: LegacyHttpOptions, threads: WorkerThreads, timeout: float
    ) -> None:
        self.server = server
        self.store = SessionStore(options)
        self.threads = threads
        self.timeout = timeout
        self.wait_s = options.answer_wait_s
        self.roots_wait_s = options.roots_wait_s
        self.wakeups = Wakeups()
        self.streams = LocalStreams()
        # The GET stream and `resources/subscribe` exist when the server serves subscriptions.
        self.listen = session_hub(server)
        self.subscribes = self.listen is not None

    @property
    def methods(self) -> frozenset[str]:
        return frozenset({"DELETE", "GET"} if self.subscribes else {"DELETE"})

    @property
    def sweep_every_s(self) -> float:
        return self.store.options.sweep_every_s

    def sweep(self) -> None:
        """Expired sessions and questions out of the database (blocking: a worker thread)."""
        swept = self.store.sweep()
        if swept:
            log.debug("swept %d expired sessions", swept)

    async def run(self, func: Callable[[], _T]) -> _T:
        return await self.threads.run(func, self.timeout)

    async def post(
        self, http: HttpRequest, body: bytes, principal: str
    ) -> Response | Conversation | None:
        """The answer when this POST is legacy traffic; None hands it to the modern pipeline."""
        ids = http.headers.getlist(SESSION_HEADER)
        try:
            message: Request | Notification | dict[str, Any] = decode(body)
        except DecodeFailure:
            raw = _parse(body)
            if not ids or not is_response(raw):
                return None
            message = raw
        if not isinstance(message, dict) and is_modern(message.params):
            return None
        if isinstance(message, Request) and message.method == "initialize":
            if http.headers.get(VERSION_HEADER) == LATEST:
                return None  # a modern client that forgot `_meta`: the pipeline says so
            return await self._initialize(message, principal)
        if not ids:
            if isinstance(message, Request) and "_meta" not in message.params:
                error = to_wire(InvalidParams(NOT_INITIALIZED))
                return _json(400, encode_error(message.id, error))
            return None
        return await self._in_session(http, message, ids, principal)

    async def delete(self, http: HttpRequest, principal: str) -> Response:
        ids = http.headers.getlist(SESSION_HEADER)
        if len(ids) != 1:
            return error_response(400, "Bad Request: DELETE needs one Mcp-Session-Id header")
        key = session_hash(ids[0].strip())
        ended = await self.run(lambda: self.store.repo.end(key, principal))
        if not ended:
            return error_response(404, SESSION_NOT_FOUND)
        self.streams.wake(key)  # its GET stream here ends now (elsewhere at its next check)
        return Response(status_code=204)

    async def get(self, http: HttpRequest, principal: str) -> Response | GetStreamResponse:
        """`GET /mcp`: the session's stream of change notifications (`http_get_stream`)."""
        if not self.subscribes:
            return error_response(405, "Method Not Allowed", headers={"Allow": "DELETE, POST"})
        ids = http.headers.getlist(SESSION_HEADER)
        if len(ids) != 1:
            return error_response(
                400,
                "Bad Request: GET /mcp opens a 2025-11-25 session's stream and needs one "
                "Mcp-Session-Id header",
            )
        if "text/event-stream" not in http.headers.get("accept", ""):
            return error_response(406, "Not Acceptable: GET /mcp needs Accept: text/event-stream")
        key = session_hash(ids[0].strip())
        session = await self._session(http, key, principal)
        if isinstance(session, Response):
            return session
        resume = http.headers.getlist("last-event-id")
        last = resume[0] if len(resume) == 1 else None
        if len(resume) > 1:
            return error_response(400, "Bad Request: Last-Event-ID header sent more than once")
        engine = self.store.repo.engine
        store = self.store

        def lookup() -> LegacySession | None:
            found = store.lookup(key, principal)
            if found is None:
                return None
            if found[1]:
                store.refresh(key)  # an open stream keeps its session alive
            return found[0]

        opened = await self.run(
            lambda: open_stream(key, principal, last, self.server, engine, lookup)
        )
        if isinstance(opened, Response):
            return opened
        self.streams.wake(key)  # an older stream of the session here ends now
        return GetStreamResponse(
            opened, self.run, self.streams, lambda: release(engine, key, opened.stream_id)
        )

    async def _initialize(self, request: Request, principal: str) -> Response:
        try:
            session = start_session(request.params)
        except McpError as exc:
            return _json(400, encode_error(request.id, to_wire(exc)))
        handler = LegacyHandler(
            self.server, principal, session, announces_subscriptions=self.subscribes
        )
        result, error = await self.run(lambda: handler.initialize(request.id))
        if error is not None:
            return _json(200, encode_error(request.id, error))
        assert result is not None
        session_id = await self.run(lambda: self.store.open(principal, session))
        response = _json(200, encode_result(request.id, result))
        response.headers["Mcp-Session-Id"] = session_id
        return response

    async def _in_session(
        self,
        http: HttpRequest,
        message: Request | Notification | dict[str, Any],
        ids: list[str],
        principal: str,
    ) -> Response | Conversation:
        if len(ids) != 1:
            return error_response(400, "Bad Request: Mcp-Session-Id header sent more than once")
        key = session_hash(ids[0].strip())
        session = await self._session(http, key, principal)
        if isinstance(session, Response):
            return session
        if isinstance(message, dict):
            await self._deliver(key, message)
            return Response(status_code=202)
        if isinstance(message, Notification):
            await self._notice(key, message, principal, session)
            return Response(status_code=202)
        handler = LegacyHandler(self.server, principal, session, grants=self.store.options.grants)
        return await self._request(key, handler, message)

    async def _session(
        self, http: HttpRequest, key: str, principal: str
    ) -> LegacySession | Response:
        """The principal's live session of this key, or the refusal: 404 when there is none,
        400 when the request names another protocol version than the session negotiated."""
        session = await self._find(key, principal)
        if session is None:
            return error_response(404, SESSION_NOT_FOUND)
        versions = http.headers.getlist(VERSION_HEADER)
        if versions and versions != [session.version]:
            return error_response(
                400,
                f"Bad Request: MCP-Protocol-Version must be {session.version}, the version "
                "this session negotiated",
            )
        return session

    async def _find(self, key: str, principal: str) -> LegacySession | None:
        """The session: read on the event loop when that is one local indexed statement
        (embedded SQLite), else in a worker thread; its expiry, when due, in a thread."""
        store = self.store
        if store.runs_on_loop:
            found = store.lookup(key, principal)
        else:
            found = await self.run(lambda: store.lookup(key, principal))
        if found is None:
            return None
        session, refresh_due = found
        if refresh_due:
            await self.run(lambda: store.refresh(key))
        return session

    async def _deliver(self, key: str, response: dict[str, Any]) -> None:
        """A client's answer to one of our questions: into the database, then wake the stream
        if it is held in this process (another worker finds it by polling)."""
        question = response.get("id")
        text = json.dumps(response, separators=(",", ":"))
        if not isinstance(question, str) or len(text) > MAX_ANSWER_BYTES:
            log.info("dropped an answer that is too large or has no string id")
            return
        now = self.store.options.clock()
        if await self.run(lambda: self.store.repo.answer(key, question, text, now)):
            self.wakeups.wake(key, question)

    async def _notice(
        self, key: str, notice: Notification, principal: str, session: LegacySession
    ) -> None:
        if notice.method in ROOTS_CHANGED and declares_roots(session.capabilities):
            # Asked again on the stream of the next request that depends on them.
            await self.run(lambda: self.store.repo.forget_roots(key, principal))
            return
        if notice.method != "notifications/cancelled":
            return
        cancelled = notice.params.get("requestId")
        if isinstance(cancelled, (str, int)) and not isinstance(cancelled, bool):
            client_key = request_key(cancelled)
            await self.run(lambda: self.store.cancel(key, client_key, self.wait_s))

    async def _request(
        self, key: str, handler: LegacyHandler, request: Request
    ) -> Response | Conversation:
        if self.listen is not None and request.method in SUBSCRIBE_METHODS:
            engine, principal = self.store.repo.engine, handler.principal
            method, params, check = request.method, request.params, self.listen.check_uri
            result, error = await self.run(
                lambda: http_subscriptions.handle(engine, key, principal, method, params, check)
            )
            if error is not None:
                return _json(200, encode_error(request.id, error))
            return _json(200, encode_result(request.id, result or {}))
        refused = handler.refusal(request.method)
        if refused is None and request.method == "logging/setLevel":
            return await self._set_level(key, handler, request)
        if refused is None and (
            handler.roots_needed(request.method) or _streams(request, handler.session)
        ):
            return self._conversation(key, handler, request, None)
        if refused is None:
            if self._runs_on_loop(request):  # cheaper than a hand-off, as on the modern path
                prepared, (result, error) = handler.start(request)
            else:
                prepared, (result, error) = await self.run(lambda: handler.start(request))
            if request.method == "tools/call" and needs_input(result):
                assert result is not None
                return self._conversation(key, handler, prepared.request, result, prepared.meta)
            refused = handler.finish(request.method, result, error)
        result, error = refused
        if error is not None:
            return _json(200, encode_error(request.id, error))
        assert result is not None
        return _json(200, encode_result(request.id, result))

    async def _set_level(self, key: str, handler: LegacyHandler, request: Request) -> Response:
        """`logging/setLevel`: kept in the session row, so every worker stamps it."""
        try:
            level = handler.chosen_level(request.params)
        except McpError as exc:
            return _json(200, encode_error(request.id, to_wire(exc)))
        await self.run(lambda: self.store.set_log_level(key, handler.principal, level))
        return _json(200, encode_result(request.id, {}))

    def _runs_on_loop(self, request: Request) -> bool:
        """A request the server runs on the loop (`McpServer.runs_on_loop`: a static result, or a
        bounded local read such as `notes_read` on embedded SQLite), named in full: a tool call
        without `workspaceUri` first reads the grants to fill it in."""
        if request.method != "tools/call":
            return self.server.runs_on_loop(request.method, None)
        name, arguments = request.params.get("name"), request.params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return False
        return "workspaceUri" in arguments and self.server.runs_on_loop(request.method, name)

    def _conversation(
        self,
        key: str,
        handler: LegacyHandler,
        request: Request,
        required: dict[str, Any] | None,
        meta: ClientMeta | None = None,
    ) -> Conversation:
        """The SSE answer: `required` None runs the first round on the stream, else the rounds
        continue from it (`request` prepared, with the `meta` read from it)."""
        return Conversation(
            handler,
            request,
            required,
            meta=meta,
            store=self.store,
            session=key,
            run=self.run,
            wakeups=self.wakeups,
            wait_limit=self.wait_s,
            roots_wait=self.roots_wait_s,
            polls_on_loop=self.store.runs_on_loop,
        )


def _streams(request: Request, session: LegacySession) -> bool:
    """A `tools/call` that asked for progress, or a request that may log in a session that
    asked for log messages, is answered on a stream that can carry them."""
    if request.method == "tools/call" and progress_token(request.params) is not None:
        return True
    return session.log_level is not None and request.method in LOGGED_METHODS


def _parse(body: bytes) -> Any:
    try:
        return parse_json(body)
    except DecodeFailure:
        return None


def _json(status: int, body: bytes) -> Response:
    return Response(body, status, media_type="application/json")
