"""What a full note result shows beside the note: its kept front matter, its tags and its link
counts. On SQLite one statement on the driver (`notes_read` is the hottest tool: three reads
would cost more than the note itself); elsewhere the three indexed reads. `granted_details`
reads the grant, the note and all of that in one statement (`notes_read`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection

from notes_server.markup.tags import tag_key
from notes_server.store import folders, links, tags
from notes_server.store.engine import driver_connection, uses_driver
from notes_server.store.notes import COLUMNS, NoteRecord, get_granted


def _details_columns(note_id: str, workspace: str) -> str:
    """The five detail columns of the note with this id in this workspace (SQL expressions):
    kept front matter, tags, outgoing, unresolved and incoming link counts. U+001F joins the
    tags: no tag can hold it (clean_tag takes word characters, "-" and "/")."""
    return (
        f"(SELECT extra FROM note_front_matter WHERE note_id = {note_id}),"
        f" (SELECT group_concat(tag, char(31)) FROM note_tags WHERE note_id = {note_id}),"
        f" (SELECT count(*) FROM note_links WHERE note_id = {note_id}"
        f" AND workspace = {workspace}),"
        f" (SELECT count(*) FROM note_links WHERE note_id = {note_id}"
        f" AND workspace = {workspace} AND target_id IS NULL),"
        f" (SELECT count(DISTINCT note_id) FROM note_links WHERE target_id = {note_id}"
        f" AND workspace = {workspace})"
    )


_DETAILS_SQL = "SELECT " + _details_columns(":id", ":ws")


_NOTE_COLUMNS = ", ".join(f"n.{column.name}" for column in COLUMNS)
# The grant (no row: no grant), the note by id in exactly that workspace (NULL columns: no such
# note) and its details, as `notes.get_granted` and `_DETAILS_SQL` read them, in one statement:
# one snapshot without BEGIN and COMMIT (`engine.read_statement`), one round trip.
_GRANTED_DETAILS_SQL = (
    f"SELECT g.role, {_NOTE_COLUMNS}, {_details_columns('n.id', 'n.workspace')}"
    " FROM workspace_grants AS g"
    " LEFT JOIN notes AS n ON n.workspace = g.workspace AND n.id = :note_id"
    " WHERE g.principal = :principal AND g.workspace = :workspace"
)
_DETAILS_AT = 1 + len(COLUMNS)


class Details(NamedTuple):
    extra: str
    tags: list[str]
    counts: links.LinkCounts


class GrantedDetails(NamedTuple):
    """A principal's role on a workspace, the note asked for in it (None: no such note) and,
    with the note, its details."""

    role: str
    note: NoteRecord | None
    details: Details | None


def note_details(conn: Connection, note: NoteRecord) -> Details:
    if uses_driver(conn):
        row = (
            driver_connection(conn)
            .execute(_DETAILS_SQL, {"id": note.id, "ws": note.workspace})
            .fetchone()
        )
        assert row is not None
        return _details(row)
    return Details(
        folders.extra_of(conn, note.id), tags.note_tags(conn, note.id), links.counts(conn, note)
    )


def granted_details(
    conn: Connection, principal: str, workspace: str, note_id: str
) -> GrantedDetails | None:
    """`notes.get_granted` and, when the note is there, `note_details`: on SQLite one statement
    on the driver (what `engine.read_statement` may run without a transaction); elsewhere the
    separate reads, inside the caller's transaction (`read_statement` opens one there)."""
    if not uses_driver(conn):
        granted = get_granted(conn, principal, workspace, note_id)
        if granted is None:
            return None
        note = granted.note
        details = None if note is None else note_details(conn, note)
        return GrantedDetails(granted.role, note, details)
    values = {"principal": principal, "workspace": workspace, "note_id": note_id}
    row = driver_connection(conn).execute(_GRANTED_DETAILS_SQL, values).fetchone()
    if row is None:
        return None
    if row[1] is None:
        return GrantedDetails(str(row[0]), None, None)
    note = NoteRecord.from_driver_row(row[1:_DETAILS_AT])
    return GrantedDetails(str(row[0]), note, _details(row[_DETAILS_AT:]))


def _details(row: Sequence[Any]) -> Details:
    """(extra, tags joined by U+001F, outgoing, unresolved, incoming) as the driver returns them."""
    shown = sorted(row[1].split("\x1f"), key=tag_key) if row[1] else []
    return Details(row[0] or "", shown, links.LinkCounts(int(row[2]), int(row[3]), int(row[4])))
