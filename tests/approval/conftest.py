"""Fixtures for the notes_purge tests: the composed HTTP app and alice's and bob's tokens."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from tests.approval.purge_support import WS
from tests.transports.http_support import LOOPBACK_URL


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    app = create_http_app(settings, HttpSettings(), Services(settings, engine=services.engine))
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


@pytest.fixture
def browser(client: TestClient) -> TestClient:
    """The person's browser: the same app, its own cookie jar."""
    return TestClient(client.app, base_url=LOOPBACK_URL)


@pytest.fixture
def alice(migrated_engine: Engine, grant: Callable[..., str]) -> str:
    grant("alice", WS)
    return create_token(SqlTokenRecords(migrated_engine), "alice")[1]


@pytest.fixture
def bob(migrated_engine: Engine, grant: Callable[..., str]) -> str:
    grant("bob", WS)
    return create_token(SqlTokenRecords(migrated_engine), "bob")[1]
