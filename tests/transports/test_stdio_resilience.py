"""One hostile or failing message costs a stdio connection that message only: real `serve`
processes, modern and 2025-11-25, must answer the next request."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.protocol.server import McpServer
from notes_server.transports.stdio import Frame, LineReader, LineWriter, serve_stdio
from tests.helpers import ServerProcess, make_request

Spawn = Callable[..., ServerProcess]
HERE = Path(__file__).resolve().parent
DEPTH = 600
TOO_DEEP = {"code": -32600, "message": "Invalid Request: message nests deeper than 64 levels"}
PARAMS_TOO_DEEP = {"code": -32602, "message": "Invalid params: params nest deeper than 64 levels"}
INTERNAL = {"code": -32603, "message": "Internal error"}


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


def legacy_initialize(id: int, capabilities: dict[str, Any]) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "deep", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params}


@pytest.fixture
def served(migrated_engine: Engine, spawn_server: Spawn) -> ServerProcess:
    process: ServerProcess = spawn_server(
        "--tools-module", "stdio_faults", env={"PYTHONPATH": str(HERE)}
    )
    return process


def test_a_deep_legacy_initialize_is_refused_and_the_connection_keeps_serving(
    served: ServerProcess,
) -> None:
    served.send(legacy_initialize(1, {"experimental": nested(DEPTH)}))
    assert served.read() == {"jsonrpc": "2.0", "id": 1, "error": PARAMS_TOO_DEEP}

    served.send(legacy_initialize(2, {}))
    assert served.read()["result"]["protocolVersion"] == "2025-11-25"
    served.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert served.read()["id"] == 3
    assert served.close() == 0


def test_a_deep_modern_request_is_refused_and_the_connection_keeps_serving(
    served: ServerProcess,
) -> None:
    served.send(make_request("server/discover", {"deep": nested(DEPTH)}, id="deep"))
    assert served.read() == {"jsonrpc": "2.0", "id": "deep", "error": PARAMS_TOO_DEEP}

    assert served.request("server/discover", id="next")["result"]["resultType"] == "complete"
    assert served.close() == 0


@pytest.mark.parametrize("levels", [2_000, 100_000])
def test_params_beyond_the_parser_limit_are_refused_with_the_id_over_stdio(
    served: ServerProcess, levels: int
) -> None:
    deep = b"[" * levels + b"]" * levels
    served.send_raw(b'{"jsonrpc":"2.0","id":84619,"method":"tools/list","params":{"x":' + deep)
    served.send_raw(b"}}\n")
    assert served.read() == {"jsonrpc": "2.0", "id": 84619, "error": PARAMS_TOO_DEEP}

    assert served.request("server/discover", id="next")["id"] == "next"


def test_a_legacy_request_too_deep_for_the_parser_is_refused_with_its_id(
    served: ServerProcess,
) -> None:
    served.send(legacy_initialize(1, {}))
    assert served.read()["result"]["protocolVersion"] == "2025-11-25"
    deep = b"[" * 5_000 + b"]" * 5_000
    served.send_raw(b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":')
    served.send_raw(b'{"q":' + deep + b'}},"id":12}\n')
    assert served.read() == {"jsonrpc": "2.0", "id": 12, "error": PARAMS_TOO_DEEP}

    served.send({"jsonrpc": "2.0", "id": 13, "method": "tools/list"})
    assert served.read()["id"] == 13


def test_nesting_beyond_the_parser_limit_is_refused_and_the_connection_keeps_serving(
    served: ServerProcess,
) -> None:
    served.send_raw(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    assert served.read() == {"jsonrpc": "2.0", "id": None, "error": TOO_DEEP}

    assert served.request("server/discover", id="next")["id"] == "next"


def test_an_unexpected_failure_is_internal_error_for_that_request_only(
    served: ServerProcess,
) -> None:
    reply = served.request("tools/call", {"name": "test_unencodable", "arguments": {}}, id=7)

    assert reply == {"jsonrpc": "2.0", "id": 7, "error": INTERNAL}
    assert served.request("server/discover", id=8)["id"] == 8
    assert served.close() == 0
    stderr = served.stderr_text()
    assert "Traceback" in stderr and "TypeError" in stderr


def test_an_unexpected_failure_in_a_legacy_session_is_internal_error_for_that_request(
    served: ServerProcess,
) -> None:
    served.send(legacy_initialize(1, {}))
    assert "result" in served.read()
    call = {"name": "test_unencodable", "arguments": {}}
    served.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})

    assert served.read() == {"jsonrpc": "2.0", "id": 2, "error": INTERNAL}
    served.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert served.read() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert served.close() == 0


class Exploding:
    """A connection that fails on every frame naming `boom`."""

    def __init__(
        self, server: McpServer, principal: str, reader: LineReader, writer: LineWriter
    ) -> None:
        self.writer = writer

    def receive(self, frame: Frame) -> None:
        assert isinstance(frame, bytes)
        if b"boom" in frame:
            raise RuntimeError("boom")
        self.writer.write(b'{"ok":true}')


def test_the_stdio_loop_survives_a_connection_that_raises(server: McpServer) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": "a", "method": "boom"},
        {"jsonrpc": "2.0", "method": "boom"},  # a notification: never answered, even now
        {"jsonrpc": "2.0", "id": "b", "method": "fine"},
    ]
    stdin = io.BytesIO(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    stdout = io.BytesIO()

    serve_stdio(server, "alice", stdin, stdout, connection=Exploding)

    replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert replies == [{"jsonrpc": "2.0", "id": "a", "error": INTERNAL}, {"ok": True}]
