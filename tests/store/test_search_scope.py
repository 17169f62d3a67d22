"""Keyword search stays inside its scope (one workspace; archived notes only when asked) as
notes are written, archived, restored, moved between workspaces, edited and deleted, on both
backends (on SQLite the scope is part of every FTS5 rowid, migration 0025: these check that the
index follows every such change). Runs on whichever backend the suite runs on."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, update

from notes_server.store import migrate, notes, search
from notes_server.store.engine import read_tx, write_tx
from tests.store.seed import insert_notes

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/bob/notes"


def _hits(
    engine: Engine, query: str, *, workspace: str = MINE, archived: bool = False
) -> list[search.SearchHit]:
    with read_tx(engine) as conn:
        return search.search(conn, workspace, query, include_archived=archived, limit=50, offset=0)


def _ids(engine: Engine, query: str, **kw: object) -> list[str]:
    return [h.note.id for h in _hits(engine, query, **kw)]  # type: ignore[arg-type]


def _set(engine: Engine, note_id: str, **values: object) -> None:
    with write_tx(engine) as conn:
        conn.execute(update(notes.notes).where(notes.notes.c.id == note_id).values(**values))


def _record(engine: Engine, note_id: str) -> notes.NoteRecord:
    with read_tx(engine) as conn:
        found = notes.get_note(conn, MINE, note_id)
    assert found is not None
    return found


def _index_is_sound(engine: Engine) -> None:
    """SQLite: FTS5's own check, and one index row per note in each index."""
    if engine.dialect.name != "sqlite":
        return
    with engine.connect() as conn:
        total = conn.exec_driver_sql("SELECT count(*) FROM notes").scalar_one()
        for table in ("notes_fts", "notes_fts_tri"):
            conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            rows = conn.exec_driver_sql(f"SELECT count(*) FROM {table}_docsize").scalar_one()
            assert rows == total


def test_another_workspace_neither_appears_nor_changes_the_scores(
    migrated_engine: Engine,
) -> None:
    mine = insert_notes(migrated_engine, MINE, [("a", "walrus tusks"), ("b", "walrus only")])
    alone = [(h.note.id, h.rank) for h in _hits(migrated_engine, "walrus tusks")]
    theirs = insert_notes(migrated_engine, THEIRS, [("c", "walrus tusks")] * 5 + [("d", "tusks")])

    assert [(h.note.id, h.rank) for h in _hits(migrated_engine, "walrus tusks")] == alone
    assert [i for i, _ in alone] == mine
    assert set(_ids(migrated_engine, "walrus tusks", workspace=THEIRS)) == set(theirs)
    assert _ids(migrated_engine, "walrus", workspace="file:///home/nobody/notes") == []


def test_archived_notes_are_found_only_when_asked_and_then_in_note_order(
    migrated_engine: Engine,
) -> None:
    first, archived, last = insert_notes(
        migrated_engine, MINE, [("a", "kelp forest"), ("b", "kelp forest"), ("c", "kelp forest")]
    )
    _set(migrated_engine, archived, archived=True, archived_at=NOW)

    assert _ids(migrated_engine, "kelp") == [first, last]
    # Equal scores: oldest note first, the archived one in its place, not after the live ones.
    assert _ids(migrated_engine, "kelp", archived=True) == [first, archived, last]
    _index_is_sound(migrated_engine)


def test_a_restored_note_is_found_again_and_its_edits_follow_it(
    migrated_engine: Engine,
) -> None:
    (note,) = insert_notes(migrated_engine, MINE, [("Heron", "wading bird")])
    _set(migrated_engine, note, archived=True, archived_at=NOW)
    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, _record(migrated_engine, note), now=NOW, body="stork")
    assert _ids(migrated_engine, "stork") == []
    assert _ids(migrated_engine, "stork", archived=True) == [note]
    assert _ids(migrated_engine, "wading", archived=True) == []

    _set(migrated_engine, note, archived=False, archived_at=None)

    assert _ids(migrated_engine, "stork") == [note]
    assert _ids(migrated_engine, "heron") == [note]
    _index_is_sound(migrated_engine)


