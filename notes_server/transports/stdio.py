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
from collections import deque
from collections.abc import Callable
from typing import BinaryIO, Final, Protocol

from notes_server.errors import InvalidRequest, to_wire
from notes_server.protocol.envelope import DecodeFailure, encode_error, parse_json, request_id_of
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
    """One message per line, flushed at once."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def write(self, message: bytes) -> None:
        self._stream.write(message + b"\n")
        self._stream.flush()


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
    """2026-07-28 only: every frame is answered on its own."""

    def __init__(
        self, server: McpServer, principal: str, reader: LineReader, writer: LineWriter
    ) -> None:
        self.server = server
        self.principal = principal
        self.writer = writer

    def receive(self, frame: Frame) -> None:
        reply = answer(self.server, self.principal, frame, self.writer.write)
        if reply is not None:
            self.writer.write(reply)


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
    while (frame := reader.next_in_order()) is not None:
        reply = guarded(handler.receive, frame)
        if reply is not None:
            writer.write(reply)
