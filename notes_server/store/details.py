"""What a full note result shows beside the note: its kept front matter, its tags and its link
counts. On SQLite one statement on the driver (`notes_read` is the hottest tool: three reads
would cost more than the note itself); elsewhere the three indexed reads."""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection

from notes_server.markup.tags import tag_key
from notes_server.store import folders, links, tags
from notes_server.store.engine import driver_connection, uses_driver
from notes_server.store.notes import NoteRecord

# U+001F joins the tags: no tag can hold it (clean_tag takes word characters, "-" and "/").
_DETAILS_SQL = (
    "SELECT (SELECT extra FROM note_front_matter WHERE note_id = :id),"
    " (SELECT group_concat(tag, char(31)) FROM note_tags WHERE note_id = :id),"
    " (SELECT count(*) FROM note_links WHERE note_id = :id AND workspace = :ws),"
    " (SELECT count(*) FROM note_links WHERE note_id = :id AND workspace = :ws"
    " AND target_id IS NULL),"
    " (SELECT count(DISTINCT note_id) FROM note_links WHERE target_id = :id"
    " AND workspace = :ws)"
)


class Details(NamedTuple):
    extra: str
    tags: list[str]
    counts: links.LinkCounts


def note_details(conn: Connection, note: NoteRecord) -> Details:
    if uses_driver(conn):
        row = (
            driver_connection(conn)
            .execute(_DETAILS_SQL, {"id": note.id, "ws": note.workspace})
            .fetchone()
        )
        assert row is not None
        shown = sorted(row[1].split("\x1f"), key=tag_key) if row[1] else []
        counts = links.LinkCounts(int(row[2]), int(row[3]), int(row[4]))
        return Details(row[0] or "", shown, counts)
    return Details(
        folders.extra_of(conn, note.id), tags.note_tags(conn, note.id), links.counts(conn, note)
    )
