"""A 2025-11-25 HTTP session's standalone GET stream: its change notifications, resumable.

`GET /mcp` with the session's `Mcp-Session-Id` (and `Accept: text/event-stream`) opens it, on
any worker or instance: everything it sends is computed from the database (the session's
subscriptions, `legacy_subscriptions`, and the change log), so nothing ties the session to the
process that served its `resources/subscribe`. The stream first sends a priming event (an id,
no data) naming its position, then the events of each later committed change
(`session_events`), each with its id; a client that reconnects with `Last-Event-ID` is sent
exactly the events after that one, replayed from the change log.

What wakes it: the engine's change feed (`store.changes.feed`, one per process), a local DELETE
or a newer GET of the same session (`LocalStreams`), and a keep-alive tick every KEEPALIVE_S,
at which it also checks that its session lives and it is still the session's one stream (so a
DELETE or a newer GET at another instance ends it by then at the latest). Before each delivery
the principal's grants are read again: nothing about a workspace it can no longer read. The
credential that opened the stream is checked again before each delivery and each keep-alive
(`transports.http.stream_end`): revoked or expired, the stream ends, nothing more sent.
SIGTERM/SIGINT end the stream at once (its response completes). A reader that does not take an
event within `send_timeout_s` is dropped: the stream ends (it may resume with `Last-Event-ID`);
what is pending is at most one read of READ_LIMIT changes. On PostgreSQL a missing sequence
below a read one is waited for (at most GAP_WAIT_S) before later events are sent, so the order
of ids is the order of the log and a resumption misses nothing committed late.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from notes_server.compat_2025.session import LegacyHandler, LegacySession
from notes_server.compat_2025.session_events import (
    Event,
    NotOurs,
    Position,
    event_id,
    events_after,
    read_position,
    stream_tag,
)
from notes_server.protocol.server import McpServer
from notes_server.store import changes, session_subscriptions
from notes_server.store.engine import read_tx, write_tx
from notes_server.tools.scope import usable_workspaces
from notes_server.transports.http.progress import SSE_HEADERS
from notes_server.transports.http.responses import error_response
from notes_server.transports.http.stream_end import StreamEnd

if TYPE_CHECKING:
    from sqlalchemy import Engine

log = logging.getLogger("notes_server.legacy")
_T = TypeVar("_T")

KEEPALIVE_S = 15.0
SEND_TIMEOUT_S = 30.0
READ_LIMIT = 200
NOT_OURS = (
    "Bad Request: Last-Event-ID is not an event id of this session's GET stream; reconnect "
    "without it (and read the subscribed resources again)"
)
TOO_OLD = (
    "Gone: the change log no longer keeps the changes after this Last-Event-ID (it keeps "
    "24 hours, at most 100000 changes); reconnect without it and read the subscribed "
    "resources again"
)
_KEEPALIVE = {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}

Lookup = Callable[[], LegacySession | None]


class Runner(Protocol):
    """Runs blocking work in a worker thread (`LegacyHttp.run`)."""

    def __call__(self, func: Callable[[], _T]) -> Awaitable[_T]: ...


class LocalStreams:
    """The GET streams this process serves, by session key, to end one at once (a DELETE or
    a newer GET of its session here); elsewhere it ends at its next check."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: dict[str, set[SessionStream]] = {}

    def add(self, stream: SessionStream) -> None:
        with self._lock:
            self._streams.setdefault(stream.key, set()).add(stream)

    def remove(self, stream: SessionStream) -> None:
        with self._lock:
            found = self._streams.get(stream.key)
            if found is not None:
                found.discard(stream)
                if not found:
                    del self._streams[stream.key]

    def wake(self, key: str) -> None:
        with self._lock:
            found = list(self._streams.get(key, ()))
        for stream in found:
            stream.wake()

    def count(self) -> int:
        with self._lock:
            return sum(len(found) for found in self._streams.values())


class Read(NamedTuple):
    """One read of a stream: the events to send, whether the stream ended (its session is
    gone or a newer GET replaced it), the seconds until a held gap is given up, and whether
    the log has more after this read."""

    events: tuple[Event, ...] = ()
    ended: bool = False
    hold: float | None = None
    more: bool = False


