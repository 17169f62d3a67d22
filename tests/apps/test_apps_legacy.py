"""MCP Apps over the 2025-11-25 adapter: a host declares the extension in `initialize`, and the
session's requests get the view link and the view in that revision's shapes."""

from __future__ import annotations

import io
import json
from typing import Any

from notes_server.compat_2025.connection import DualEraConnection
from notes_server.protocol.server import McpServer
from notes_server.transports.stdio import serve_stdio
from tests.apps.apps_support import APP_MIME, APPS, UI, VIEW


def session(server: McpServer, capabilities: dict[str, Any], *requests: Any) -> list[Any]:
    init = {"protocolVersion": "2025-11-25", "capabilities": capabilities}
    messages = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}]
    messages += [{"jsonrpc": "2.0", "id": i, **r} for i, r in enumerate(requests, start=1)]
    stdin = io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    stdout = io.BytesIO()
    serve_stdio(server, "alice", stdin, stdout, DualEraConnection)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


TOOLS_LIST = {"method": "tools/list", "params": {}}


def read(uri: str) -> dict[str, Any]:
    return {"method": "resources/read", "params": {"uri": uri}}


def test_apps_declared_in_initialize_links_and_serves_the_view(server: McpServer) -> None:
    out = session(server, APPS, TOOLS_LIST, read(VIEW), read("ui://notes/other.html"))

    tools = {tool["name"]: tool for tool in out[1]["result"]["tools"]}
    assert tools["notes_timeline"]["_meta"] == {"ui": {"resourceUri": VIEW}}
    assert set(out[2]["result"]) == {"contents"}  # no resultType or cache hints in 2025-11-25
    (content,) = out[2]["result"]["contents"]
    assert (content["uri"], content["mimeType"]) == (VIEW, APP_MIME)
    assert content["_meta"]["ui"]["permissions"] == {}
    assert out[3]["error"]["code"] == -32002  # that revision's resource-not-found
    assert out[3]["error"]["data"] == {"uri": "ui://notes/other.html"}


def test_without_apps_in_initialize_the_timeline_is_text_and_the_view_is_refused(
    server: McpServer,
) -> None:
    out = session(server, {"extensions": {UI: True}}, TOOLS_LIST, read(VIEW))

    assert all("_meta" not in tool for tool in out[1]["result"]["tools"])
    assert out[2]["error"]["code"] == -32021
    assert out[2]["error"]["data"]["requiredCapabilities"] == APPS
