"""The HTTP shell as a composition: routes contributed by extensions sit behind the same guard,
authentication and error handling as `/mcp`, and nothing is ever answered in plain text."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.testclient import TestClient

from notes_server.app import create_server
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.app import build_http_app
from notes_server.transports.http.middleware.auth import (
    PublicRoute,
    build_authenticator,
    principal_of,
)
from notes_server.transports.http.responses import json_response
from tests.transports.http_support import LOOPBACK_URL

SECRET_PATH = "/srv/secret/extension.py"


async def whoami(request: Request) -> Response:
    return json_response(200, {"principal": principal_of(request.scope)})


async def status(request: Request) -> Response:
    return json_response(200, {"status": "ok"})


async def broken(request: Request) -> Response:
    raise RuntimeError(f"an extension bug in {SECRET_PATH}")


EXTRA: list[BaseRoute] = [
    Route("/ext/whoami", whoami, methods=["GET"]),
    Route("/ext/broken", broken, methods=["GET"]),
    PublicRoute("/ext/status", status, methods=["GET"]),
]


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    http = HttpSettings()  # token authentication on a loopback bind
    server = create_server(settings, services)
    auth = build_authenticator(settings, http, services)
    app = build_http_app(server, auth, http, extra_routes=EXTRA)
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


def bearer(engine: Engine, principal: str = "bob") -> dict[str, str]:
    _, secret = create_token(SqlTokenRecords(engine), principal)
    return {"Authorization": f"Bearer {secret}"}


def assert_json_error(response: httpx.Response, status: int, code: int, message: str) -> None:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": code, "message": message},
    }


def test_an_extension_route_gets_the_authenticated_principal(
    client: TestClient, migrated_engine: Engine
) -> None:
    response = client.get("/ext/whoami", headers=bearer(migrated_engine))

    assert response.status_code == 200
    assert response.json() == {"principal": "bob"}


def test_an_extension_route_needs_a_credential(client: TestClient) -> None:
    response = client.get("/ext/whoami")

    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer resource_metadata=")


def test_a_public_extension_route_needs_no_credential(client: TestClient) -> None:
    assert client.get("/ext/status").json() == {"status": "ok"}


def test_an_extension_route_is_behind_the_origin_guard(client: TestClient) -> None:
    response = client.get("/ext/status", headers={"Origin": "https://evil.example"})

    assert_json_error(response, 403, -32600, "Forbidden: Origin not allowed")


def test_an_exception_in_a_route_is_a_json_rpc_500_with_the_traceback_only_in_the_log(
    client: TestClient, migrated_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="notes_server")
    response = client.get("/ext/broken", headers=bearer(migrated_engine))

    assert_json_error(response, 500, -32603, "Internal error")
    assert SECRET_PATH not in response.text
    assert any(SECRET_PATH in (r.exc_text or "") for r in caplog.records)


def test_an_unknown_path_is_a_json_404_once_authenticated(
    client: TestClient, migrated_engine: Engine
) -> None:
    response = client.get("/nowhere", headers=bearer(migrated_engine))

    assert_json_error(response, 404, -32600, "Not Found")


def test_an_unknown_path_needs_a_credential_first(client: TestClient) -> None:
    assert client.get("/nowhere").status_code == 401


def test_a_method_without_a_route_is_a_json_405_naming_the_allowed_ones(
    client: TestClient, migrated_engine: Engine
) -> None:
    response = client.put("/mcp", headers=bearer(migrated_engine))

    assert_json_error(response, 405, -32600, "Method Not Allowed")
    assert response.headers["allow"] == "POST"
