"""notes_edit, notes_history, notes_read {version} and notes_revert over every way in: the
2025-11-25 stdio adapter, a 2025-11-25 HTTP session, and 2026-07-28 over HTTP (token auth)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.compat_2025.connection import DualEraConnection
from notes_server.config import HttpSettings, Settings
from notes_server.protocol.server import McpServer
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.stdio import serve_stdio
from tests.transports.http_support import LOOPBACK_URL, rpc

NOTES = "file:///home/alice/notes"
BODY = "# Plan\nintro\n## Risks\nnone\n"


def calls(note_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The same conversation in every era: edit a section, list, read v1, revert to v1."""
    base = {"workspaceUri": NOTES, "noteId": note_id}
    edit = {"section": "Plan/Risks", "action": "replace", "text": "vendor late"}
    return [
        ("notes_edit", {**base, "expectedVersion": 1, "edits": [edit]}),
        ("notes_history", base),
        ("notes_read", {**base, "version": 1}),
        ("notes_revert", {**base, "version": 1}),
    ]


def check(results: list[dict[str, Any]]) -> None:
    edited, listed, past, reverted = (r["structuredContent"] for r in results)
    assert all(r["isError"] is False for r in results), results
    assert edited["note"]["version"] == 2
    assert "-none\n+vendor late\n" in edited["diff"]
    assert [(v["version"], v["tool"]) for v in listed["versions"]] == [
        (2, "notes_edit"),
        (1, "notes_create"),
    ]
    assert (past["note"]["body"], past["currentVersion"]) == (BODY, 2)
    assert (reverted["note"]["body"], reverted["note"]["version"]) == (BODY, 3)


@pytest.fixture
def note_id(call_tool: Callable[..., dict[str, Any]], grant: Callable[..., str]) -> str:
    grant("alice", NOTES)
    created = call_tool("notes_create", {"workspaceUri": NOTES, "title": "Plan", "body": BODY})
    value: str = created["result"]["structuredContent"]["note"]["id"]
    return value


def test_the_history_tools_work_through_the_2025_stdio_adapter(
    server: McpServer, note_id: str
) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
    }
    lines = [json.dumps(init).encode()]
    for i, (name, arguments) in enumerate(calls(note_id), start=2):
        request = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        lines.append(json.dumps(request).encode())
    stdout = io.BytesIO()
    serve_stdio(server, "alice", io.BytesIO(b"\n".join(lines) + b"\n"), stdout, DualEraConnection)

    replies = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3, 4, 5]
    check([r["result"] for r in replies[1:]])


@pytest.fixture
def http(settings: Settings, migrated_engine: Engine) -> Iterator[tuple[TestClient, str]]:
    token = create_token(SqlTokenRecords(migrated_engine), "alice")[1]
    app = create_http_app(settings, HttpSettings(), Services(settings, engine=migrated_engine))
    with TestClient(app, base_url=LOOPBACK_URL) as client:
        yield client, token


def test_the_history_tools_work_over_http(http: tuple[TestClient, str], note_id: str) -> None:
    client, token = http
    results = []
    for i, (name, arguments) in enumerate(calls(note_id), start=1):
        body, headers = rpc("tools/call", {"name": name, "arguments": arguments}, id=i)
        response = client.post(
            "/mcp", content=body, headers={**headers, "Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 200, response.text
        results.append(response.json()["result"])
    check(results)


def test_the_history_tools_work_in_a_2025_http_session(
    http: tuple[TestClient, str], note_id: str
) -> None:
    client, token = http
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "history-test", "version": "1"},
        },
    }
    opened = client.post("/mcp", content=json.dumps(init), headers=headers)
    assert opened.status_code == 200, opened.text
    session = {
        **headers,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    results = []
    for i, (name, arguments) in enumerate(calls(note_id), start=2):
        request = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        response = client.post("/mcp", content=json.dumps(request), headers=session)
        assert response.status_code == 200, response.text
        results.append(response.json()["result"])
    check(results)
