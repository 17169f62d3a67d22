"""DriverWrite sends the driver exactly what a Core execution would, inside the same transaction."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, insert

from notes_server.store import audit, migrate, nonces, notes
from notes_server.store.engine import DriverWrite, make_engine, read_tx, write_tx

WS = "file:///home/alice/notes"
NOW = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)
LATER = datetime(2026, 3, 1, 12, 40, 0, 7, tzinfo=UTC)


def _engine(path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    return engine


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored value as SQLite holds it (text, not Python types), by table."""
    conn = sqlite3.connect(path)
    try:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("notes", "consumed_nonces", "audit_log")
        }
    finally:
        conn.close()


def _confirmed_delete(engine: Engine, *, fast: bool) -> None:
    """Claim, delete, audit and prune through the repositories (fast) or plain Core."""
    with write_tx(engine) as conn:
        doomed = notes.insert_note(conn, workspace=WS, path="a.md", title="A", body="x", now=NOW)
        notes.insert_note(conn, workspace=WS, path="b.md", title="B", body="y", now=NOW)
    claim: dict[str, Any] = {
        "nonce": "n1",
        "principal": "alice",
        "tool": "notes_delete",
        "outcome": "deleted",
        "answer_digest": None,
        "result_json": '{"deleted":true}',
        "consumed_at": NOW,
        "expires_at": LATER,
    }
    entry = audit.AuditRecord(
        NOW, "alice", "notes_delete", "deleted", WS, doomed.id, "A", "a.md", "n1"
    )
    with write_tx(engine) as conn:
        if fast:
            kwargs = {k: v for k, v in claim.items() if k != "consumed_at"}
            assert nonces.claim(conn, now=NOW, **kwargs) is True
            assert notes.delete_note(conn, doomed) is True
            audit.record(conn, entry)
            assert nonces.prune(conn, expired_before=NOW) == 0
        else:
            conn.execute(insert(nonces.nonces).values(**claim))
            conn.execute(notes._DELETE.statement, {"note_id": doomed.id, "version": doomed.version})
            conn.execute(insert(audit.audit).values(**_audit(entry)))


def _audit(entry: audit.AuditRecord) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__slots__}


def test_fast_writes_store_exactly_what_core_stores(tmp_path: Path) -> None:
    fast_db, core_db = tmp_path / "fast.db", tmp_path / "core.db"
    for path, fast in ((fast_db, True), (core_db, False)):
        engine = _engine(path)
        try:
            _confirmed_delete(engine, fast=fast)
        finally:
            engine.dispose()
    fast_rows, core_rows = _rows(fast_db), _rows(core_db)
    # Note ids are random: compare everything else.
    assert [row[2:] for row in fast_rows["notes"]] == [row[2:] for row in core_rows["notes"]]
    assert [row[4] for row in fast_rows["notes"]] == ["B"]
    assert fast_rows["consumed_nonces"] == core_rows["consumed_nonces"]
    assert fast_rows["consumed_nonces"][0][6:] == (
        "2026-03-01 12:30:15.123456",
        "2026-03-01 12:40:00.000007",
    )
    fast_audit = [row[:6] + row[7:] for row in fast_rows["audit_log"]]
    core_audit = [row[:6] + row[7:] for row in core_rows["audit_log"]]
    assert fast_audit == core_audit and len(fast_audit) == 1


def test_a_second_claim_of_a_nonce_is_refused_by_the_fast_insert(
    migrated_engine: Engine,
) -> None:
    values: dict[str, Any] = {
        "principal": "alice",
        "tool": "notes_delete",
        "outcome": "deleted",
        "answer_digest": None,
        "result_json": None,
        "now": NOW,
        "expires_at": LATER,
    }
    with write_tx(migrated_engine) as conn:
        assert nonces.claim(conn, nonce="n1", **values) is True
        assert nonces.claim(conn, nonce="n1", **values) is False
    with read_tx(migrated_engine) as conn:
        record = nonces.get(conn, "n1")
    assert record == nonces.NonceRecord("n1", "alice", "notes_delete", "deleted", None, None)


def test_fast_prune_removes_only_expired_nonces_and_reports_the_count(
    migrated_engine: Engine,
) -> None:
    with write_tx(migrated_engine) as conn:
        for nonce, expires in (("old1", NOW), ("old2", NOW), ("live", LATER)):
            nonces.claim(
                conn,
                nonce=nonce,
                principal="alice",
                tool="notes_delete",
                outcome="declined",
                answer_digest=None,
                result_json=None,
                now=NOW,
                expires_at=expires,
            )
    with write_tx(migrated_engine) as conn:
        assert nonces.prune(conn, expired_before=LATER) == 2
    with read_tx(migrated_engine) as conn:
        assert [nonces.get(conn, n) is None for n in ("old1", "old2", "live")] == [
            True,
            True,
            False,
        ]


def test_fast_writes_roll_back_with_their_transaction(migrated_engine: Engine) -> None:
    with write_tx(migrated_engine) as conn:
        note = notes.insert_note(conn, workspace=WS, path="a.md", title="A", body="x", now=NOW)
    with pytest.raises(RuntimeError), write_tx(migrated_engine) as conn:
        assert notes.delete_note(conn, note) is True
        raise RuntimeError("abort")
    with read_tx(migrated_engine) as conn:
        assert notes.get_note(conn, WS, note.id) == note


def test_a_stale_version_deletes_nothing(migrated_engine: Engine) -> None:
    with write_tx(migrated_engine) as conn:
        note = notes.insert_note(conn, workspace=WS, path="a.md", title="A", body="x", now=NOW)
    stale = notes.NoteRecord(**{**_fields(note), "version": note.version + 1})
    with write_tx(migrated_engine) as conn:
        assert notes.delete_note(conn, stale) is False
        assert notes.get_note(conn, WS, note.id) == note


def _fields(note: notes.NoteRecord) -> dict[str, Any]:
    return {name: getattr(note, name) for name in note.__slots__}


@pytest.mark.sqlite_only("DriverWrite runs on the pysqlite driver")
def test_fast_write_refuses_a_statement_that_needs_python_side_defaults(
    migrated_engine: Engine,
) -> None:
    # notes.body and notes.version have Python-side defaults that only Core computes.
    fast = DriverWrite(insert(notes.notes))
    with write_tx(migrated_engine) as conn, pytest.raises(TypeError, match="column defaults"):
        fast.rowcount(
            conn,
            {
                "id": "note_x",
                "workspace": WS,
                "path": "a.md",
                "title": "A",
                "title_key": "a",
                "created_at": NOW,
                "updated_at": NOW,
                "archived": False,
            },
        )