def test_a_note_moved_to_another_workspace_is_found_only_there(
    migrated_engine: Engine,
) -> None:
    moved, stays = insert_notes(migrated_engine, MINE, [("Otter", "river"), ("Otter", "sea")])

    _set(migrated_engine, moved, workspace=THEIRS, body="river bank")

    assert _ids(migrated_engine, "otter") == [stays]
    assert _ids(migrated_engine, "otter", workspace=THEIRS) == [moved]
    assert _ids(migrated_engine, "bank", workspace=THEIRS) == [moved]
    assert _ids(migrated_engine, "river") == []
    _set(migrated_engine, moved, workspace=MINE)
    assert _ids(migrated_engine, "otter") == [moved, stays]
    assert _ids(migrated_engine, "otter", workspace=THEIRS) == []
    _index_is_sound(migrated_engine)


def test_deleted_and_rewritten_notes_leave_no_trace_in_any_scope(
    migrated_engine: Engine,
) -> None:
    live, archived = insert_notes(migrated_engine, MINE, [("Pika", "alpine"), ("Pika", "talus")])
    _set(migrated_engine, archived, archived=True, archived_at=NOW)
    with write_tx(migrated_engine) as conn:
        assert notes.delete_note(conn, _record(migrated_engine, archived))
        notes.update_fields(conn, _record(migrated_engine, live), now=NOW, title="Marmot")

    assert _ids(migrated_engine, "pika", archived=True) == []
    assert _ids(migrated_engine, "talus", archived=True) == []
    assert _ids(migrated_engine, "marmot", archived=True) == [live]
    _index_is_sound(migrated_engine)


@pytest.mark.parametrize("query", ["東京", "東京タワ"])
def test_substring_terms_keep_to_the_scope_too(migrated_engine: Engine, query: str) -> None:
    # Two characters: a scan of the scope's notes; more: the trigram index.
    mine, archived = insert_notes(migrated_engine, MINE, [("a", "東京タワー"), ("b", "東京タワー")])
    insert_notes(migrated_engine, THEIRS, [("c", "東京タワー")])
    _set(migrated_engine, archived, archived=True, archived_at=NOW)

    assert _ids(migrated_engine, query) == [mine]
    assert _ids(migrated_engine, query, archived=True) == [mine, archived]
    _index_is_sound(migrated_engine)


def test_the_scope_migration_round_trips_with_workspaces_and_archived_notes(
    migrated_engine: Engine,
) -> None:
    migrate.downgrade(migrated_engine, "0024")
    mine, archived = insert_notes(migrated_engine, MINE, [("Lynx", "snow"), ("Lynx", "ice")])
    theirs = insert_notes(migrated_engine, THEIRS, [("Lynx", "snow")])
    _set(migrated_engine, archived, archived=True, archived_at=NOW)

    migrate.upgrade(migrated_engine)

    assert _ids(migrated_engine, "lynx") == [mine]
    assert _ids(migrated_engine, "lynx", archived=True) == [mine, archived]
    assert _ids(migrated_engine, "snow", workspace=THEIRS) == theirs
    _index_is_sound(migrated_engine)
    (later,) = insert_notes(migrated_engine, THEIRS, [("Lynx", "late")])
    migrate.downgrade(migrated_engine, "0024")
    if migrated_engine.dialect.name == "sqlite":
        with migrated_engine.connect() as conn:
            conn.exec_driver_sql("INSERT INTO notes_fts(notes_fts) VALUES ('integrity-check')")
            found = conn.exec_driver_sql(
                "SELECT n.id FROM notes_fts JOIN notes n ON n.seq = notes_fts.rowid"
                " WHERE notes_fts MATCH 'lynx' ORDER BY n.seq"
            ).all()
        assert [r[0] for r in found] == [mine, archived, *theirs, later]
    migrate.upgrade(migrated_engine)
    assert _ids(migrated_engine, "lynx", workspace=THEIRS) == [*theirs, later]
    _index_is_sound(migrated_engine)
