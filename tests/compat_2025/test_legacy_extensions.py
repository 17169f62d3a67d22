"""An extension over the 2025-11-25 adapter: the capabilities a client declared in `initialize`
reach the extension's tool `_meta` hook on every request of the session, and its `demo:`
resources are served in that revision's shapes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from notes_server.app import create_server, notes_extension
from notes_server.compat_2025.connection import DualEraConnection
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.tools.services import Services
from notes_server.transports.stdio import serve_stdio
from tests.demo_extension import DEMO_ID, demo_extension


@pytest.fixture
def demo_server(settings: Settings, services: Services) -> McpServer:
    return create_server(settings, services, [notes_extension(services), demo_extension(services)])


def session(
    server: McpServer, capabilities: dict[str, Any], *requests: dict[str, Any]
) -> list[Any]:
    init = {"protocolVersion": "2025-11-25", "capabilities": capabilities}
    messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}]
    messages += [{"jsonrpc": "2.0", "id": i, **r} for i, r in enumerate(requests, start=1)]
    stdin = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    stdout = io.BytesIO()
    serve_stdio(server, "alice", stdin, stdout, DualEraConnection)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


TOOLS_LIST = {"method": "tools/list", "params": {}}


def test_an_extension_declared_in_initialize_adds_the_tool_meta(demo_server: McpServer) -> None:
    out = session(demo_server, {"extensions": {DEMO_ID: {}}}, TOOLS_LIST)

    tools = {tool["name"]: tool for tool in out[1]["result"]["tools"]}
    assert tools["demo_echo"]["_meta"] == {DEMO_ID: {"view": "demo:0"}}
    assert set(out[1]["result"]) == {"tools"}
    assert "extensions" not in out[0]["result"]["capabilities"]


def test_without_the_extension_in_initialize_the_tool_has_no_meta(demo_server: McpServer) -> None:
    out = session(demo_server, {}, TOOLS_LIST)

    assert all("_meta" not in tool for tool in out[1]["result"]["tools"])


def test_extension_resources_are_read_over_the_adapter(demo_server: McpServer) -> None:
    out = session(demo_server, {}, {"method": "resources/read", "params": {"uri": "demo:2"}})

    assert out[1]["result"] == {
        "contents": [{"uri": "demo:2", "mimeType": "text/plain", "text": "demo:2 for alice"}]
    }
