"""`notifications/message`: only for a request that asked (2026-07-28 `_meta` logLevel, or a
2025-11-25 session's `logging/setLevel`), at or above that level, on that request's own stream:
stdio lines before the reply, events of its SSE response over HTTP. Driven with the conformance
fixture `test_tool_with_logging` (three info messages) and the shipped `notes_delete` (a
declined confirmation at notice)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app, create_server
from notes_server.config import HttpSettings, Settings
from notes_server.tools.services import Services
from tests.helpers import ServerProcess, make_request

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = "tests.conformance.fixture_tools"
LOG_TOOL = "test_tool_with_logging"
LEVEL = "io.modelcontextprotocol/logLevel"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
STEPS = ["Tool execution started", "Tool processing data", "Tool execution completed"]
LEGACY_INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
NOTES = "file:///home/alice/notes"


def logged_call(level: Any, name: str = LOG_TOOL, **arguments: Any) -> dict[str, Any]:
    message = make_request("tools/call", {"name": name, "arguments": arguments})
    if level is not None:
        message["params"]["_meta"][LEVEL] = level
    return message


def log_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"] for m in messages if m.get("method") == "notifications/message"]


FIXTURE_LOGS = [{"level": "info", "logger": "conformance", "data": step} for step in STEPS]


def read_until_reply(process: ServerProcess) -> list[dict[str, Any]]:
    messages = [process.read()]
    while "id" not in messages[-1] or "method" in messages[-1]:
        messages.append(process.read())
    return messages


@pytest.fixture
def stdio(spawn_server: Callable[..., ServerProcess], migrated_engine: Engine) -> ServerProcess:
    env = {"PYTHONPATH": f"{TESTS}:{ROOT}"}
    return spawn_server("--sandbox", "off", "--tools-module", FIXTURES, env=env)


@pytest.mark.parametrize("level", ["debug", "info"])
def test_stdio_sends_log_lines_before_the_reply_when_the_request_sets_a_level(
    stdio: ServerProcess, level: str
) -> None:
    stdio.send(logged_call(level))

    messages = read_until_reply(stdio)

    assert log_messages(messages) == FIXTURE_LOGS
    assert all(m["jsonrpc"] == "2.0" and "id" not in m for m in messages[:-1])
    assert messages[-1]["result"]["isError"] is False


@pytest.mark.parametrize("level", [None, "warning", "emergency"])
def test_stdio_sends_no_log_lines_without_a_level_or_below_it(
    stdio: ServerProcess, level: str | None
) -> None:
    stdio.send(logged_call(level))

    messages = read_until_reply(stdio)

    assert len(messages) == 1
    assert messages[0]["result"]["isError"] is False


@pytest.mark.parametrize("level", ["verbose", 3, None])
def test_an_unknown_log_level_is_invalid_params(stdio: ServerProcess, level: Any) -> None:
    message = logged_call("info")
    message["params"]["_meta"][LEVEL] = level
    stdio.send(message)

    reply = stdio.read()

    assert reply["error"] == {
        "code": -32602,
        "message": f"Invalid params: _meta[{LEVEL!r}] must be one of debug, info, notice, "
        "warning, error, critical, alert, emergency",
    }


def test_a_legacy_stdio_session_logs_after_logging_set_level(stdio: ServerProcess) -> None:
    stdio.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": LEGACY_INIT})
    capabilities = stdio.read()["result"]["capabilities"]
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": LOG_TOOL}}
    stdio.send({**call, "id": 2})
    before = read_until_reply(stdio)
    stdio.send({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "x"}})
    refused = stdio.read()
    stdio.send(
        {"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "info"}}
    )
    accepted = stdio.read()
    stdio.send({**call, "id": 5})
    after = read_until_reply(stdio)

    assert capabilities["logging"] == {}
    assert len(before) == 1
    assert refused["error"] == {
        "code": -32602,
        "message": "Invalid params: level must be one of debug, info, notice, warning, error, "
        "critical, alert, emergency",
    }
    assert accepted == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert log_messages(after) == FIXTURE_LOGS
    assert after[-1]["id"] == 5 and "resultType" not in after[-1]["result"]


@pytest.fixture
def http(settings: Settings, services: Services) -> Iterator[TestClient]:
    fixture_settings = dataclasses.replace(settings, tools_modules=(FIXTURES,))
    app = create_http_app(
        fixture_settings,
        HttpSettings(auth="none"),
        Services(fixture_settings, engine=services.engine),
    )
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        yield client


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def modern_headers(name: str) -> dict[str, str]:
    return {
        **HEADERS,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }


def test_http_sends_log_messages_on_the_requests_sse_stream(http: TestClient) -> None:
    message = logged_call("info")
    response = http.post("/mcp", content=json.dumps(message), headers=modern_headers(LOG_TOOL))

    messages = sse_messages(response.text)

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert log_messages(messages) == FIXTURE_LOGS
    assert messages[-1]["id"] == message["id"]
    assert messages[-1]["result"]["resultType"] == "complete"


def test_http_answers_plain_json_without_a_level(http: TestClient) -> None:
    message = logged_call(None)
    response = http.post("/mcp", content=json.dumps(message), headers=modern_headers(LOG_TOOL))

    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["isError"] is False


def test_http_refuses_an_unknown_level_with_invalid_params(http: TestClient) -> None:
    message = logged_call("loud")
    response = http.post("/mcp", content=json.dumps(message), headers=modern_headers(LOG_TOOL))

    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


def test_a_legacy_http_session_keeps_its_level_for_every_later_request(http: TestClient) -> None:
    opened = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": LEGACY_INIT},
        headers=HEADERS,
    )
    session = {
        **HEADERS,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": LOG_TOOL}}
    quiet = http.post("/mcp", json={**call, "id": 2}, headers=session)
    set_level = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "logging/setLevel",
        "params": {"level": "debug"},
    }
    accepted = http.post("/mcp", json=set_level, headers=session)
    first = http.post("/mcp", json={**call, "id": 4}, headers=session)
    second = http.post("/mcp", json={**call, "id": 5}, headers=session)

    assert opened.json()["result"]["capabilities"]["logging"] == {}
    assert quiet.headers["content-type"] == "application/json"
    assert accepted.json() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    for response, request_id in ((first, 4), (second, 5)):
        messages = sse_messages(response.text)
        assert response.headers["content-type"] == "text/event-stream"
        assert log_messages(messages) == FIXTURE_LOGS
        assert messages[-1]["id"] == request_id
        assert "resultType" not in messages[-1]["result"]


def test_a_declined_confirmation_is_logged_at_notice_without_the_notes_content(
    settings: Settings, services: Services, grant: Callable[..., str]
) -> None:
    grant("alice", NOTES)
    server = create_server(settings, services)
    form = {"elicitation": {"form": {}}}

    def rpc(params: dict[str, Any], level: str | None = None) -> tuple[dict[str, Any], list[Any]]:
        message = make_request("tools/call", params, caps=form)
        if level is not None:
            message["params"]["_meta"][LEVEL] = level
        sent: list[bytes] = []
        raw = server.handle_raw(json.dumps(message).encode(), "alice", sent.append)
        assert raw is not None
        return json.loads(raw), [json.loads(b) for b in sent]

    body = "confidential body text"
    created, _ = rpc(
        {
            "name": "notes_create",
            "arguments": {"workspaceUri": NOTES, "title": "Plan", "body": body},
        }
    )
    assert created["result"]["isError"] is False
    arguments = {"workspaceUri": NOTES, "title": "Plan"}
    asked, _ = rpc({"name": "notes_delete", "arguments": arguments})
    state = asked["result"]["requestState"]

    declined, notices = rpc(
        {
            "name": "notes_delete",
            "arguments": arguments,
            "inputResponses": {"delete_choice": {"action": "decline"}},
            "requestState": state,
        },
        "notice",
    )

    assert declined["result"]["structuredContent"]["outcome"] == "declined"
    assert notices == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {
                "level": "notice",
                "logger": "notes",
                "data": "notes_delete: the user declined; nothing was deleted",
            },
        }
    ]
    assert body not in json.dumps(notices)
