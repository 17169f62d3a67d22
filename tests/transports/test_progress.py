"""`notifications/progress` for a request with `_meta.progressToken`: lines before the reply on
stdio, events before the reply on an SSE response over HTTP, in both eras; nothing extra for a
request that did not ask. Driven with the conformance fixture `test_tool_with_progress` (0, 50
and 100 of 100) and the shipped `notes_import`."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import builtin_extensions, create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.features.extension import Extension
from notes_server.protocol.progress import progress_sink
from notes_server.store import folders
from notes_server.store.engine import write_tx
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.services import Services, utc_now
from tests.helpers import ServerProcess, make_request

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
FIXTURES = "tests.conformance.fixture_tools"
NOTES = "file:///home/alice/notes"
PROGRESS_TOOL = "test_tool_with_progress"
EXPECTED = [(0, 100), (50, 100), (100, 100)]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def progress_call(token: Any, name: str = PROGRESS_TOOL, **arguments: Any) -> dict[str, Any]:
    message = make_request("tools/call", {"name": name, "arguments": arguments})
    if token is not None:
        message["params"]["_meta"]["progressToken"] = token
    return message


def steps(messages: list[dict[str, Any]], token: Any) -> list[tuple[Any, Any]]:
    notices = [m for m in messages if m.get("method") == "notifications/progress"]
    assert all(n["params"]["progressToken"] == token for n in notices)
    return [(n["params"]["progress"], n["params"].get("total")) for n in notices]


def read_until_reply(process: ServerProcess) -> list[dict[str, Any]]:
    messages = [process.read()]
    while "id" not in messages[-1] or "method" in messages[-1]:
        messages.append(process.read())
    return messages


@pytest.fixture
def stdio(spawn_server: Callable[..., ServerProcess], migrated_engine: Engine) -> ServerProcess:
    env = {"PYTHONPATH": f"{TESTS}:{ROOT}"}
    return spawn_server("--sandbox", "off", "--tools-module", FIXTURES, env=env)


@pytest.mark.parametrize("token", ["tok-1", 7])
def test_stdio_sends_progress_lines_before_the_reply(stdio: ServerProcess, token: Any) -> None:
    stdio.send(progress_call(token))

    messages = read_until_reply(stdio)

    assert steps(messages, token) == EXPECTED
    assert messages[-1]["result"]["isError"] is False


@pytest.mark.parametrize("meta_token", [None, True, 1.5, {"x": 1}])
def test_stdio_sends_no_progress_without_a_valid_token(
    stdio: ServerProcess, meta_token: Any
) -> None:
    stdio.send(progress_call(meta_token))

    messages = read_until_reply(stdio)

    assert len(messages) == 1
    assert messages[0]["result"]["isError"] is False


def test_a_legacy_stdio_session_gets_progress_lines_too(stdio: ServerProcess) -> None:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    stdio.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert stdio.read()["result"]["protocolVersion"] == "2025-11-25"
    params = {"name": PROGRESS_TOOL, "arguments": {}, "_meta": {"progressToken": "legacy"}}
    stdio.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})

    messages = read_until_reply(stdio)

    assert steps(messages, "legacy") == EXPECTED
    assert messages[-1]["id"] == 2


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


def test_http_answers_a_request_with_a_token_on_an_sse_stream(http: TestClient) -> None:
    message = progress_call("p")
    response = http.post("/mcp", content=json.dumps(message), headers=modern_headers(PROGRESS_TOOL))

    messages = sse_messages(response.text)

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert steps(messages, "p") == EXPECTED
    assert messages[-1]["id"] == message["id"]
    assert messages[-1]["result"]["resultType"] == "complete"


def test_http_answers_plain_json_without_a_token(http: TestClient) -> None:
    message = progress_call(None)
    response = http.post("/mcp", content=json.dumps(message), headers=modern_headers(PROGRESS_TOOL))

    assert response.headers["content-type"] == "application/json"
    assert response.json()["result"]["isError"] is False


def test_http_answers_plain_json_when_the_tool_reports_nothing(http: TestClient) -> None:
    message = progress_call("p", "test_simple_text")
    response = http.post(
        "/mcp", content=json.dumps(message), headers=modern_headers("test_simple_text")
    )

    assert response.headers["content-type"] == "application/json"
    assert response.json()["id"] == message["id"]


def test_a_legacy_http_session_gets_progress_on_an_sse_stream(http: TestClient) -> None:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    opened = http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        headers=HEADERS,
    )
    session = {
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    params = {"name": PROGRESS_TOOL, "arguments": {}, "_meta": {"progressToken": 9}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}

    response = http.post("/mcp", json=call, headers={**HEADERS, **session})
    messages = sse_messages(response.text)

    assert response.headers["content-type"] == "text/event-stream"
    assert steps(messages, 9) == EXPECTED
    assert messages[-1]["id"] == 2
    assert "resultType" not in messages[-1]["result"]


def test_notes_import_reports_files_read_out_of_files_found(
    stdio: ServerProcess, tmp_path: Path, migrated_engine: Engine, grant: Any
) -> None:
    grant("alice", NOTES)
    vault = tmp_path / "vault"
    vault.mkdir()
    for n in range(3):
        (vault / f"n{n}.md").write_text(f"# Note {n}\n", "utf-8")
    with write_tx(migrated_engine) as conn:
        folders.set_mirror(conn, "alice", NOTES, str(vault), utc_now())
    stdio.send(progress_call("imp", "notes_import", workspaceUri=NOTES))

    messages = read_until_reply(stdio)

    reported = steps(messages, "imp")
    assert reported[0] == (0, 3) and reported[-1] == (3, 3)
    assert [p for p, _ in reported] == sorted({p for p, _ in reported})
    assert messages[-1]["result"]["structuredContent"]["imported"] == 3


def test_progress_must_increase_and_a_bool_is_no_token() -> None:
    sent: list[bytes] = []
    sink = progress_sink({"_meta": {"progressToken": "t"}}, sent.append)
    assert sink is not None
    for value in (1, 1, 0.5, float("nan"), 2):
        sink(value, 2, None)

    assert [json.loads(b)["params"]["progress"] for b in sent] == [1, 2]
    assert progress_sink({"_meta": {"progressToken": True}}, sent.append) is None


class ReportsThenWaits(Tool):
    """Reports once, then blocks until released: its request times out mid-stream."""

    name = "test_reports_then_waits"
    title = description = "Reports, then waits"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    tool_annotations = tool_hints("Reports, then waits", read_only=True)
    release = threading.Event()

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        ctx.report_progress(1, 2, "started")
        self.release.wait(timeout=30)
        return ToolResult({"done": True})


def test_a_request_that_times_out_after_reporting_ends_its_stream_with_an_error(
    settings: Settings, services: Services
) -> None:
    tool = ReportsThenWaits(services)
    app = create_http_app(
        settings,
        HttpSettings(auth="none", request_timeout=0.5),
        services,
        extensions=[*builtin_extensions(services), Extension(name="waits", tools=[tool])],
    )
    message = progress_call("t", ReportsThenWaits.name)
    try:
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            headers = modern_headers(ReportsThenWaits.name)
            response = client.post("/mcp", content=json.dumps(message), headers=headers)
    finally:
        ReportsThenWaits.release.set()

    messages = sse_messages(response.text)
    assert response.headers["content-type"] == "text/event-stream"
    assert steps(messages, "t") == [(1, 2)]
    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": message["id"],
        "error": {"code": -32603, "message": "Request timed out"},
    }
