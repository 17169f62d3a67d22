"""uvicorn's HTTP/1.1 protocols with a deadline and a size bound for the request head.

uvicorn bounds the idle time between requests (`timeout_keep_alive`) but not the time a client
may take to send a request head: one byte a second keeps a connection, and a worker's slot,
forever (slowloris). Here a connection that has not finished a request head within
HEADER_TIMEOUT_S of connecting, or of starting the next one, is closed. Body reads and handlers
have their own bounds (`http_limits`, `http_threads`).

The server runs uvicorn's `httptools` protocol (the C parser: about a tenth of the CPU of the
pure-Python `h11` one per request). uvicorn gives it no head size limit, so one is added here
(MAX_HEAD_BYTES, h11's own default: 431 and close past it), however the head arrives: the bytes
of a head still incomplete are counted per read, and a head completed by reads larger than the
bound is measured before it is dispatched (a whole head in one read). A response's head and
body leave in one write (`_CorkedWrites`). Where `httptools` cannot be imported, the `h11`
protocol gets the same deadline (h11 bounds the size of a head that arrives in pieces).

Graceful shutdown (SIGTERM/SIGINT) reaches the long-lived responses here, in one place: each
request's scope carries its connection's shutdown event (`stream_end.SHUTDOWN_KEY`), which
`shutdown()` (uvicorn calls it on every open connection) sets, so an open listen or GET stream
ends at once instead of at its next keep-alive (`_ShutdownSignal`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from notes_server.transports.http.stream_end import mark_shutdown

HEADER_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024
HEAD_TOO_LARGE = "Request head too large."
HTTPTOOLS_PROTOCOL = "notes_server.transports.http.protocol:HeaderTimeoutHttpToolsProtocol"
H11_PROTOCOL = "notes_server.transports.http.protocol:HeaderTimeoutH11Protocol"


class _HeadDeadline:
    """The deadline timer; the protocol says when a head starts (`_arm`) and ends (`_disarm`)."""

    loop: asyncio.AbstractEventLoop
    logger: logging.Logger
    transport: asyncio.Transport
    _head_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._head_deadline is None and self._awaiting_head():
            self._head_deadline = self.loop.call_later(HEADER_TIMEOUT_S, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _awaiting_head(self) -> bool:
        raise NotImplementedError

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self._awaiting_head() and not self.transport.is_closing():
            self.logger.info("closed a connection that sent no complete request head in time")
            self.transport.close()


class _ShutdownSignal:
    """The connection's shutdown event, given to each of its requests (`_mark`) and set when
    uvicorn shuts the connection down (`_signal`)."""

    _stopping: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._stopping is None:
            self._stopping = asyncio.Event()
        return self._stopping

    def _mark(self, scope: Any) -> None:  # uvicorn's scope types are TypedDicts
        mark_shutdown(scope, self._event())

    def _signal(self) -> None:
        self._event().set()


class _CorkedWrites:
    """A response's head and body in one `write`: uvicorn writes them separately, which costs
    a second system call and a second TCP segment per response. The head waits for the body,
    at most until the event loop's next turn (a body that comes later is never held up)."""

    __slots__ = ("held", "loop", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.held: bytes | None = None

    def write(self, data: bytes) -> None:
        if self.held is None:
            self.held = data
            self.loop.call_soon(self.flush)
            return
        self.transport.write(self.held + data)
        self.held = None

    def flush(self) -> None:
        if self.held is not None:
            data, self.held = self.held, None
            if not self.transport.is_closing():  # the peer is gone: nothing to deliver
                self.transport.write(data)

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


def protocol_name() -> str:
    """The uvicorn `http=` protocol to run: httptools when it is installed, else h11."""
    try:
        import httptools  # noqa: F401
    except ImportError:  # pragma: no cover - httptools is a dependency; a platform may lack it
        return H11_PROTOCOL
    return HTTPTOOLS_PROTOCOL


def head_too_large_response() -> bytes:
    """431 with `Connection: close`, in the shape of uvicorn's own 400 for a malformed head."""
    body = HEAD_TOO_LARGE.encode("ascii")
    return (
        b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
        b"content-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n"
        b"connection: close\r\n\r\n" + body
    )


# What the request line adds to its target: the method, the version, two spaces and CRLF.
_REQUEST_LINE_BYTES = 20


class _HeadTooLarge(Exception):
    """Raised from a parser callback: httptools stops parsing (uvicorn then answers through
    `send_400_response`, which answers 431 instead)."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - see protocol_name
    pass
else:

    class HeaderTimeoutHttpToolsProtocol(_HeadDeadline, _ShutdownSignal, HttpToolsProtocol):
        """A head is awaited from the connection's start and from each message's first byte
        until its headers are complete; the bytes fed meanwhile are counted, and so are the
        parsed request line and headers when those reads were larger than the bound (a whole
        head in one read completes within one `data_received`, before the per-read count
        could see it)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._in_head = True
            self._head_bytes = 0
            self._head_refused = False

        def _awaiting_head(self) -> bool:
            return self._in_head

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._corked = _CorkedWrites(transport, self.loop)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            too_large = self._in_head and self._head_bytes > MAX_HEAD_BYTES
            if too_large and not self.transport.is_closing():
                self._refuse_head()

        def _refuse_head(self) -> None:
            self.logger.info("closed a connection whose request head was too large")
            self._corked.flush()
            self.transport.write(head_too_large_response())
            self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()  # the request's scope
            self._mark(self.scope)
            self._in_head = True
            self._arm()

        def on_headers_complete(self) -> None:
            # The reads of this head may hold more than the head (a body, the next request):
            # only then is the parsed head measured, so a small request pays one comparison.
            if self._head_bytes > MAX_HEAD_BYTES and self._parsed_head_size() > MAX_HEAD_BYTES:
                self._head_refused = True
                raise _HeadTooLarge  # the parser stops; uvicorn calls send_400_response
            self._in_head = False
            self._head_bytes = 0
            self._disarm()
            super().on_headers_complete()
            if self.cycle is not None:
                self.cycle.transport = self._corked  # type: ignore[assignment]

        def _parsed_head_size(self) -> int:
            headers = sum(len(name) + len(value) + 4 for name, value in self.headers)
            return _REQUEST_LINE_BYTES + len(self.url) + headers + 2

        def send_400_response(self, msg: str) -> None:
            if self._head_refused:  # `on_headers_complete` stopped the parser: too large
                if not self.transport.is_closing():
                    self._refuse_head()
                return
            self._corked.flush()  # whatever an earlier response still holds goes first
            super().send_400_response(msg)

        def shutdown(self) -> None:
            self._signal()
            self._corked.flush()
            super().shutdown()


try:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol
except ImportError:  # pragma: no cover - h11 is optional once httptools is installed
    pass
else:

    class HeaderTimeoutH11Protocol(_HeadDeadline, _ShutdownSignal, H11Protocol):
        """h11 says when a head is awaited: its peer state is IDLE until the head is complete."""

        def _awaiting_head(self) -> bool:
            return self.conn.their_state is h11.IDLE

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._arm()  # before: a complete head in `data` is handed to the app right away
            super().data_received(data)
            if not self._awaiting_head():
                self._disarm()  # the head is complete; the body has its own read timeout

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None:  # its app task starts at the loop's next turn
                self._mark(self.cycle.scope)

        def shutdown(self) -> None:
            self._signal()
            super().shutdown()
