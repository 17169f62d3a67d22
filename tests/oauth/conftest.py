"""Fixtures for the authorization server tests: the composed `--auth oauth` app, a browser
(its own cookie jar), a dynamically registered client and a signed-in flow."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import Settings
from notes_server.tools.services import Services
from tests.oauth.oauth_support import OAUTH, WS_A, WS_B, WS_C, Flow, set_password
from tests.transports.http_support import LOOPBACK_URL


@pytest.fixture
def app_client(settings: Settings, services: Services) -> Iterator[TestClient]:
    app = create_http_app(settings, OAUTH, Services(settings, engine=services.engine))
    with TestClient(app, base_url=LOOPBACK_URL, follow_redirects=False) as test_client:
        yield test_client


@pytest.fixture
def accounts(migrated_engine: Engine, grant: Callable[..., str]) -> dict[str, str]:
    """alice (workspaces A and B) and bob (workspace C), with passwords."""
    grant("alice", WS_A)
    grant("alice", WS_B, role="read")
    grant("bob", WS_C)
    set_password(migrated_engine, "alice", "alice-password-1")
    set_password(migrated_engine, "bob", "bob-password-12")
    return {"alice": "alice-password-1", "bob": "bob-password-12"}


@pytest.fixture
def flow(app_client: TestClient, accounts: dict[str, str], services: Services) -> Flow:
    made = Flow(app_client)
    made.services = services  # type: ignore[attr-defined]
    return made
