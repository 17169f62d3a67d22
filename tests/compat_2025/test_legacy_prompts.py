"""Prompts and completion for 2025-11-25 clients: `prompts/list`, `prompts/get` and
`completion/complete` through the adapter on a real stdio process and on an HTTP session, in
2025 shapes (no resultType or caching hints), with the same -32602 refusals as 2026-07-28 and
the client's roots narrowing what completes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.tools.services import Services
from tests.compat_2025.legacy_support import NOTES, Legacy

WORK = "file:///home/alice/work"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
ROOTS_CLIENT: dict[str, Any] = {"roots": {"listChanged": True}, "elicitation": {}}


def create(client: Any, title: str, path: str, workspace: str = NOTES) -> None:
    arguments = {"workspaceUri": workspace, "title": title, "path": path, "body": f"# {title}"}
    assert client.tool("notes_create", arguments)["isError"] is False


def test_a_legacy_stdio_client_lists_and_gets_prompts(legacy: Legacy) -> None:
    client = legacy()
    capabilities = client.initialize()["capabilities"]
    create(client, "Plan", "plan.md")

    listed = client.result("prompts/list", {})
    got = client.result(
        "prompts/get",
        {"name": "notes_summarize", "arguments": {"workspaceUri": NOTES, "path": "plan.md"}},
    )
    unknown = client.request("prompts/get", {"name": "nope"})

    assert capabilities["prompts"] == {} and capabilities["completions"] == {}
    assert set(listed) == {"prompts"}
    assert [p["name"] for p in listed["prompts"]] == [
        "notes_weekly_review",
        "notes_summarize",
        "notes_related",
    ]
    assert set(got) == {"description", "messages"}
    assert got["messages"][0]["content"]["resource"] == {
        "uri": f"{NOTES}/plan.md",
        "mimeType": "text/markdown",
        "text": "# Plan",
    }
    assert unknown["error"] == {"code": -32602, "message": "Unknown prompt: nope"}


def test_a_legacy_stdio_client_completes_paths_and_the_template(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()
    create(client, "Plan", "plan.md")
    create(client, "Pricing", "pricing.md")

    by_prompt = client.result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "notes_summarize"},
            "argument": {"name": "path", "value": "p"},
            "context": {"arguments": {"workspaceUri": NOTES}},
        },
    )
    templates = client.result("resources/templates/list", {})

    assert by_prompt == {
        "completion": {"values": ["plan.md", "pricing.md"], "total": 2, "hasMore": False}
    }
    assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == ["{+workspaceUri}/{+path}"]
    assert "ttlMs" not in templates and "resultType" not in templates


def test_a_legacy_clients_roots_narrow_workspace_completion(legacy: Legacy, grant: Any) -> None:
    grant("alice", WORK)
    client = legacy()
    client.initialize(capabilities=ROOTS_CLIENT)
    question = client.read()
    assert question["method"] == "roots/list"
    client.respond(question["id"], {"roots": [{"uri": WORK}]})

    completion = client.result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "notes_weekly_review"},
            "argument": {"name": "workspaceUri", "value": "file:"},
        },
    )

    assert completion["completion"]["values"] == [WORK]


@pytest.fixture
def session(
    settings: Settings, services: Services, grant: Any
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    grant("alice", NOTES)
    app = create_http_app(settings, HttpSettings(auth="none"), services)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        opened = http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            headers=HEADERS,
        )
        headers = {
            **HEADERS,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        yield http, headers


def test_a_legacy_http_session_gets_prompts_and_completions(
    session: tuple[TestClient, dict[str, str]],
) -> None:
    http, headers = session

    def rpc(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        reply: dict[str, Any] = http.post("/mcp", json=message, headers=headers).json()
        assert reply["id"] == request_id
        return reply

    listed = rpc(2, "prompts/list", {})["result"]
    workspaces = rpc(
        3,
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "{+workspaceUri}/{+path}"},
            "argument": {"name": "workspaceUri", "value": ""},
        },
    )["result"]
    review = rpc(
        4, "prompts/get", {"name": "notes_weekly_review", "arguments": {"workspaceUri": NOTES}}
    )
    missing = rpc(5, "prompts/get", {"name": "notes_summarize", "arguments": {}})

    assert "ttlMs" not in listed and len(listed["prompts"]) == 3
    assert workspaces == {"completion": {"values": [NOTES], "total": 1, "hasMore": False}}
    assert review["result"]["messages"][0]["content"]["text"].startswith(
        f"Weekly review of the notes workspace {NOTES} since "
    )
    assert missing["error"] == {
        "code": -32602,
        "message": "Invalid arguments for prompt notes_summarize: missing required argument "
        "workspaceUri, path",
    }
