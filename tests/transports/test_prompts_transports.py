"""Prompts and completion of 2026-07-28 over the real transports: a `serve` stdio process and
the HTTP app (standard headers, `Mcp-Name` for prompts/get), same shapes as in process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.testclient import TestClient

from notes_server.app import create_http_app, create_server
from notes_server.config import HttpSettings, Settings
from notes_server.features.extension import Extension
from notes_server.tools.read import ReadNote
from notes_server.tools.services import Services
from tests.helpers import ServerProcess, make_request
from tests.transports.http_support import rpc

NOTES = "file:///home/alice/notes"
SUMMARIZE = {"workspaceUri": NOTES, "path": "plan.md"}


def test_a_stdio_process_serves_prompts_and_completion(
    spawn_server: Callable[..., ServerProcess], grant: Callable[..., str]
) -> None:
    grant("alice", NOTES)
    process = spawn_server("--sandbox", "off")
    create = {"workspaceUri": NOTES, "title": "Plan", "path": "plan.md", "body": "hello"}
    process.send(make_request("tools/call", {"name": "notes_create", "arguments": create}))
    assert process.read()["result"]["isError"] is False

    process.send(
        make_request("prompts/get", {"name": "notes_summarize", "arguments": SUMMARIZE}, id=2)
    )
    got = process.read()
    process.send(
        make_request(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "notes_summarize"},
                "argument": {"name": "path", "value": "pl"},
                "context": {"arguments": {"workspaceUri": NOTES}},
            },
            id=3,
        )
    )
    completed = process.read()

    assert got["id"] == 2
    assert got["result"]["messages"][0]["content"]["resource"]["text"] == "hello"
    assert completed["result"]["completion"] == {
        "values": ["plan.md"],
        "total": 1,
        "hasMore": False,
    }


def test_http_serves_prompts_get_with_its_name_header_and_completion(
    settings: Settings, services: Services, grant: Callable[..., str]
) -> None:
    grant("alice", NOTES)
    app = create_http_app(settings, HttpSettings(auth="none"), services)
    with TestClient(app, base_url="http://127.0.0.1:8765") as http:
        body, headers = rpc("prompts/list")
        listed = http.post("/mcp", content=body, headers=headers)
        body, headers = rpc(
            "prompts/get", {"name": "notes_weekly_review", "arguments": {"workspaceUri": NOTES}}
        )
        got = http.post("/mcp", content=body, headers=headers)
        body, headers = rpc(
            "prompts/get", {"name": "notes_related", "arguments": {"workspaceUri": NOTES}}
        )
        headers["Mcp-Name"] = "notes_summarize"
        mismatched = http.post("/mcp", content=body, headers=headers)
        body, headers = rpc(
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": "{+workspaceUri}/{+path}"},
                "argument": {"name": "workspaceUri", "value": "file:///home/bob"},
            },
        )
        completed = http.post("/mcp", content=body, headers=headers)

    assert listed.status_code == 200 and listed.json()["result"]["cacheScope"] == "public"
    assert got.status_code == 200
    assert got.json()["result"]["description"].startswith("Weekly review since ")
    assert mismatched.status_code == 400
    assert mismatched.json()["error"]["code"] == -32020
    assert completed.json()["result"] == {
        "resultType": "complete",
        "completion": {"values": [], "total": 0, "hasMore": False},
        "_meta": completed.json()["result"]["_meta"],
    }


def test_a_server_without_prompts_answers_prompts_methods_with_method_not_found(
    settings: Settings, services: Services
) -> None:
    bare = Extension("bare", tools=[ReadNote(services)])
    server = create_server(settings, services, extensions=[bare])

    def ask(method: str) -> dict[str, Any]:
        raw = server.handle_raw(json.dumps(make_request(method, {})), "alice")
        assert raw is not None
        reply: dict[str, Any] = json.loads(raw)
        return reply

    assert ask("server/discover")["result"]["capabilities"] == {"tools": {}}
    for method in ("prompts/list", "prompts/get", "completion/complete"):
        assert ask(method)["error"]["code"] == -32601
