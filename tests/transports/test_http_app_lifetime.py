"""What an HTTP app closes at shutdown: the engine of services it built itself, never an engine
it was handed (other apps and threads may still be using that one)."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, event, text
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.tools.services import Services
from tests.transports.http_support import LOOPBACK_URL


def open_connections(engine: Engine, settings: Settings) -> int:
    """Connections the database sees from anyone but `engine`'s own probe: on SQLite the
    process's open descriptors of the file, on PostgreSQL the sessions on the database."""
    if engine.dialect.name == "sqlite":
        database = engine.url.database
        assert database
        target = str(Path(database).resolve())
        fds = Path("/proc/self/fd")
        return sum(1 for fd in os.listdir(fds) if _points_at(fds / fd, target))
    with engine.connect() as conn:
        count = conn.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalar_one()
    return int(count)


def _points_at(link: Path, target: str) -> bool:
    try:
        return os.readlink(link) == target
    except OSError:
        return False


def test_an_app_that_built_its_services_closes_their_connections_at_shutdown(
    settings: Settings, migrated_engine: Engine
) -> None:
    migrated_engine.dispose()
    before = open_connections(migrated_engine, settings)
    migrated_engine.dispose()

    with TestClient(create_http_app(settings, HttpSettings()), base_url=LOOPBACK_URL) as client:
        assert client.get("/healthz").status_code == 200
        during = open_connections(migrated_engine, settings)
        migrated_engine.dispose()
    after = open_connections(migrated_engine, settings)

    assert during > before
    assert after == before


def test_an_app_handed_services_leaves_their_engine_open_at_shutdown(
    settings: Settings, migrated_engine: Engine
) -> None:
    disposed: list[Engine] = []
    event.listen(migrated_engine, "engine_disposed", disposed.append)
    services = Services(settings, engine=migrated_engine)

    for _ in range(2):  # two apps on one engine, as two workers' tests build them
        with TestClient(create_http_app(settings, HttpSettings(), services), base_url=LOOPBACK_URL):
            pass
    with migrated_engine.connect() as conn:
        alive = conn.execute(text("SELECT 1")).scalar_one()

    assert disposed == []
    assert alive == 1
