"""Timestamps are aware UTC end to end: the clocks, what the store takes and returns (both
implementations), and what SQLite keeps (the same text as before, so no migration)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import StatementError

from notes_server.security import tokens as token_auth
from notes_server.store import notes, tokens
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.tokens import TOUCH_INTERVAL, SqlTokenRecords
from notes_server.tools import services
from notes_server.tools.views import iso

HOUR = timedelta(hours=1)

WS = "file:///home/alice/notes"
BERLIN_SUMMER = timezone(timedelta(hours=2))


def _stored_text(engine: Engine, note_id: str) -> tuple[str, str]:
    path = engine.url.database
    assert path is not None
    conn = sqlite3.connect(path)
    try:
        row = conn.execute(
            "SELECT created_at, updated_at FROM notes WHERE id = ?", (note_id,)
        ).fetchone()
    finally:
        conn.close()
    return row[0], row[1]


def test_the_clocks_give_aware_utc() -> None:
    for clock in (services.utc_now, token_auth.utc_now):
        now = clock()
        assert now.tzinfo is UTC
        assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


@pytest.mark.sqlite_only("SQLite's stored text")
def test_an_aware_time_in_any_zone_is_stored_as_the_old_utc_text_and_read_back_aware(
    migrated_engine: Engine,
) -> None:
    local = datetime(2026, 7, 1, 14, 0, 5, 250, tzinfo=BERLIN_SUMMER)
    with write_tx(migrated_engine) as conn:
        note = notes.insert_note(conn, workspace=WS, path="a.md", title="A", body="", now=local)
    assert _stored_text(migrated_engine, note.id) == (
        "2026-07-01 12:00:05.000250",
        "2026-07-01 12:00:05.000250",
    )
    with read_tx(migrated_engine) as conn:
        read = notes.get_note(conn, WS, note.id)
        by_path = notes.get_note_by_path(conn, WS, "a.md")
    assert read == by_path
    assert read is not None and read.created_at == local
    assert read.created_at.tzinfo is UTC and read.updated_at.tzinfo is UTC
    assert read.created_at == datetime(2026, 7, 1, 12, 0, 5, 250, tzinfo=UTC)


def test_a_naive_timestamp_is_refused_and_nothing_is_written(migrated_engine: Engine) -> None:
    naive = datetime(2026, 1, 1)
    with (
        pytest.raises(StatementError, match="timestamps must be timezone-aware"),
        write_tx(migrated_engine) as conn,
    ):
        notes.insert_note(conn, workspace=WS, path="a.md", title="A", body="", now=naive)
    with read_tx(migrated_engine) as conn:
        assert notes.get_note_by_path(conn, WS, "a.md") is None


@pytest.mark.sqlite_only("rows written as SQLite text")
def test_rows_written_by_earlier_versions_read_back_as_aware_utc(migrated_engine: Engine) -> None:
    """Databases written with naive UTC text keep working: same text, read as UTC."""
    path = migrated_engine.url.database
    assert path is not None
    raw = sqlite3.connect(path)
    try:
        raw.execute(
            "INSERT INTO notes (id, workspace, path, title, title_key, body, created_at,"
            " updated_at, version, archived, archived_at) VALUES ('note_old', ?, 'old.md',"
            " 'Old', 'old', 'x', '2025-12-31 23:59:59.000001', '2026-01-01 00:00:00.000000',"
            " 1, 1, '2026-01-02 03:04:05.000000')",
            (WS,),
        )
        raw.commit()
    finally:
        raw.close()
    with read_tx(migrated_engine) as conn:
        old = notes.get_note(conn, WS, "note_old")
    assert old is not None
    assert (old.created_at, old.updated_at, old.archived_at) == (
        datetime(2025, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    assert old.archived is True


def test_a_tokens_recorded_use_compares_with_the_clock(migrated_engine: Engine) -> None:
    """The comparison that raised TypeError on PostgreSQL (naive clock, aware column): the
    recorded use comes back aware and the verifier refreshes it once the interval passed."""
    records = SqlTokenRecords(migrated_engine)
    start = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
    clock = [start]
    _, secret = token_auth.create_token(records, "alice", now=start)
    verifier = token_auth.TokenVerifier(records, clock=lambda: clock[0])
    assert verifier.principal_for(secret) == "alice"
    first = records.find_active(token_auth.hash_token(secret), start)
    assert first is not None and first.last_used_at == start
    assert first.last_used_at.tzinfo is UTC and first.created_at.tzinfo is UTC
    clock[0] = start + TOUCH_INTERVAL + timedelta(seconds=1)
    assert verifier.principal_for(secret) == "alice"
    again = records.find_active(token_auth.hash_token(secret), clock[0])
    assert again is not None and again.last_used_at == clock[0]


def test_tool_results_show_utc_with_a_z_whatever_the_zone() -> None:
    assert iso(datetime(2026, 7, 1, 14, 0, 5, 999, tzinfo=BERLIN_SUMMER)) == "2026-07-01T12:00:05Z"
    assert iso(datetime(2026, 7, 1, 12, 0, 5, tzinfo=UTC)) == "2026-07-01T12:00:05Z"
    assert iso(datetime(2026, 7, 1, 12, 0, 5)) == "2026-07-01T12:00:05Z"
    assert iso(None) is None


def test_an_active_token_is_found_by_its_hash_until_it_expires_or_is_revoked(
    migrated_engine: Engine,
) -> None:
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    records = SqlTokenRecords(migrated_engine)
    expiring = records.create(
        principal="alice", name="ci", token_hash="a" * 64, now=now, expires_at=now + HOUR
    )
    records.create(principal="bob", name=None, token_hash="b" * 64, now=now, expires_at=None)

    found = records.find_active("a" * 64, now)
    assert found is not None
    assert (found.id, found.principal, found.name) == (expiring, "alice", "ci")
    assert (found.created_at, found.expires_at, found.revoked_at) == (now, now + HOUR, None)
    assert found.created_at.tzinfo is UTC
    assert records.find_active("a" * 64, now + HOUR) is None
    assert records.find_active("c" * 64, now) is None
    never = records.find_active("b" * 64, now + HOUR * 10_000)
    assert never is not None and never.expires_at is None

    with migrated_engine.begin() as conn:
        assert tokens.revoke(conn, never.id, now)
    assert records.find_active("b" * 64, now) is None
