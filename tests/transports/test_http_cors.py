"""CORS: a browser-based MCP client on an allowed origin can preflight and call `/mcp`.

In-process through the ASGI app with exact headers, and once against a real
`serve --transport http --allow-origin https://app.example` process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine
from starlette.routing import Route
from starlette.testclient import TestClient

from notes_server.app import create_server
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store import migrate
from notes_server.store.engine import make_engine
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.app import build_http_app
from notes_server.transports.http.middleware.auth import build_authenticator
from notes_server.transports.http.responses import json_response
from tests.transports.http_support import LOOPBACK_URL, rpc, start_http_server

APP = "https://app.example"
ALLOW_HEADERS = (
    "authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, "
    "mcp-session-id, last-event-id"
)
EXPOSE_HEADERS = "mcp-session-id, www-authenticate"
FORBIDDEN_ORIGIN = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Forbidden: Origin not allowed"},
}


def preflight_headers(origin: str, method: str = "POST") -> dict[str, str]:
    """What a browser sends before a cross-origin POST with MCP headers: no credentials."""
    return {
        "Origin": origin,
        "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "authorization,content-type,mcp-method",
    }


def expected_preflight(origin: str, methods: str = "POST") -> dict[str, str]:
    return {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": methods,
        "access-control-allow-headers": ALLOW_HEADERS,
        "access-control-max-age": "600",
        "vary": "Origin",
    }


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


def make_client(
    settings: Settings, services: Services, http: HttpSettings, **kw: object
) -> TestClient:
    settings = dataclasses.replace(settings, tools_modules=("tests.transports.http_support",))
    services = Services(settings, engine=services.engine)
    server = create_server(settings, services)
    auth = build_authenticator(settings, http, services)
    app = build_http_app(server, auth, http, **kw)  # type: ignore[arg-type]
    return TestClient(app, base_url=LOOPBACK_URL)


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    """Token authentication on a loopback bind, with https://app.example allowed."""
    with make_client(settings, services, HttpSettings(allowed_origins=(APP,))) as test_client:
        yield test_client


def test_a_preflight_from_an_allowed_origin_is_204_without_credentials(
    client: TestClient,
) -> None:
    response = client.options("/mcp", headers=preflight_headers(APP))

    assert response.status_code == 204
    assert response.content == b""
    assert {k: v for k, v in response.headers.items() if k != "content-length"} == (
        expected_preflight(APP)
    )


def test_a_loopback_origin_may_preflight_on_a_loopback_bind(client: TestClient) -> None:
    response = client.options("/mcp", headers=preflight_headers("http://localhost:5173"))

    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == "http://localhost:5173"


@pytest.mark.parametrize("origin", ["https://evil.example", "https://app.example.evil", "null"])
def test_a_preflight_from_a_disallowed_origin_is_403_json(client: TestClient, origin: str) -> None:
    response = client.options("/mcp", headers=preflight_headers(origin))

    assert response.status_code == 403
    assert response.headers["content-type"] == "application/json"
    assert response.json() == FORBIDDEN_ORIGIN
    assert cors_headers(response) == {}


def test_the_actual_request_from_an_allowed_origin_carries_cors_headers(
    client: TestClient, migrated_engine: Engine
) -> None:
    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    body, headers = rpc("tools/call", {"name": "test_whoami", "arguments": {}})
    headers.update({"Origin": APP, "Authorization": f"Bearer {secret}"})
    response = client.post("/mcp", content=body, headers=headers)

    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"] == {"principal": "bob"}
    assert cors_headers(response) == {
        "access-control-allow-origin": APP,
        "access-control-expose-headers": EXPOSE_HEADERS,
    }
    assert response.headers["vary"] == "Origin"


def test_a_401_to_an_allowed_origin_exposes_its_challenge(client: TestClient) -> None:
    body, headers = rpc("tools/list")
    response = client.post("/mcp", content=body, headers={**headers, "Origin": APP})

    assert response.status_code == 401
    assert response.headers["access-control-allow-origin"] == APP
    assert "www-authenticate" in response.headers["access-control-expose-headers"]
    assert response.headers["www-authenticate"].startswith("Bearer resource_metadata=")


def test_a_request_without_origin_gets_no_cors_headers(client: TestClient) -> None:
    body, headers = rpc("tools/list")
    response = client.post("/mcp", content=body, headers=headers)

    assert response.status_code == 401
    assert cors_headers(response) == {}


def test_an_options_request_that_is_not_a_preflight_goes_through_authentication(
    client: TestClient,
) -> None:
    response = client.options("/mcp", headers={"Origin": APP})

    assert response.status_code == 401
    assert "access-control-allow-methods" not in response.headers


def test_a_preflight_lists_the_methods_routed_at_its_path(
    settings: Settings, services: Services
) -> None:
    async def status(request: object) -> object:
        return json_response(200, {"ok": True})

    route = Route("/mcp", status, methods=["GET", "DELETE"])  # type: ignore[arg-type]
    http = HttpSettings(allowed_origins=(APP,))
    with make_client(settings, services, http, extra_routes=[route]) as client:
        response = client.options("/mcp", headers=preflight_headers(APP, "DELETE"))

    assert response.status_code == 204
    assert response.headers["access-control-allow-methods"] == "DELETE, GET, POST"


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/notes.db"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return url


def test_a_real_server_with_allow_origin_answers_a_browser_preflight(
    tmp_path: Path, database: str
) -> None:
    server = start_http_server(
        tmp_path, database, "--auth", "none", "--principal", "alice", "--allow-origin", APP
    )
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http_client:
            preflight = http_client.options("/mcp", headers=preflight_headers(APP))
            body, headers = rpc("tools/list")
            actual = http_client.post("/mcp", content=body, headers={**headers, "Origin": APP})
            refused = http_client.options("/mcp", headers=preflight_headers("https://evil.example"))
    finally:
        server.stop()

    assert preflight.status_code == 204
    # The real server also serves legacy sessions, which a browser ends with DELETE.
    assert cors_headers(preflight) == {
        k: v for k, v in expected_preflight(APP, "DELETE, GET, POST").items() if k != "vary"
    }
    assert preflight.headers["vary"] == "Origin"
    assert actual.status_code == 200
    assert actual.headers["access-control-allow-origin"] == APP
    assert refused.status_code == 403
    assert refused.json() == FORBIDDEN_ORIGIN
