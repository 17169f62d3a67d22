"""An extension over HTTP, composed by `app.create_http_app`: its route sits behind the same
authentication as `/mcp`, and its tools, resources and per-request `_meta` reach HTTP clients."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app, notes_extension
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from tests.demo_extension import DEMO_ID, demo_extension
from tests.transports.http_support import LOOPBACK_URL, rpc


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    extensions = [notes_extension(services), demo_extension(services)]
    app = create_http_app(settings, HttpSettings(), services, extensions)
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


@pytest.fixture
def token(migrated_engine: Engine) -> dict[str, str]:
    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    return {"Authorization": f"Bearer {secret}"}


def post(client: TestClient, token: dict[str, str], method: str, **kw: Any) -> dict[str, Any]:
    body, headers = rpc(method, **kw)
    response = client.post("/mcp", content=body, headers={**headers, **token})
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = json.loads(response.content)
    return reply


def test_an_extension_route_is_served_to_an_authenticated_client(
    client: TestClient, token: dict[str, str]
) -> None:
    response = client.get("/demo/hello", headers=token)

    assert response.status_code == 200
    assert response.text == "hello from demo"


def test_an_extension_route_needs_a_credential_like_mcp(client: TestClient) -> None:
    response = client.get("/demo/hello")

    assert response.status_code == 401
    assert response.headers["content-type"] == "application/json"


def test_the_default_http_app_has_no_extension_routes(
    settings: Settings, services: Services, token: dict[str, str]
) -> None:
    app = create_http_app(settings, HttpSettings(), services)
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        assert test_client.get("/demo/hello", headers=token).status_code == 404


def test_http_clients_see_the_extension_in_discover_tools_and_resources(
    client: TestClient, token: dict[str, str]
) -> None:
    discover = post(client, token, "server/discover")["result"]
    capable = post(client, token, "tools/list", caps={"extensions": {DEMO_ID: {}}})["result"]
    plain = post(client, token, "tools/list")["result"]
    read = post(client, token, "resources/read", params={"uri": "demo:1"})["result"]

    assert discover["capabilities"]["extensions"] == {DEMO_ID: {"version": "1"}}
    assert capable["tools"][-1]["_meta"] == {DEMO_ID: {"view": "demo:0"}}
    assert "_meta" not in plain["tools"][-1]
    assert read["contents"][0]["text"] == "demo:1 for bob"
