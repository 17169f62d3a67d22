"""A minimal 2025-11-25 host for the adapter tests: it talks to a real `serve` process (see
helpers.ServerProcess) one line at a time, without `_meta`, after one `initialize`."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tests.helpers import ServerProcess

NOTES = "file:///home/alice/notes"
FORM_CLIENT: dict[str, Any] = {"elicitation": {}}


class LegacyClient:
    """What a 2025-11-25 host does on stdio: no `_meta`, one `initialize`, then requests."""

    def __init__(self, process: ServerProcess) -> None:
        self.process = process
        self._ids = itertools.count(1)

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.process.send(message)
        return request_id

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.process.send(message)

    def respond(self, request_id: Any, result: dict[str, Any]) -> None:
        self.process.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def read(self) -> dict[str, Any]:
        return self.process.read()

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        request_id = self.send(method, params)
        reply = self.read()
        assert reply["id"] == request_id
        return reply

    def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.request(method, params)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    def initialize(
        self, version: str = "2025-11-25", capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        result = self.result(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": FORM_CLIENT if capabilities is None else capabilities,
                "clientInfo": {"name": "legacy-test-host", "version": "1.0.0"},
            },
        )
        self.notify("notifications/initialized")
        return result

    def call_tool(self, name: str, arguments: dict[str, Any]) -> int:
        return self.send("tools/call", {"name": name, "arguments": arguments})

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.result("tools/call", {"name": name, "arguments": arguments})


Legacy = Callable[[], LegacyClient]