@dataclass(eq=False)  # each stream is itself (LocalStreams keeps a set of them)
class SessionStream:
    """One open GET stream: where it is in the log and how to read the next events."""

    key: str
    principal: str
    stream_id: str
    position: Position
    server: McpServer
    engine: Engine
    lookup: Lookup
    gap_wait_s: float
    tag: str = ""
    _wake: Callable[[], None] | None = None
    _gaps: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tag = stream_tag(self.key)

    def wake(self) -> None:
        if self._wake is not None:
            self._wake()

    def priming(self) -> bytes:
        """The first event: the stream's position, so that a reconnect resumes from it."""
        seq, index = self.position
        return f"id: {event_id(self.tag, seq, index)}\ndata: \n\n".encode()

    def read(self) -> Read:
        """The next events after the stream's position. Blocking: a worker thread."""
        session = self.lookup()
        if session is None:
            return Read(ended=True)
        roots = LegacyHandler(self.server, self.principal, session).narrowing()
        seq, index = self.position
        after = seq - 1 if index is not None else seq
        with read_tx(self.engine) as conn:
            state = session_subscriptions.stream_state(conn, self.key, self.stream_id)
            if not state.current:
                return Read(ended=True)
            rows = changes.since(conn, after, READ_LIMIT)
            settled, hold = self._settled(rows, seq if index is None else seq - 1)
            if not settled:
                return Read(hold=hold)
            readable = frozenset(usable_workspaces(conn, self.principal, roots))
        events = list(events_after(self.tag, self.position, settled, state, readable))
        self.position = Position(settled[-1].seq)
        return Read(tuple(events), hold=hold, more=len(rows) == READ_LIMIT and hold is None)

    def _settled(
        self, rows: list[changes.Change], done: int
    ) -> tuple[list[changes.Change], float | None]:
        """The rows that may be sent now, in log order: on PostgreSQL a missing sequence holds
        the later ones until it commits or GAP_WAIT_S passed (then it was rolled back)."""
        now = time.monotonic()
        expected = done + 1
        settled: list[changes.Change] = []
        for row in rows:
            if row.seq > expected and self.gap_wait_s > 0:
                started = self._gaps.setdefault(expected, now)
                if now - started < self.gap_wait_s:
                    return settled, self.gap_wait_s - (now - started)
                self._gaps.pop(expected, None)
            settled.append(row)
            expected = row.seq + 1
        return settled, None


class GetStreamResponse:
    """The ASGI app serving one open GET stream; it holds no worker thread while it waits."""

    def __init__(
        self,
        stream: SessionStream,
        run: Runner,
        local: LocalStreams,
        release: Callable[[], None],
    ) -> None:
        self.stream = stream
        self.run = run
        self.local = local
        self.release = release
        # Read when the stream opens (not at import), so a test may shorten them.
        self.keepalive_s = KEEPALIVE_S
        self.send_timeout_s = SEND_TIMEOUT_S

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        stream = self.stream

        def wake(*_: Any) -> None:
            loop.call_soon_threadsafe(ready.set)

        stream._wake = wake
        self.local.add(stream)
        feed = changes.feed(stream.engine).subscribe(wake)
        end = StreamEnd(scope, receive)
        try:
            start = {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS}
            if not await self._send(send, start):
                return
            if not await self._send(send, _body(stream.priming())):
                return
            await self._serve(send, ready, end)
        except OSError:
            pass  # the connection is gone
        finally:
            feed.close()
            self.local.remove(stream)
            await end.close()
            with contextlib.suppress(Exception):
                await self.run(self.release)

    async def _serve(self, send: Send, ready: asyncio.Event, end: StreamEnd) -> None:
        while not end.client_gone:
            ready.clear()
            read = await self.run(self.stream.read)
            if read.events and not await end.authorized():
                read = Read(ended=True)  # the credential was revoked or expired: nothing sent
            for event in read.events:
                chunk = f"id: {event.id}\nevent: message\ndata: ".encode() + event.data + b"\n\n"
                if not await self._send(send, _body(chunk)):
                    return
            if read.ended or end.shutting_down:
                # The client resumes with the last id it saw, here or at another instance.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if read.more:
                continue
            hold = read.hold
            timeout = self.keepalive_s if hold is None else min(hold, self.keepalive_s)
            if await end.wait(ready, timeout) or hold is not None:
                continue
            if not await end.authorized():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            if not await self._send(send, _KEEPALIVE):
                return

    async def _send(self, send: Send, message: dict[str, Any]) -> bool:
        """Send within the bound; False when the reader did not take it (it is dropped)."""
        try:
            await asyncio.wait_for(send(message), self.send_timeout_s)
        except TimeoutError:
            log.info("a session's GET stream was dropped: its reader stopped reading")
            return False
        return True


def _body(chunk: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": chunk, "more_body": True}


def open_stream(
    key: str,
    principal: str,
    last_event_id: str | None,
    server: McpServer,
    engine: Engine,
    lookup: Lookup,
) -> SessionStream | Response:
    """Claim the session's one GET stream (a newer one replaces an older one) and find where
    it starts: now, or after `last_event_id` (400 when that is not one of this stream's ids,
    410 when the log was pruned past it). Blocking: a worker thread."""
    tag = stream_tag(key)
    stream_id = secrets.token_hex(16)
    with write_tx(engine) as conn:
        latest = changes.latest(conn)
        if last_event_id is None:
            position = Position(latest)
        else:
            try:
                position = read_position(tag, last_event_id)
            except NotOurs:
                return error_response(400, NOT_OURS)
            oldest = changes.oldest(conn)
            pruned = position.seq > 0 if oldest is None else oldest > position.seq + 1
            if pruned:
                return error_response(410, TOO_OLD)
            if position.seq > latest:
                return error_response(400, NOT_OURS)
        session_subscriptions.claim_stream(conn, key, stream_id)
    return SessionStream(
        key, principal, stream_id, position, server, engine, lookup, changes.gap_wait_s(engine)
    )


def release(engine: Engine, key: str, stream_id: str) -> None:
    with write_tx(engine) as conn:
        session_subscriptions.release_stream(conn, key, stream_id)
