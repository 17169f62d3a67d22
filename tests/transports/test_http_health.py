"""`GET /healthz`: 200 when the database answers with the schema this build needs, 503 with an
actionable reason otherwise; public (no token), no driver text, URL or path in the answer."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sqlalchemy import Engine
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.keyring import KeyRing
from notes_server.store import migrate
from notes_server.store.engine import make_engine
from notes_server.tools.services import Services
from tests import pg_support
from tests.transports.http_support import LOOPBACK_URL


def client_for(settings: Settings, services: Services | None = None) -> TestClient:
    app = create_http_app(settings, HttpSettings(), services)
    return TestClient(app, base_url=LOOPBACK_URL, raise_server_exceptions=False)


def test_healthz_answers_ok_without_a_token_when_the_schema_is_current(
    settings: Settings, migrated_engine: Engine
) -> None:
    with client_for(settings, Services(settings, engine=migrated_engine)) as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "schema": migrate.HEAD}
    assert response.headers["cache-control"] == "no-store"


def test_healthz_is_503_and_says_to_migrate_when_the_schema_is_behind(
    settings: Settings, migrated_engine: Engine
) -> None:
    migrate.downgrade(migrated_engine, "0007")
    with client_for(settings, Services(settings, engine=migrated_engine)) as client:
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "reason": f"schema is at 0007, not {migrate.HEAD}: run notes-server migrate",
    }


def test_healthz_is_503_when_the_database_cannot_be_reached(
    settings: Settings, tmp_path: Path
) -> None:
    # Nothing listens on port 1: the connection is refused at once.
    unreachable = dataclasses.replace(
        settings, db_url="postgresql+psycopg://nobody:secret@127.0.0.1:1/notes"
    )
    with client_for(unreachable) as client:
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "reason": "database unreachable"}
    assert "secret" not in response.text and "127.0.0.1" not in response.text


def test_healthz_reports_an_empty_database_as_unmigrated(tmp_path: Path) -> None:
    if pg_support.on_postgresql():
        url = pg_support.database_url(tmp_path, migrated=False)
    else:
        url = f"sqlite:///{tmp_path}/empty.db"
    settings = Settings(db_url=url, principal="alice", state_keys=KeyRing.generate_spec())
    engine = make_engine(url)
    try:
        with client_for(settings, Services(settings, engine=engine)) as client:
            response = client.get("/healthz")
    finally:
        engine.dispose()
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "reason": f"schema is at nothing, not {migrate.HEAD}: run notes-server migrate",
    }
