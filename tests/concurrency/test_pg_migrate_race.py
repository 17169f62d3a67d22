"""Four `migrate` processes released at once on an empty PostgreSQL database: the upgrades are
serialized (an advisory lock before the version table is read), so exactly one creates the
schema and the others find it current; none fails on a half-created table."""

from __future__ import annotations

from pathlib import Path

import pytest

from notes_server.store import migrate
from notes_server.store.engine import make_engine
from tests import pg_support
from tests.concurrency.test_first_start_race import ALREADY, MIGRATED, run_together

MIGRATIONS = 4


def test_concurrent_migrations_of_an_empty_postgresql_database_upgrade_it_once(
    tmp_path: Path,
) -> None:
    problem = pg_support.reachable()
    if problem is not None:
        pytest.skip(problem)
    url = pg_support.database_url(tmp_path, migrated=False)
    results = run_together(
        tmp_path, {f"migrate-{i}": ["migrate", "--db", url] for i in range(MIGRATIONS)}
    )
    assert [code for code, _, _ in results.values()] == [0] * MIGRATIONS, results
    outputs = [out for _, out, _ in results.values()]
    assert sum(bool(MIGRATED.match(out)) for out in outputs) == 1, outputs
    assert sum(bool(ALREADY.match(out)) for out in outputs) == MIGRATIONS - 1, outputs
    engine = make_engine(url)
    try:
        assert migrate.current_revision(engine) == migrate.HEAD
    finally:
        engine.dispose()
