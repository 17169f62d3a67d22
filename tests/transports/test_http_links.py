"""The link and tag tools over Streamable HTTP (2026-07-28), with a bearer token."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_server
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.app import build_http_app
from notes_server.transports.http.middleware.auth import build_authenticator
from tests.transports.http_support import LOOPBACK_URL, rpc

NOTES = "file:///home/alice/notes"


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    http = HttpSettings()
    app = build_http_app(
        create_server(settings, services), build_authenticator(settings, http, services), http
    )
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


def test_notes_links_and_notes_tags_over_http(
    client: TestClient, migrated_engine: Engine, grant: Callable[..., str]
) -> None:
    grant("alice", NOTES)
    _, secret = create_token(SqlTokenRecords(migrated_engine), "alice")
    auth = {"Authorization": f"Bearer {secret}"}

    def tool(name: str, **arguments: Any) -> dict[str, Any]:
        body, headers = rpc("tools/call", {"name": name, "arguments": arguments})
        response = client.post("/mcp", content=body, headers={**headers, **auth})
        assert response.status_code == 200, response.text
        result = json.loads(response.text)["result"]
        assert result["isError"] is False, result
        structured: dict[str, Any] = result["structuredContent"]
        return structured

    target = tool("notes_create", workspaceUri=NOTES, title="Plan", body="#work")["note"]
    tool("notes_create", workspaceUri=NOTES, title="Src", body="[[plan]] [[Nowhere]]")

    links = tool("notes_links", workspaceUri=NOTES, noteId=target["id"])
    found = tool("notes_search", workspaceUri=NOTES, tags=["WORK"])

    assert links["counts"] == {"outgoing": 0, "unresolved": 0, "incoming": 1}
    assert [n["tags"] for n in found["notes"]] == [["work"]]
    assert tool("notes_tags", workspaceUri=NOTES) == {
        "tags": [{"tag": "work", "notes": 1}],
        "total": 1,
    }
