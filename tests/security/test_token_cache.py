"""Remembered token checks: answered from memory only while the database has not changed, the
token has not expired and the verdict is younger than the TTL. Revocation stays immediate."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine

from notes_server.security.token_cache import TTL, CachedTokenVerifier
from notes_server.security.tokens import TokenVerifier, create_token, utc_now
from notes_server.store import grants, tokens
from notes_server.store.engine import make_engine, write_tx
from notes_server.store.freshness import SqliteChangeCounter, no_counter
from notes_server.store.tokens import SqlTokenRecords, TokenInfo

WS = "file:///home/carol/notes"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


class CountingRecords(SqlTokenRecords):
    """The real repository, counting how often verification reads it and records a use."""

    lookups = 0
    touches = 0

    def find_active(self, token_hash: str, now: datetime) -> TokenInfo | None:
        self.lookups += 1
        return super().find_active(token_hash, now)

    def touch_if_due(self, token_id: int, last_used_at: datetime | None, now: datetime) -> None:
        self.touches += 1
        super().touch_if_due(token_id, last_used_at, now)


class Clock:
    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now


def cached(
    engine: Engine, db: Path, clock: Clock, *, recheck_here: bool = False
) -> tuple[CachedTokenVerifier, CountingRecords]:
    records = CountingRecords(engine)
    verifier = TokenVerifier(records, clock=clock)
    counter = SqliteChangeCounter(db)
    return CachedTokenVerifier(verifier, counter, recheck_here=recheck_here), records


def commit_elsewhere(engine: Engine, action: Callable[[Connection], object]) -> None:
    """A commit on another engine's connections, as another process (the CLI) makes it."""
    other = make_engine(str(engine.url))
    try:
        with write_tx(other) as conn:
            action(conn)
    finally:
        other.dispose()


def accept(verifier: CachedTokenVerifier, secret: str) -> None:
    """Two full checks: the first records the token's use (a commit, so what it remembered is
    stale at once), the second finds it recorded recently and writes nothing."""
    assert [verifier.principal_for(secret) for _ in range(2)] == ["bob", "bob"]


def db_path(engine: Engine) -> Path:
    assert engine.url.database is not None
    return Path(engine.url.database)


def test_an_accepted_token_is_remembered_without_reading_the_database(
    migrated_engine: Engine,
) -> None:
    clock = Clock()
    verifier, records = cached(migrated_engine, db_path(migrated_engine), clock)
    _, secret = create_token(records, "bob", now=clock.now)

    assert verifier.remembered(secret) is None  # nothing known yet
    accept(verifier, secret)
    assert [verifier.remembered(secret) for _ in range(3)] == ["bob"] * 3
    assert records.lookups == 2


@pytest.mark.parametrize("recheck_here", [False, True])
def test_a_token_revoked_by_another_process_is_refused_at_once(
    migrated_engine: Engine, recheck_here: bool
) -> None:
    """Whether a stale verdict falls back to the caller's full check or is re-read at once."""
    clock = Clock()
    db = db_path(migrated_engine)
    verifier, records = cached(migrated_engine, db, clock, recheck_here=recheck_here)
    token_id, secret = create_token(records, "bob", now=clock.now)
    accept(verifier, secret)
    assert verifier.remembered(secret) == "bob"

    commit_elsewhere(migrated_engine, lambda conn: tokens.revoke(conn, token_id, utc_now()))

    assert verifier.remembered(secret) is None
    assert verifier.principal_for(secret) is None
    assert verifier.remembered(secret) is None


def test_a_remembered_token_is_refused_once_it_expires(migrated_engine: Engine) -> None:
    clock = Clock()
    verifier, records = cached(migrated_engine, db_path(migrated_engine), clock)
    _, secret = create_token(records, "bob", expires_in=timedelta(seconds=5), now=clock.now)
    accept(verifier, secret)
    assert verifier.remembered(secret) == "bob"

    clock.now += timedelta(seconds=5)  # the database did not change: only the clock did

    assert verifier.remembered(secret) is None
    assert verifier.principal_for(secret) is None


def test_a_remembered_verdict_is_checked_again_after_the_ttl(migrated_engine: Engine) -> None:
    clock = Clock()
    verifier, records = cached(migrated_engine, db_path(migrated_engine), clock)
    _, secret = create_token(records, "bob", now=clock.now)
    accept(verifier, secret)
    assert verifier.remembered(secret) == "bob"

    clock.now += TTL

    assert verifier.remembered(secret) is None
    assert verifier.principal_for(secret) == "bob"
    assert records.lookups == 3


def test_without_a_change_counter_every_check_reads_the_database(migrated_engine: Engine) -> None:
    records = CountingRecords(migrated_engine)
    verifier = CachedTokenVerifier(TokenVerifier(records), no_counter)
    _, secret = create_token(records, "bob")

    assert [verifier.principal_for(secret) for _ in range(2)] == ["bob", "bob"]
    assert verifier.remembered(secret) is None
    assert records.lookups == 2


def test_the_change_counter_moves_when_another_connection_commits(
    migrated_engine: Engine,
) -> None:
    counter = SqliteChangeCounter(db_path(migrated_engine))
    before = counter()
    assert before is not None and counter() == before

    create_token(SqlTokenRecords(migrated_engine), "bob")

    assert counter() not in (None, before)


def test_the_change_counter_of_a_missing_database_is_unknown_and_creates_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "gone.db"

    assert SqliteChangeCounter(missing)() is None
    assert not missing.exists()


def test_with_recheck_here_a_verdict_made_stale_by_any_commit_is_renewed_by_one_read(
    migrated_engine: Engine,
) -> None:
    """A note written by anyone moves the counter; the token is read again on the caller's
    thread (no use recorded, no worker thread needed) and remembered at the new count."""
    clock = Clock()
    verifier, records = cached(migrated_engine, db_path(migrated_engine), clock, recheck_here=True)
    _, secret = create_token(records, "bob", now=clock.now)
    accept(verifier, secret)
    lookups, touches = records.lookups, records.touches

    commit_elsewhere(migrated_engine, lambda conn: grants.upsert(conn, "carol", WS, "read", NOW))

    assert [verifier.remembered(secret) for _ in range(3)] == ["bob"] * 3
    assert records.lookups == lookups + 1  # one read for the change, then memory again
    assert records.touches == touches
