"""stdio transport: newline-delimited JSON-RPC on stdin/stdout; logs only on stderr.

Requests are answered in arrival order, one line each; pipelined requests simply queue in the
pipe. Oversized lines are drained and refused without reading them into memory.

The seam: a `LineReader` hands each frame to one per-connection object (`Connection`). The
default one answers every frame statelessly. A connection may pull further frames from the same
reader while it handles one and may write extra lines (the 2025-11-25 adapter in
`notes_server.compat_2025` reads the client's answer to a server-initiated request that way);
frames it read but cannot handle yet go back to the reader (`LineReader.deferred`), which hands
them out first. Every frame reaches the connection through one guard (`guarded`), here.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import BinaryIO, Final, Protocol

from notes_server.errors import InvalidRequest, to_wire
from notes_server.features.extension import LiveStream
from notes_server.protocol.envelope import (
    DecodeFailure,
    Notification,
    Request,
    decode,
    encode_error,
    parse_json,
    request_id_of,
)
from notes_server.protocol.server import McpServer

MAX_LINE_BYTES = 4 * 1024 * 1024

log = logging.getLogger("notes_server.stdio")


class Oversized:
    """A line longer than MAX_LINE_BYTES; its bytes were drained, never held."""


OVERSIZED: Final = Oversized()
Frame = bytes | Oversized


def _drain_line(stream: BinaryIO) -> None:
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


class LineReader:
    """Frames from the client: stripped non-empty lines, OVERSIZED, or None at EOF.
    `deferred` holds frames a connection read ahead and left for later (`next_in_order`)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.deferred: deque[Frame] = deque()

    def next_in_order(self) -> Frame | None:
        """The next frame to handle: a deferred one first, in arrival order, then the stream."""
        if self.deferred:
            return self.deferred.popleft()
        return self.next_frame()

    def fileno(self) -> int | None:
        """The descriptor to wait on with a timeout, or None when the stream has none."""
        try:
            return self._stream.fileno()
        except (OSError, ValueError):  # io.UnsupportedOperation is both
            return None

    def read_ahead(self) -> bool:
        """Whether bytes already wait in the stream's buffer (read ahead with an earlier
        line), which waiting on the descriptor would not see. Never blocks."""
        peek = getattr(self._stream, "peek", None)
        fileno = self.fileno()
        if peek is None or fileno is None:
            return False
        os.set_blocking(fileno, False)
        try:
            waiting = peek(1)
        except BlockingIOError:
            waiting = b""
        finally:
            os.set_blocking(fileno, True)
        return bool(waiting)

    def next_frame(self) -> Frame | None:
        while True:
            line = self._stream.readline(MAX_LINE_BYTES + 1)
            if not line:
                return None
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                _drain_line(self._stream)
                return OVERSIZED
            stripped = line.strip()
            if stripped:
                return stripped


