"""The link and tag index at the store level: the migration's backfill of notes written
before it, deletes, the folder writes, and archived notes in tag counts (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine, insert, select, text

from notes_server.store import content_index, folders, links, migrate, notes, tags
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import front_matter_table, links_table, notes_table, tags_table
from notes_server.store.notes import NoteRecord

WS = "file:///home/alice/notes"
NOW = datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)
BEFORE = "0013"  # the revision before 0014


def index_rows(engine: Engine) -> tuple[list[Any], list[Any]]:
    with read_tx(engine) as conn:
        link_rows = conn.execute(
            select(*[c for c in links_table.c if c.name != "id"]).order_by(
                links_table.c.note_id, links_table.c.position
            )
        ).all()
        tag_rows = conn.execute(
            select(tags_table).order_by(tags_table.c.note_id, tags_table.c.tag_key)
        ).all()
    return [tuple(r) for r in link_rows], [tuple(r) for r in tag_rows]


def raw_note(conn: Any, note_id: str, path: str, title: str, body: str, ws: str = WS) -> None:
    conn.execute(
        insert(notes_table).values(
            id=note_id,
            workspace=ws,
            path=path,
            title=title,
            title_key=notes.title_key(title),
            body=body,
            created_at=NOW,
            updated_at=NOW,
            version=1,
            archived=False,
        )
    )


def test_the_migration_indexes_notes_written_before_it_as_every_write_would(
    migrated_engine: Engine,
) -> None:
    migrate.downgrade(migrated_engine, BEFORE)
    with write_tx(migrated_engine) as conn:
        raw_note(conn, "note_a", "a/plan.md", "Plan", "[[Other]] [x](../b.md#H) #Tag `#no`")
        raw_note(conn, "note_b", "b.md", "Other", "[[Plan|p]] [[a/plan.md]] [[Ghost]] #tag")
        raw_note(conn, "note_c", "c.md", "Twin", "[[twin]]")
        raw_note(conn, "note_d", "d.md", "Twin", "")
        raw_note(conn, "note_e", "e.md", "Plan", "elsewhere", ws="file:///home/bob/notes")
        conn.execute(insert(front_matter_table).values(note_id="note_b", extra="tags: [fm, Tag]\n"))

    migrate.upgrade(migrated_engine)
    backfilled = index_rows(migrated_engine)
    with write_tx(migrated_engine) as conn:
        assert content_index.reindex_all(conn) == 5
    assert index_rows(migrated_engine) == backfilled

    with read_tx(migrated_engine) as conn:
        a = notes.get_note(conn, WS, "note_a")
        b = notes.get_note(conn, WS, "note_b")
        assert a is not None and b is not None
        assert [(o.text, o.target and o.target.id) for o in links.outgoing(conn, b, limit=10)] == [
            ("Plan", "note_a"),
            ("a/plan.md", "note_a"),
            ("Ghost", None),
        ]
        assert links.counts(conn, a) == links.LinkCounts(2, 0, 1)
        assert tags.tags_of(conn, ["note_a", "note_b", "note_c"]) == {
            "note_a": ["Tag"],
            "note_b": ["fm", "Tag"],
            "note_c": [],
        }
        c = notes.get_note(conn, WS, "note_c")
        assert c is not None and links.counts(conn, c).unresolved == 1  # two notes titled Twin
    migrate.downgrade(migrated_engine, BEFORE)
    with read_tx(migrated_engine) as conn:
        names = conn.execute(text("SELECT count(*) FROM notes")).scalar_one()
    assert names == 5
    migrate.upgrade(migrated_engine)


def test_a_deleted_note_leaves_no_rows_and_its_backlinks_dangle_or_move_on(
    migrated_engine: Engine,
) -> None:
    with write_tx(migrated_engine) as conn:
        first = notes.insert_note(conn, workspace=WS, path="1.md", title="Dup", body="#x", now=NOW)
        second = notes.insert_note(conn, workspace=WS, path="2.md", title="Dup", body="", now=NOW)
        source = notes.insert_note(
            conn, workspace=WS, path="s.md", title="S", body="[[Dup]] [[1.md]]", now=NOW
        )
        assert notes.delete_note(conn, first)
        targets = [o.target and o.target.id for o in links.outgoing(conn, source, limit=10)]
        assert targets == [second.id, None]
        assert tags.tags_of(conn, [first.id]) == {first.id: []}
        left = conn.execute(
            select(links_table.c.position).where(links_table.c.note_id == first.id)
        ).all()
        assert left == []


def test_folder_writes_index_front_matter_tags_and_archived_notes_count_only_on_request(
    migrated_engine: Engine,
) -> None:
    with write_tx(migrated_engine) as conn:
        note = folders.insert_imported(
            conn,
            workspace=WS,
            path="f.md",
            title="F",
            body="#body",
            created=NOW,
            updated=NOW,
            extra="tags:\n  - front\n",
        )
        replaced = folders.replace_content(
            conn, note, title="F", body="#changed", extra="tags: other\n", updated=NOW
        )
        assert replaced is not None
        assert tags.tags_of(conn, [note.id]) == {note.id: ["changed", "other"]}
        notes.update_fields(conn, replaced, now=NOW, archived=True, archived_at=NOW)
        live, total = tags.workspace_tags(conn, WS, prefix=None, include_archived=False, limit=10)
        every, _ = tags.workspace_tags(conn, WS, prefix=None, include_archived=True, limit=10)
    assert (live, total) == ([], 0)
    assert every == [tags.TagCount("changed", 1), tags.TagCount("other", 1)]


words = st.text(st.sampled_from("ab xyz"), min_size=0, max_size=8)


@given(
    st.lists(
        st.tuples(
            words, st.sampled_from(["[[Old]]", "[[old|x]]", "[[Old#H]]", "`[[Old]]`", "[[Other]]"])
        ),
        max_size=8,
    )
)
def test_a_rename_rewrites_exactly_the_links_to_the_renamed_title(
    parts: list[tuple[str, str]],
) -> None:
    from notes_server.markup.links import parse_links
    from notes_server.store.link_rewrite import rewritten_body

    body = "".join(text + link for text, link in parts)
    before = NoteRecord("note_t", WS, "t.md", "Old", "", NOW, NOW, 1, False, None)
    after = NoteRecord("note_t", WS, "t.md", "New Title", "", NOW, NOW, 2, False, None)

    new = rewritten_body(body, "s.md", before, after)

    old_links = [link.target.casefold() for link in parse_links(body)]
    new_links = [link.target for link in parse_links(new)]
    assert len(new_links) == len(old_links)
    assert new_links == ["New Title" if t == "old" else "Other" for t in old_links]
    assert new.count("`[[Old]]`") == body.count("`[[Old]]`")
