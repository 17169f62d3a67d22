"""Resources contributed by a `--tools-module` (the conformance fixture module): read, listed,
templated, and named by subscriptions in both eras; and the shipped server, which serves none
of them and still refuses a subscription to a URI that is not a note's."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app, create_server
from notes_server.config import HttpSettings, Settings
from notes_server.features.extension import Extension
from notes_server.features.registry import ExtensionConflict, ExtensionRegistry
from notes_server.protocol.server import McpServer
from notes_server.tools.base import CallContext
from notes_server.tools.services import Services
from tests.conformance.fixture_resources import PNG, TEXT, FixtureResources
from tests.helpers import make_request

FIXTURES = "tests.conformance.fixture_resources"
WATCHED = "test://watched-resource"
PRINCIPAL = "conformance"


@pytest.fixture
def fixture_settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, tools_modules=(FIXTURES,))


def ask(server: McpServer, method: str, params: dict[str, Any]) -> dict[str, Any]:
    raw = server.handle_raw(json.dumps(make_request(method, params)), PRINCIPAL)
    assert raw is not None
    reply: dict[str, Any] = json.loads(raw)
    return reply


def test_fixture_resources_are_read_by_uri_and_by_template(
    fixture_settings: Settings, services: Services
) -> None:
    server = create_server(fixture_settings, Services(fixture_settings, engine=services.engine))

    text = ask(server, "resources/read", {"uri": "test://static-text"})["result"]
    binary = ask(server, "resources/read", {"uri": "test://static-binary"})["result"]
    templated = ask(server, "resources/read", {"uri": "test://template/123/data"})["result"]
    unknown = ask(server, "resources/read", {"uri": "test://nothing"})["error"]

    assert text["contents"] == [
        {"uri": "test://static-text", "mimeType": "text/plain", "text": TEXT}
    ]
    assert binary["contents"][0]["mimeType"] == "image/png"
    assert base64.b64decode(binary["contents"][0]["blob"]) == PNG
    assert PNG.startswith(b"\x89PNG\r\n\x1a\n")
    assert templated["contents"] == [
        {"uri": "test://template/123/data", "mimeType": "text/plain", "text": "Data for ID: 123"}
    ]
    assert unknown == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "test://nothing"},
    }


def test_fixture_resources_and_template_are_listed_beside_the_notes(
    fixture_settings: Settings, services: Services
) -> None:
    server = create_server(fixture_settings, Services(fixture_settings, engine=services.engine))

    listed = ask(server, "resources/list", {})["result"]["resources"]
    templates = ask(server, "resources/templates/list", {})["result"]["resourceTemplates"]

    assert [r["uri"] for r in listed if r["uri"].startswith("test:")] == [
        "test://static-text",
        "test://static-binary",
    ]
    assert [t["uriTemplate"] for t in templates] == [
        "{+workspaceUri}/{+path}",
        "test://template/{id}/data",
    ]


def test_the_shipped_server_serves_no_fixture_resource(
    settings: Settings, services: Services
) -> None:
    server = create_server(settings, Services(settings, engine=services.engine))

    read = ask(server, "resources/read", {"uri": "test://static-text"})
    templates = ask(server, "resources/templates/list", {})["result"]["resourceTemplates"]

    assert read["error"] == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "test://static-text"},
    }
    assert [t["uriTemplate"] for t in templates] == ["{+workspaceUri}/{+path}"]


def listen(server: McpServer, uris: list[str]) -> list[bytes]:
    method = server.streams["subscriptions/listen"]
    ctx = CallContext(PRINCIPAL, {}, "l1")
    stream = method.open(ctx, {"notifications": {"resourceSubscriptions": uris}})
    try:
        messages, _ = stream.drain()
        return messages
    finally:
        stream.close()


def test_a_listen_acknowledges_a_fixture_uri(
    fixture_settings: Settings, services: Services
) -> None:
    server = create_server(fixture_settings, Services(fixture_settings, engine=services.engine))

    (ack,) = listen(server, [WATCHED])

    assert json.loads(ack)["params"]["notifications"] == {"resourceSubscriptions": [WATCHED]}


@pytest.mark.parametrize("uri", [WATCHED, "ui://notes/timeline.html", "https://example.com/x"])
def test_the_shipped_server_refuses_a_listen_on_a_uri_that_is_not_a_note(
    settings: Settings, services: Services, uri: str
) -> None:
    from notes_server.errors import InvalidParams

    server = create_server(settings, Services(settings, engine=services.engine))

    with pytest.raises(InvalidParams) as refused:
        listen(server, [uri])

    assert refused.value.message == "Invalid params: not a note URI"
    assert refused.value.data == {"uri": uri}


def session(client: TestClient) -> dict[str, str]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "fixture-resources-test", "version": "1"},
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    response = client.post("/mcp", content=json.dumps(message), headers=headers)
    assert response.status_code == 200, response.text
    headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
    headers["MCP-Protocol-Version"] = "2025-11-25"
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    client.post("/mcp", content=json.dumps(initialized), headers=headers)
    return headers


def legacy_subscribe(settings: Settings, services: Services) -> list[dict[str, Any]]:
    app = create_http_app(
        settings, HttpSettings(auth="none"), Services(settings, engine=services.engine)
    )
    replies = []
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        headers = session(client)
        for n, method in enumerate(("resources/subscribe", "resources/unsubscribe"), start=2):
            message = {"jsonrpc": "2.0", "id": n, "method": method, "params": {"uri": WATCHED}}
            response = client.post("/mcp", content=json.dumps(message), headers=headers)
            assert response.status_code == 200, response.text
            replies.append(response.json())
    return replies


def test_a_2025_http_session_subscribes_to_and_unsubscribes_from_a_fixture_uri(
    fixture_settings: Settings, services: Services
) -> None:
    subscribed, unsubscribed = legacy_subscribe(fixture_settings, services)

    assert subscribed == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert unsubscribed == {"jsonrpc": "2.0", "id": 3, "result": {}}


def test_a_2025_http_session_of_the_shipped_server_cannot_subscribe_to_it(
    settings: Settings, services: Services
) -> None:
    subscribed, _ = legacy_subscribe(settings, services)

    assert subscribed["error"] == {
        "code": -32602,
        "message": "Invalid params: not a note URI",
        "data": {"uri": WATCHED},
    }


def test_a_static_scheme_must_be_one_of_the_extensions_own_providers(
    services: Services,
) -> None:
    extension = Extension(
        name="odd",
        resource_providers={"test": FixtureResources(services)},
        static_resource_schemes=frozenset({"test", "other"}),
    )

    with pytest.raises(ExtensionConflict) as clash:
        ExtensionRegistry([extension])

    assert str(clash.value) == (
        "extension 'odd': static resource scheme 'other' is not one of its resource providers"
    )