class LineWriter:
    """One message per line, flushed at once; lines of several threads (the replies, and each
    open listen's notifications) never interleave."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, message: bytes) -> None:
        with self._lock:
            self._stream.write(message + b"\n")
            self._stream.flush()


_CANCELLED = "notifications/cancelled"
# Cheap look before a decode: only frames naming one of these can open or end a stream.
_STREAM_MARKERS = (b"subscriptions/", _CANCELLED.encode())


def _key(request_id: object) -> tuple[bool, object]:
    """Ids 1 and "1" are different requests."""
    return isinstance(request_id, str), request_id


class StdioStreams:
    """The long-lived requests (`subscriptions/listen`) open on one stdio connection: each has
    a thread that writes its notifications as lines, interleaved with the replies, while the
    connection goes on reading. `notifications/cancelled` naming one ends it with nothing more
    written (the spec: no response to a cancelled request); a stream the server ends (a
    reader that fell too far behind) gets `notifications/cancelled` and then its closing
    result. EOF closes them all."""

    def __init__(self, server: McpServer, principal: str, writer: LineWriter) -> None:
        self.server = server
        self.principal = principal
        self.writer = writer
        self._lock = threading.Lock()
        self._open: dict[tuple[bool, object], tuple[LiveStream, threading.Thread]] = {}

    def take_frame(self, frame: Frame) -> bool:
        """Whether this frame opened or ended a stream (then it needs nothing else)."""
        if isinstance(frame, Oversized) or not any(m in frame for m in _STREAM_MARKERS):
            return False
        try:
            message = decode(frame)
        except DecodeFailure:
            return False
        return self.take(message)

    def take(self, message: Request | Notification) -> bool:
        if isinstance(message, Notification):
            return message.method == _CANCELLED and self._cancel(message.params)
        if not self.server.serves_stream(message):
            return False
        stream, error = self.server.open_stream(message, self.principal)
        if stream is None:
            self.writer.write(encode_error(message.id, error or {}))
            return True
        key = _key(message.id)
        thread = threading.Thread(
            target=self._pump, args=(key, stream), name="notes-listen", daemon=True
        )
        with self._lock:
            previous = self._open.pop(key, None)
            self._open[key] = (stream, thread)
        if previous is not None:
            previous[0].close()
        thread.start()
        return True

    def adopt(self, key: object, stream: LiveStream) -> None:
        """Write an already open stream's notifications too (a 2025-11-25 session's
        subscriptions); it ends with the connection, or when its owner closes it."""
        thread = threading.Thread(
            target=self._pump, args=((False, ("adopted", key)), stream), daemon=True
        )
        with self._lock:
            self._open[(False, ("adopted", key))] = (stream, thread)
        thread.start()

    def _cancel(self, params: dict[str, object]) -> bool:
        with self._lock:
            entry = self._open.pop(_key(params.get("requestId")), None)
        if entry is None:
            return False  # not ours: another request's cancellation
        entry[0].close()
        return True

    def _pump(self, key: tuple[bool, object], stream: LiveStream) -> None:
        ready = threading.Event()
        stream.attach(ready.set)
        try:
            while True:
                ready.wait()
                ready.clear()
                messages, ended = stream.drain()
                for message in messages:
                    self.writer.write(message)
                if ended:
                    break
            if stream.dropped:
                for closing in (
                    stream.cancelled("The subscription fell too far behind"),
                    stream.final(),
                ):
                    if closing:  # a session's subscriptions have no request to end
                        self.writer.write(closing)
        except (BrokenPipeError, ValueError, OSError):
            stream.close()  # stdout is gone
        finally:
            with self._lock:
                entry = self._open.get(key)
                if entry is not None and entry[0] is stream:
                    del self._open[key]

    def close(self) -> None:
        with self._lock:
            entries = list(self._open.values())
            self._open.clear()
        for stream, _ in entries:
            stream.close()
        for _, thread in entries:
            thread.join(timeout=1.0)


def answer(
    server: McpServer, principal: str, frame: Frame, notify: Callable[[bytes], None] | None = None
) -> bytes | None:
    """The stateless reply to one frame; None for notifications. `notify` writes the request's
    progress notifications (each a line, before the reply)."""
    if isinstance(frame, Oversized):
        return encode_error(None, to_wire(InvalidRequest("Invalid Request: message too large")))
    return server.handle_raw(frame, principal, notify)


def internal_error(frame: Frame) -> bytes | None:
    """-32603 for a frame whose handling failed unexpectedly (with its id when it has one);
    None for a notification, which is never answered, not even with an error."""
    message = None
    if not isinstance(frame, Oversized):
        try:
            message = parse_json(frame)
        except DecodeFailure:
            message = None
    if isinstance(message, dict) and "id" not in message:
        return None
    return encode_error(request_id_of(message), to_wire(RuntimeError()))


def guarded(reply: Callable[[Frame], bytes | None], frame: Frame) -> bytes | None:
    """`reply(frame)`, or `internal_error(frame)` when it raises: one bad message never ends
    the connection. The traceback goes to the log (stderr), never to the client."""
    try:
        return reply(frame)
    except BrokenPipeError:
        raise  # stdout is gone: there is no one left to answer
    except Exception:
        log.exception("internal error while handling a message")
        return internal_error(frame)


class Connection(Protocol):
    def receive(self, frame: Frame) -> None:
        """Handle one frame; write any replies before returning."""


class ConnectionFactory(Protocol):
    def __call__(
        self, server: McpServer, principal: str, reader: LineReader, writer: LineWriter
    ) -> Connection: ...


class StatelessConnection:
    """2026-07-28 only: every frame is answered on its own; listens stream beside them."""

    def __init__(
        self, server: McpServer, principal: str, reader: LineReader, writer: LineWriter
    ) -> None:
        self.server = server
        self.principal = principal
        self.writer = writer
        self.streams = StdioStreams(server, principal, writer)

    def receive(self, frame: Frame) -> None:
        if self.streams.take_frame(frame):
            return
        reply = answer(self.server, self.principal, frame, self.writer.write)
        if reply is not None:
            self.writer.write(reply)

    def close(self) -> None:
        self.streams.close()


def serve_stdio(
    server: McpServer,
    principal: str,
    stdin: BinaryIO,
    stdout: BinaryIO,
    connection: ConnectionFactory = StatelessConnection,
) -> None:
    """Serve until EOF on stdin, frames deferred by the connection first. A frame whose
    handling raises costs only that one message (`guarded`, the one guard per frame); a
    failure to write the reply (stdout closed) ends serving."""
    reader = LineReader(stdin)
    writer = LineWriter(stdout)
    handler = connection(server, principal, reader, writer)
    try:
        while (frame := reader.next_in_order()) is not None:
            reply = guarded(handler.receive, frame)
            if reply is not None:
                writer.write(reply)
    finally:
        close = getattr(handler, "close", None)
        if close is not None:
            close()
