"""Read transactions: one consistent snapshot each, on any thread, nested or not, and on SQLite
without a pooled connection (each thread reads on one held connection, closed on dispose)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from notes_server.store import grants, notes
from notes_server.store.engine import read_statement, read_tx, write_tx

WS = "file:///home/alice/notes"
NOW = datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)
# PostgreSQL's READ COMMITTED takes a snapshot per statement, not per transaction.
_ONE_SNAPSHOT = "a SQLite read transaction reads one snapshot"


def _insert(engine: Engine, path: str) -> notes.NoteRecord:
    with write_tx(engine) as conn:
        return notes.insert_note(conn, workspace=WS, path=path, title=path, body="", now=NOW)


def _count(conn: object) -> int:
    from sqlalchemy import Connection

    assert isinstance(conn, Connection)
    return int(conn.execute(text("SELECT count(*) FROM notes")).scalar_one())


@pytest.mark.sqlite_only(_ONE_SNAPSHOT)
def test_a_read_transaction_keeps_its_snapshot_while_a_writer_commits(
    migrated_engine: Engine,
) -> None:
    first = _insert(migrated_engine, "a.md")
    with read_tx(migrated_engine) as conn:
        assert notes.get_note(conn, WS, first.id) == first
        second = _insert(migrated_engine, "b.md")
        assert notes.get_note(conn, WS, second.id) is None
        assert _count(conn) == 1
    with read_tx(migrated_engine) as conn:
        assert notes.get_note(conn, WS, second.id) == second
        assert _count(conn) == 2


@pytest.mark.sqlite_only(_ONE_SNAPSHOT)
def test_a_read_inside_a_read_gets_its_own_snapshot(migrated_engine: Engine) -> None:
    with read_tx(migrated_engine) as outer:
        assert _count(outer) == 0
        _insert(migrated_engine, "a.md")
        with read_tx(migrated_engine) as inner:
            assert _count(inner) == 1
        assert _count(outer) == 0


def test_a_failed_read_ends_its_snapshot_and_the_next_read_works(
    migrated_engine: Engine,
) -> None:
    with pytest.raises(LookupError), read_tx(migrated_engine) as conn:
        assert _count(conn) == 0
        raise LookupError("not found")
    _insert(migrated_engine, "a.md")
    with read_tx(migrated_engine) as conn:
        assert _count(conn) == 1


def test_reads_on_many_threads_while_writes_commit_see_only_committed_notes(
    migrated_engine: Engine,
) -> None:
    with write_tx(migrated_engine) as conn:
        grants.upsert(conn, "alice", WS, "read", NOW)
    written = [_insert(migrated_engine, f"n{i}.md") for i in range(5)]
    failures: list[BaseException] = []
    start = threading.Barrier(11)

    def reader() -> None:
        try:
            start.wait(timeout=30)
            for _ in range(50):
                with read_tx(migrated_engine) as conn:
                    assert grants.role_for(conn, "alice", WS) == "read"
                    for note in written:
                        assert notes.get_note(conn, WS, note.id) == note
                    count = _count(conn)
                    assert count >= len(written)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(10)]
    for thread in threads:
        thread.start()
    start.wait(timeout=30)
    for i in range(20):
        _insert(migrated_engine, f"w{i}.md")
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    with read_tx(migrated_engine) as conn:
        assert _count(conn) == 25


@pytest.mark.sqlite_only("the pysqlite per-thread snapshots")
def test_sqlite_reads_take_no_pooled_connection(migrated_engine: Engine, store_impl: str) -> None:
    with read_tx(migrated_engine) as conn:
        _count(conn)
        held = migrated_engine.pool.checkedout()
    assert held == (1 if store_impl == "core" else 0)


@pytest.mark.sqlite_only("the SQLite write-ahead log")
def test_disposing_the_engine_closes_every_threads_read_connection(
    migrated_engine: Engine,
) -> None:
    _insert(migrated_engine, "a.md")

    def read() -> None:
        with read_tx(migrated_engine) as conn:
            _count(conn)

    read()
    other = threading.Thread(target=read)
    other.start()
    other.join(timeout=30)
    database = migrated_engine.url.database
    assert database is not None
    wal = Path(database + "-wal")
    assert wal.exists()

    migrated_engine.dispose()

    # The last connection to close checkpoints the log and deletes it: none is left open.
    assert not wal.exists()
    read()  # the engine stays usable: this thread opens a new connection


def test_a_one_statement_read_sees_each_commit_and_a_later_read_transaction_keeps_its_snapshot(
    migrated_engine: Engine,
) -> None:
    first = _insert(migrated_engine, "a.md")
    with read_statement(migrated_engine) as conn:
        assert notes.get_note(conn, WS, first.id) == first
    second = _insert(migrated_engine, "b.md")
    with read_statement(migrated_engine) as conn:
        assert notes.get_note(conn, WS, second.id) == second
    with read_tx(migrated_engine) as conn:
        assert _count(conn) == 2
        _insert(migrated_engine, "c.md")
        if migrated_engine.dialect.name == "sqlite":
            assert _count(conn) == 2  # the snapshot began with the read transaction


@pytest.mark.sqlite_only("the SQLite write-ahead log")
def test_a_one_statement_read_leaves_no_snapshot_open_that_would_block_a_checkpoint(
    migrated_engine: Engine,
) -> None:
    note = _insert(migrated_engine, "a.md")
    with read_statement(migrated_engine) as conn:
        assert notes.get_note(conn, WS, note.id) == note
    _insert(migrated_engine, "b.md")
    with migrated_engine.connect() as conn:
        busy, _frames, _done = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
    assert busy == 0
