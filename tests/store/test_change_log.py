"""The change log: every note mutation appends exactly one row of its kind in its own
transaction (a rolled-back one logs nothing), the log prunes itself, and the change feed hands
committed changes, also those of another connection, to its listeners. Both implementations,
both backends."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text

from notes_server.store import changes, folders, notes
from notes_server.store.engine import make_engine, read_tx, write_tx

WS = "file:///home/alice/notes"
OTHER = "file:///home/alice/work"
NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
ALICE = notes.Author("alice", "notes_update")


def seed(engine: Engine, path: str = "a.md") -> notes.NoteRecord:
    with write_tx(engine) as conn:
        return notes.insert_note(
            conn, workspace=WS, path=path, title="Plan", body="v1", now=NOW, author=ALICE
        )


def logged_after(engine: Engine, seq: int) -> list[changes.Change]:
    with read_tx(engine) as conn:
        return changes.since(conn, seq)


def position(engine: Engine) -> int:
    with read_tx(engine) as conn:
        return changes.latest(conn)


def test_a_created_note_logs_one_created_row(migrated_engine: Engine) -> None:
    start = position(migrated_engine)
    note = seed(migrated_engine)

    logged = logged_after(migrated_engine, start)

    assert [(c.workspace, c.note_id, c.kind, c.previous_workspace) for c in logged] == [
        (WS, note.id, "created", None)
    ]
    assert logged[0].seq > start


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"body": "v2"}, "updated"),
        ({"title": "Renamed"}, "updated"),
        ({"path": "b.md"}, "moved"),
        ({"path": "b.md", "body": "moved body"}, "moved"),
        ({"archived": True, "archived_at": NOW}, "archived"),
    ],
)
def test_each_update_kind_logs_exactly_one_row(
    migrated_engine: Engine, fields: dict[str, object], kind: str
) -> None:
    note = seed(migrated_engine)
    start = position(migrated_engine)

    with write_tx(migrated_engine) as conn:
        assert notes.update_fields(conn, note, now=NOW, author=ALICE, **fields) is not None

    assert [(c.note_id, c.kind) for c in logged_after(migrated_engine, start)] == [(note.id, kind)]


def test_a_restore_logs_restored(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    with write_tx(migrated_engine) as conn:
        archived = notes.update_fields(
            conn, note, now=NOW, author=ALICE, archived=True, archived_at=NOW
        )
    assert archived is not None
    start = position(migrated_engine)

    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, archived, now=NOW, author=ALICE, archived=False, archived_at=None)

    assert [c.kind for c in logged_after(migrated_engine, start)] == ["restored"]


def test_a_move_between_workspaces_names_both(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    start = position(migrated_engine)

    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, note, now=NOW, author=ALICE, workspace=OTHER)

    (logged,) = logged_after(migrated_engine, start)
    assert (logged.kind, logged.workspace, logged.previous_workspace) == ("moved", OTHER, WS)
    assert logged.workspaces() == (OTHER, WS)


def test_deletes_log_deleted_whichever_path_deletes(migrated_engine: Engine) -> None:
    first, second = seed(migrated_engine, "a.md"), seed(migrated_engine, "b.md")
    start = position(migrated_engine)

    with write_tx(migrated_engine) as conn:
        assert notes.delete_note(conn, first)
    with write_tx(migrated_engine) as conn:
        assert folders.delete_if_version(conn, second)

    assert [(c.note_id, c.kind) for c in logged_after(migrated_engine, start)] == [
        (first.id, "deleted"),
        (second.id, "deleted"),
    ]


def test_a_rolled_back_mutation_logs_nothing(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    start = position(migrated_engine)

    with pytest.raises(RuntimeError), write_tx(migrated_engine) as conn:
        notes.update_fields(conn, note, now=NOW, author=ALICE, body="never")
        notes.insert_note(
            conn, workspace=WS, path="c.md", title="C", body="", now=NOW, author=ALICE
        )
        raise RuntimeError("abort")

    assert logged_after(migrated_engine, start) == []
    assert position(migrated_engine) == start


def test_a_stale_update_logs_nothing(migrated_engine: Engine) -> None:
    note = seed(migrated_engine)
    with write_tx(migrated_engine) as conn:
        notes.update_fields(conn, note, now=NOW, author=ALICE, body="v2")
    start = position(migrated_engine)

    with write_tx(migrated_engine) as conn:
        assert notes.update_fields(conn, note, now=NOW, author=ALICE, body="stale") is None

    assert logged_after(migrated_engine, start) == []


def test_the_log_prunes_rows_too_old_or_too_far_behind(migrated_engine: Engine) -> None:
    old = (datetime.now(UTC) - timedelta(hours=changes.MAX_AGE_HOURS + 1)).replace(tzinfo=None)
    insert = text(
        "INSERT INTO note_changes (seq, workspace, note_id, kind, at) "
        "VALUES (:seq, :ws, 'n', 'updated', :at)"
    )
    recent = datetime.now(UTC).replace(tzinfo=None)
    with write_tx(migrated_engine) as conn:
        conn.execute(insert, {"seq": 3, "ws": WS, "at": old})
        conn.execute(insert, {"seq": 5, "ws": WS, "at": recent})
        conn.execute(insert, {"seq": 7, "ws": WS, "at": recent})
        # The PRUNE_EVERY-th row prunes: the old one and those MAX_ROWS behind it go.
        far = changes.PRUNE_EVERY * (1 + changes.MAX_ROWS // changes.PRUNE_EVERY)
        conn.execute(insert, {"seq": far - changes.MAX_ROWS + 1, "ws": WS, "at": recent})
        conn.execute(insert, {"seq": far, "ws": WS, "at": recent})

    kept = [c.seq for c in logged_after(migrated_engine, 0)]
    assert kept == [far - changes.MAX_ROWS + 1, far]


class Collected:
    def __init__(self) -> None:
        self.changes: list[changes.Change] = []
        self.arrived = threading.Condition()

    def __call__(self, batch: Sequence[changes.Change]) -> None:
        with self.arrived:
            self.changes.extend(batch)
            self.arrived.notify_all()

    def wait_for(self, count: int) -> list[changes.Change]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.changes) >= count, timeout=10)
            return list(self.changes)


def test_the_feed_delivers_commits_of_another_connection_and_never_a_rollback(
    migrated_engine: Engine, settings: object, store_impl: str
) -> None:
    feed = changes.ChangeFeed(migrated_engine)
    collected = Collected()
    subscription = feed.subscribe(collected)
    other = make_engine(str(migrated_engine.url.render_as_string(hide_password=False)))
    try:
        with pytest.raises(RuntimeError), write_tx(other) as conn:
            notes.insert_note(
                conn, workspace=WS, path="x.md", title="X", body="", now=NOW, author=ALICE
            )
            raise RuntimeError("abort")
        note = seed(other, "kept.md")
        with write_tx(migrated_engine) as conn:
            notes.update_fields(conn, note, now=NOW, author=ALICE, body="v2")

        got = collected.wait_for(2)
    finally:
        subscription.close()
        other.dispose()

    assert [(c.note_id, c.kind) for c in got] == [(note.id, "created"), (note.id, "updated")]
    assert feed.listeners() == 0


def test_one_feed_per_engine_serves_every_listener(migrated_engine: Engine) -> None:
    feed = changes.feed(migrated_engine)
    assert changes.feed(migrated_engine) is feed
    first, second = Collected(), Collected()
    subscriptions = [feed.subscribe(first), feed.subscribe(second)]
    try:
        note = seed(migrated_engine)
        assert [c.note_id for c in first.wait_for(1)] == [note.id]
        assert [c.note_id for c in second.wait_for(1)] == [note.id]
    finally:
        for subscription in subscriptions:
            subscription.close()
