"""The history repository: the one write of a note row keeps the replaced version (content,
front matter, author) or writes nothing; deletes and prune; the 0011 migration's round trip
leaves notes, search and the older rows working. Both implementations, both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from notes_server.store import folders, history, migrate, notes, search
from notes_server.store.engine import read_tx, write_tx

WS = "file:///home/alice/notes"
OTHER = "file:///home/alice/work"
NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
ALICE = notes.Author("alice", "notes_update")


def seed(engine: Engine, workspace: str = WS, path: str = "a.md") -> notes.NoteRecord:
    with write_tx(engine) as conn:
        note = notes.insert_note(
            conn,
            workspace=workspace,
            path=path,
            title="Plan",
            body="v1 body",
            now=NOW,
            author=notes.Author("bob", "notes_create"),
        )
        folders.set_extra(conn, note.id, "owner: bob\n")
    return note


def test_an_update_keeps_the_replaced_version_with_its_author_and_front_matter(
    migrated_engine: Engine,
) -> None:
    note = seed(migrated_engine)

    with write_tx(migrated_engine) as conn:
        updated = notes.update_fields(
            conn, note, now=NOW + timedelta(hours=1), author=ALICE, body="v2 body"
        )
    with read_tx(migrated_engine) as conn:
        kept = history.revision(conn, note.id, 1)
        author = history.current_author(conn, note.id)

    assert updated is not None and updated.version == 2
    assert kept == history.Revision(
        note.id, 1, WS, "a.md", "Plan", "v1 body", "owner: bob\n", False, NOW, "bob", "notes_create"
    )
    assert author == ("alice", "notes_update")


def test_an_update_from_a_stale_version_writes_nothing(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    with write_tx(migrated_engine) as conn:
        assert notes.update_fields(conn, note, now=NOW, author=ALICE, body="v2") is not None

    with write_tx(migrated_engine) as conn:
        stale = notes.update_fields(conn, note, now=NOW, author=ALICE, body="lost?")
    with read_tx(migrated_engine) as conn:
        current = notes.get_note(conn, WS, note.id)
        kept = history.versions_kept(conn, note.id)

    assert stale is None
    assert current is not None and (current.version, current.body) == (2, "v2")
    assert kept == [1]


def test_keeping_a_version_twice_is_refused_not_an_error(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)

    with write_tx(migrated_engine) as conn:
        first = history.keep_revision(conn, note.id, 1, NOW)
        second = history.keep_revision(conn, note.id, 1, NOW)
        missing = history.keep_revision(conn, "note_nope", 1, NOW)

    assert (first, second, missing) == (True, False, False)


def test_search_follows_a_versioned_update(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, note, now=NOW, author=ALICE, body="penguin feathers")

    with read_tx(migrated_engine) as conn:
        hits = search.search(conn, WS, "penguin", include_archived=False, limit=5, offset=0)

    assert [hit.note.id for hit in hits] == [note.id]


def test_a_permanent_delete_removes_the_history(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    keep = seed(migrated_engine, path="b.md")
    with write_tx(migrated_engine) as conn:
        changed = notes.update_fields(conn, note, now=NOW, author=ALICE, body="v2")
        notes.update_fields(conn, keep, now=NOW, author=ALICE, body="v2")
        assert changed is not None
        assert notes.delete_note(conn, changed)

    with read_tx(migrated_engine) as conn:
        assert history.count(conn, note.id) == 0
        assert history.count(conn, keep.id) == 1


def test_prune_counts_and_filters_by_the_workspace_notes_are_in_now(
    migrated_engine: Engine,
) -> None:
    here = seed(migrated_engine)
    there = seed(migrated_engine, workspace=OTHER)
    with write_tx(migrated_engine) as conn:
        for note in (here, there):
            current = note
            for i in range(3):
                moment = NOW + timedelta(days=i)
                changed = notes.update_fields(
                    conn, current, now=moment, author=ALICE, body=f"v{i + 2}"
                )
                assert changed is not None
                current = changed

    with write_tx(migrated_engine) as conn:
        pruned = history.prune(conn, replaced_before=NOW + timedelta(days=2), workspace=WS)
    with read_tx(migrated_engine) as conn:
        left = (history.versions_kept(conn, here.id), history.versions_kept(conn, there.id))

    assert pruned == history.Pruned(revisions=2, notes=1)
    assert left == ([3], [3, 2, 1])


def test_the_history_migration_round_trips_with_notes_and_search_intact(
    migrated_engine: Engine,
) -> None:
    note = seed(migrated_engine)
    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, note, now=NOW, author=ALICE, body="alpha")

    migrate.downgrade(migrated_engine, "0009")
    with write_tx(migrated_engine) as conn:
        conn.execute(
            text("UPDATE notes SET body = 'beta', version = version + 1 WHERE id = :id"),
            {"id": note.id},
        )
    migrate.upgrade(migrated_engine)
    migrate.check(migrated_engine)

    with write_tx(migrated_engine) as conn:
        current = notes.get_note(conn, WS, note.id)
        assert current is not None and current.version == 3
        assert notes.update_fields(conn, current, now=NOW, author=ALICE, body="gamma")
    with read_tx(migrated_engine) as conn:
        kept = history.revision(conn, note.id, 3)
        hits = search.search(conn, WS, "gamma", include_archived=False, limit=5, offset=0)

    # The version written before the upgrade is kept with no author (it was not recorded).
    assert kept is not None and (kept.body, kept.principal, kept.tool) == ("beta", None, None)
    assert [hit.note.id for hit in hits] == [note.id]
