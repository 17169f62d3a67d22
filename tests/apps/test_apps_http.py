"""The `ui://` view over Streamable HTTP: the status and codes an Apps host sees, and the
`Mcp-Name` header that must name the resource the body reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from tests.apps.apps_support import APP_MIME, APPS, LOOPBACK_URL, UI, VIEW, rpc


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    with TestClient(
        create_http_app(settings, HttpSettings(), services), base_url=LOOPBACK_URL
    ) as c:
        yield c


@pytest.fixture
def token(migrated_engine: Engine) -> dict[str, str]:
    _, secret = create_token(SqlTokenRecords(migrated_engine), "alice")
    return {"Authorization": f"Bearer {secret}"}


def _read(
    client: TestClient, token: dict[str, str], uri: str, caps: Any, **headers: str
) -> tuple[int, dict[str, Any]]:
    body, standard = rpc("resources/read", {"uri": uri}, caps=caps)
    response = client.post("/mcp", content=body, headers={**standard, **token, **headers})
    reply: dict[str, Any] = json.loads(response.content)
    return response.status_code, reply


def test_an_apps_host_reads_the_view_over_http(client: TestClient, token: dict[str, str]) -> None:
    status, reply = _read(client, token, VIEW, APPS)

    assert status == 200
    (content,) = reply["result"]["contents"]
    assert (content["uri"], content["mimeType"]) == (VIEW, APP_MIME)
    assert content["text"].startswith("<!doctype html>")


def test_a_name_header_naming_another_view_is_a_header_mismatch(
    client: TestClient, token: dict[str, str]
) -> None:
    status, reply = _read(client, token, VIEW, APPS, **{"Mcp-Name": "ui://notes/other.html"})

    assert status == 400
    assert reply["error"]["code"] == -32020
    assert "Mcp-Name" in reply["error"]["message"]
    assert "result" not in reply


def test_reading_the_view_without_apps_over_http_is_400_naming_the_capability(
    client: TestClient, token: dict[str, str]
) -> None:
    status, reply = _read(client, token, VIEW, None)

    assert status == 400
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {
        "requiredCapabilities": {"extensions": {UI: {"mimeTypes": [APP_MIME]}}}
    }


def test_an_unknown_view_over_http_is_not_found_with_the_uri(
    client: TestClient, token: dict[str, str]
) -> None:
    status, reply = _read(client, token, "ui://notes/other.html", APPS)

    assert reply["error"] == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "ui://notes/other.html"},
    }
    assert status == 200


def test_the_timeline_tool_is_linked_over_http_only_for_apps(
    client: TestClient, token: dict[str, str]
) -> None:
    def listed(caps: Any) -> dict[str, Any]:
        body, headers = rpc("tools/list", caps=caps)
        reply = json.loads(client.post("/mcp", content=body, headers={**headers, **token}).content)
        return {t["name"]: t for t in reply["result"]["tools"]}

    assert listed(APPS)["notes_timeline"]["_meta"] == {"ui": {"resourceUri": VIEW}}
    assert "_meta" not in listed(None)["notes_timeline"]
