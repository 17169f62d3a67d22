"""`details.granted_details`, the one read of `notes_read` (the grant, the note by id and what
the indexes know of it), returns exactly what the separate reads return: `notes.get_granted`
then `details.note_details`, on both repository implementations (and PostgreSQL with
NOTES_SERVER_TEST_DB=postgresql), through `engine.read_statement` as the tool runs it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from notes_server.store import details, grants, notes
from notes_server.store.engine import read_statement, read_tx, write_tx
from notes_server.store.links import LinkCounts

WS = "file:///home/alice/notes"
OTHER = "file:///home/alice/other"
NOW = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture
def ids(migrated_engine: Engine) -> dict[str, str]:
    """A note with tags, front matter, a resolved and an unresolved link, linked from two
    notes (one twice); a bare note; a note in a workspace alice is not granted."""
    with write_tx(migrated_engine) as conn:
        grants.upsert(conn, "alice", WS, "read", NOW)
        hub = notes.insert_note(
            conn,
            workspace=WS,
            path="hub.md",
            title="Hub",
            body="See [[Leaf]] and [[Nowhere]]. #zeta #Alpha #project/q3",
            now=NOW,
        )
        notes.set_front_matter(conn, hub.id, "owner: alice\npriority: 2", new=True)
        leaf = notes.insert_note(
            conn, workspace=WS, path="leaf.md", title="Leaf", body="plain", now=NOW
        )
        for i, body in enumerate(("[[Hub]] and [[Hub]] again", "back to [[Hub]]")):
            notes.insert_note(
                conn, workspace=WS, path=f"in{i}.md", title=f"In {i}", body=body, now=NOW
            )
        other = notes.insert_note(
            conn, workspace=OTHER, path="x.md", title="X", body="[[Hub]] #t", now=NOW
        )
    return {"hub": hub.id, "leaf": leaf.id, "other": other.id}


def _separately(engine: Engine, principal: str, workspace: str, note_id: str) -> object:
    with read_tx(engine) as conn:
        granted = notes.get_granted(conn, principal, workspace, note_id)
        if granted is None:
            return None
        note = granted.note
        shown = None if note is None else details.note_details(conn, note)
        return details.GrantedDetails(granted.role, note, shown)


def _together(engine: Engine, principal: str, workspace: str, note_id: str) -> object:
    with read_statement(engine) as conn:
        return details.granted_details(conn, principal, workspace, note_id)


@pytest.mark.parametrize(
    ("principal", "workspace", "which"),
    [
        ("alice", WS, "hub"),
        ("alice", WS, "leaf"),
        ("alice", WS, "missing"),
        ("alice", WS, "other"),  # a note of another workspace is no note here
        ("alice", OTHER, "other"),  # no grant
        ("bob", WS, "hub"),  # no grant
    ],
)
def test_the_one_statement_returns_what_the_separate_reads_return(
    migrated_engine: Engine, ids: dict[str, str], principal: str, workspace: str, which: str
) -> None:
    note_id = ids.get(which, "note_missing")
    together = _together(migrated_engine, principal, workspace, note_id)
    assert together == _separately(migrated_engine, principal, workspace, note_id)


def test_the_details_of_a_note_with_tags_front_matter_and_links(
    migrated_engine: Engine, ids: dict[str, str]
) -> None:
    found = _together(migrated_engine, "alice", WS, ids["hub"])
    assert isinstance(found, details.GrantedDetails)
    assert found.role == "read" and found.note is not None and found.note.title == "Hub"
    assert found.details == details.Details(
        "owner: alice\npriority: 2",
        ["Alpha", "project/q3", "zeta"],
        LinkCounts(outgoing=2, unresolved=1, incoming=2),
    )
    assert found.note.created_at == NOW and found.note.created_at.tzinfo is UTC
    assert type(found.note.archived) is bool
    missing = _together(migrated_engine, "alice", WS, "note_missing")
    assert missing == details.GrantedDetails("read", None, None)
    assert _together(migrated_engine, "bob", WS, ids["hub"]) is None


def test_a_write_from_another_engine_is_seen_by_the_next_read(
    migrated_engine: Engine, ids: dict[str, str]
) -> None:
    """Nothing is remembered between reads: a commit through another engine (another
    process's connection) shows in the very next one-statement read."""
    from notes_server.store.engine import make_engine

    assert _together(migrated_engine, "alice", WS, ids["leaf"]) is not None
    other = make_engine(migrated_engine.url.render_as_string(hide_password=False))
    try:
        with write_tx(other) as conn:
            leaf = notes.get_note(conn, WS, ids["leaf"])
            assert leaf is not None
            notes.update_fields(conn, leaf, now=NOW, body="now [[Hub]] #fresh")
            grants.upsert(conn, "alice", WS, "write", NOW)
    finally:
        other.dispose()
    found = _together(migrated_engine, "alice", WS, ids["leaf"])
    assert isinstance(found, details.GrantedDetails) and found.note is not None
    assert found.role == "write"
    assert (found.note.body, found.note.version) == ("now [[Hub]] #fresh", 2)
    assert found.details is not None and found.details.tags == ["fresh"]
    assert found.details.counts == LinkCounts(outgoing=1, unresolved=0, incoming=1)
