"""Writes keep only what changed in the link and tag index: after any sequence of writes the
rows are exactly what rebuilding the index from scratch gives (both backends)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from notes_server.store import content_index, notes
from notes_server.store.engine import write_tx
from notes_server.store.models import links_table, tags_table
from notes_server.store.notes import NoteRecord

WS = "file:///home/alice/notes"
OTHER = "file:///home/alice/other"
NOW = datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)
FRAGMENTS = (
    "[[A]]",
    "[[a|shown]]",
    "[[B#Heading]]",
    "[[b.md]]",
    "[[d/e.md]]",
    "[to c](c.md)",
    "[up](../a.md)",
    "`[[A]]`",
    "#t1",
    "#T1",
    "#t2/sub",
    "#123",
    " some words ",
    "\n",
    "x" * 70,
)
TITLES = ("A", "a", "B", "C", "b.md")
PATHS = ("a.md", "b.md", "c.md", "d/e.md", "f.md", "g/h.md")
EXTRAS = ("", "tags: [t1, fm]\n", "tags: fm, T2\n", "status: draft\n")


def index_now(conn: Connection) -> tuple[list[Any], list[Any]]:
    link_rows = conn.execute(
        select(*[c for c in links_table.c if c.name != "id"]).order_by(
            links_table.c.note_id, links_table.c.position
        )
    ).all()
    tag_rows = conn.execute(
        select(tags_table).order_by(tags_table.c.note_id, tags_table.c.tag_key)
    ).all()
    return [tuple(r) for r in link_rows], [tuple(r) for r in tag_rows]


def rebuilt(conn: Connection) -> tuple[list[Any], list[Any]]:
    """The index as `reindex_all` builds it from the notes as stored (then rolled back)."""
    nested = conn.begin_nested()
    try:
        content_index.reindex_all(conn)
        return index_now(conn)
    finally:
        nested.rollback()


def body(rng: random.Random) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randrange(0, 7)))


def free_path(conn: Connection, workspace: str, rng: random.Random) -> str | None:
    for path in rng.sample(PATHS, len(PATHS)):
        if notes.get_note_by_path(conn, workspace, path) is None:
            return path
    return None


def one_write(conn: Connection, rng: random.Random, live: list[NoteRecord]) -> str:
    """A random write of the kinds the tools make; what it was (for the failure message)."""
    kind = rng.choice(
        ["create", "body", "body", "edit_tail", "title", "move", "workspace", "front", "archive"]
        + (["delete"] if len(live) > 3 else [])
    )
    if kind == "create" or not live:
        workspace = WS if rng.random() < 0.8 else OTHER
        path = free_path(conn, workspace, rng)
        if path is None:
            return "create skipped (no free path)"
        note = notes.insert_note(
            conn, workspace=workspace, path=path, title=rng.choice(TITLES), body=body(rng), now=NOW
        )
        live.append(note)
        return f"create {path}"
    note = rng.choice(live)
    changes: dict[str, Any] = {}
    extra: str | None = None
    if kind == "body":
        changes["body"] = body(rng)
    elif kind == "edit_tail":  # an edit away from every link and tag: nothing to rewrite
        changes["body"] = note.body + " more"
    elif kind == "title":
        changes["title"] = rng.choice(TITLES)
    elif kind == "move":
        path = free_path(conn, note.workspace, rng)
        if path is None:
            return "move skipped"
        changes["path"] = path
    elif kind == "workspace":
        target = OTHER if note.workspace == WS else WS
        if notes.get_note_by_path(conn, target, note.path) is not None:
            return "workspace move skipped"
        changes["workspace"] = target
    elif kind == "front":
        extra = rng.choice(EXTRAS)
    elif kind == "archive":
        changes = {"archived": not note.archived, "archived_at": None if note.archived else NOW}
    elif kind == "delete":
        assert notes.delete_note(conn, note)
        live.remove(note)
        return f"delete {note.path}"
    updated = notes.update_fields(conn, note, now=NOW, extra=extra, **changes)
    assert updated is not None
    live[live.index(note)] = updated
    return f"{kind} {note.path}: {changes or extra!r}"


def test_after_any_sequence_of_writes_the_index_is_what_a_rebuild_gives(
    migrated_engine: Engine,
) -> None:
    rng = random.Random(22)
    live: list[NoteRecord] = []
    done: list[str] = []
    with write_tx(migrated_engine) as conn:
        for _ in range(160):
            done.append(one_write(conn, rng, live))
            assert index_now(conn) == rebuilt(conn), done[-5:]
        links_kept = len(index_now(conn)[0])
    assert links_kept > 0  # the sequence did leave links to compare


def test_an_edit_away_from_the_links_writes_no_link_or_tag_row(migrated_engine: Engine) -> None:
    with write_tx(migrated_engine) as conn:
        notes.insert_note(conn, workspace=WS, path="t.md", title="Target", body="", now=NOW)
        note = notes.insert_note(
            conn,
            workspace=WS,
            path="s.md",
            title="S",
            body="[[Target]] #tag\n" + "words " * 20,
            now=NOW,
        )
        # A mark on the stored rows that only a row written again would lose (a column the
        # comparison with the body's rows does not read).
        conn.execute(update(links_table).values(lookup_key="mark"))
        conn.execute(update(tags_table).values(tag="mark"))
        edited = notes.update_fields(conn, note, now=NOW, body=note.body + "x" * 200)
        assert edited is not None
        kept = (
            conn.execute(select(links_table.c.lookup_key)).scalars().all(),
            conn.execute(select(tags_table.c.tag)).scalars().all(),
        )
        assert kept == (["mark"], ["mark"])  # rows kept
        conn.execute(update(tags_table).values(tag="tag"))
        changed = notes.update_fields(conn, edited, now=NOW, body="[[Target]] and [[New]] #tag")
        assert changed is not None
        rows = conn.execute(
            select(links_table.c.target, links_table.c.lookup_key).order_by(links_table.c.position)
        ).all()
        # No context is stored: the first link, same text at the same place, keeps its row
        # though the text around it changed; the new one is inserted.
        assert [tuple(r) for r in rows] == [("Target", "mark"), ("New", "new")]
        conn.execute(
            update(links_table).values(lookup_key="target").where(links_table.c.target == "Target")
        )
        assert index_now(conn) == rebuilt(conn)
