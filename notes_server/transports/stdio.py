"""stdio transport: newline-delimited JSON-RPC on stdin/stdout; logs only on stderr.

Requests are answered in arrival order, one line each; pipelined requests simply queue in the
pipe. Oversized lines are drained and refused without reading them into memory.
"""

from __future__ import annotations

import logging
from typing import BinaryIO

from notes_server.errors import InvalidRequest, to_wire
from notes_server.protocol.dispatch import McpServer
from notes_server.protocol.envelope import encode_error

MAX_LINE_BYTES = 4 * 1024 * 1024

log = logging.getLogger("notes_server.stdio")


def _drain_line(stream: BinaryIO) -> None:
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def serve_stdio(server: McpServer, principal: str, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve until EOF on stdin."""
    while True:
        line = stdin.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            _drain_line(stdin)
            reply: bytes | None = encode_error(
                None, to_wire(InvalidRequest("Invalid Request: message too large"))
            )
        else:
            stripped = line.strip()
            if not stripped:
                continue
            reply = server.handle_raw(stripped, principal)
        if reply is not None:
            stdout.write(reply + b"\n")
            stdout.flush()
