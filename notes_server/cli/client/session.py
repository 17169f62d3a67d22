"""Talk to a notes-server over stdio: spawn it, send one request, read its one reply.

Each request carries full `_meta`; nothing depends on earlier requests (stateless protocol).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, Any

PROTOCOL_VERSION = "2026-07-28"
CLIENT_INFO = {"name": "notes-server-call", "version": "1"}


def request_meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }


class StdioSession:
    """A server subprocess with line-delimited JSON-RPC on its pipes."""

    def __init__(self, serve_args: Sequence[str], *, stderr: IO[bytes] | int | None = None):
        command = [sys.executable, "-m", "notes_server", "serve", *serve_args]
        # Its own session: Ctrl-C in the terminal interrupts the caller, which then cancels
        # the call cleanly, instead of killing the server under it.
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
        self._ids = itertools.count(1)
        self.in_flight: int | None = None

    def request(
        self, method: str, params: dict[str, Any], capabilities: dict[str, Any]
    ) -> dict[str, Any]:
        return self.receive(self.send(method, params, capabilities))

    def send(self, method: str, params: dict[str, Any], capabilities: dict[str, Any]) -> int:
        """Send one request; its id stays `in_flight` until `receive` has its reply."""
        assert self.process.stdin is not None
        request_id = next(self._ids)
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": request_meta(capabilities)},
        }
        # In flight before the first byte leaves: a Ctrl-C that lands while the server already
        # works on it must find it, or the form that round opens is never cancelled.
        self.in_flight = request_id
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except BaseException:
            self.in_flight = None
            raise
        return request_id

    def receive(self, request_id: int) -> dict[str, Any]:
        """The reply to `request_id`; replies to requests given up on earlier are skipped."""
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise ConnectionError("the server exited before answering")
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == request_id:
                self.in_flight = None
                return reply

    def close(self) -> int:
        if self.process.stdin is not None:
            self.process.stdin.close()
        code = self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return code

    def __enter__(self) -> StdioSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
