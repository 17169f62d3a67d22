"""Fixtures for the confirmed-action tests: `flow`, an in-process server with a manual clock
(see confirm_support.Flow). Names are unique so they never shadow the root fixtures."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from notes_server.config import Settings
from notes_server.security.keyring import KeyRing
from tests import pg_support
from tests.tools.confirm_support import OTHER_WS, STATE_TTL, WS, Flow, ManualClock


# On PostgreSQL both names pick the same (Core) implementation: run it once.
@pytest.fixture(params=["auto"] if pg_support.on_postgresql() else ["auto", "core"])
def store_impl(request: pytest.FixtureRequest) -> str:
    """Every tool test runs on the SQLite implementation (fast path) and on the portable Core
    one, so the Core code the PostgreSQL backend builds on is tested today."""
    return str(request.param)


@pytest.fixture
def flow(tmp_path: Path, sqlite_template: Path, store_impl: str | None) -> Iterator[Flow]:
    """alice has write access to WS and OTHER_WS; the database holds no notes yet."""
    from notes_server.store.engine import make_engine
    from tests import pg_support

    if pg_support.on_postgresql():
        db_url = pg_support.database_url(tmp_path)
    else:
        shutil.copyfile(sqlite_template, tmp_path / "notes.db")
        db_url = f"sqlite:///{tmp_path}/notes.db"
    settings = Settings(
        db_url=db_url,
        principal="alice",
        state_keys=KeyRing.generate_spec(),
        state_ttl=STATE_TTL,
        store_impl=store_impl,
    )
    engine = make_engine(settings.db_url, store_impl=store_impl)
    try:
        harness = Flow(settings, engine, ManualClock())
        harness.grant("alice", WS)
        harness.grant("alice", OTHER_WS)
        yield harness
    finally:
        engine.dispose()
