"""Reading the tag index: the tags of notes, a workspace's tags with counts, and the filter
that keeps only notes carrying every one of some tags (for search, in the query itself)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Connection, bindparam, func, select

from notes_server.markup.tags import tag_key
from notes_server.store.engine import DriverRead, driver_connection, uses_driver
from notes_server.store.models import notes_table as notes
from notes_server.store.models import tags_table as tags

CHUNK = 500


class TagCount(NamedTuple):
    tag: str
    notes: int


# Built once (a statement built per call cost more than the read): one note's tags on the
# driver on SQLite, a page of notes' tags with an expanding IN list through Core.
_NOTE_TAGS = DriverRead(
    select(tags.c.tag).where(tags.c.note_id == bindparam("note_id")).order_by(tags.c.tag_key)
)
_PAGE_TAGS = (
    select(tags.c.note_id, tags.c.tag)
    .where(tags.c.note_id.in_(bindparam("ids", expanding=True)))
    .order_by(tags.c.note_id, tags.c.tag_key)
)


def note_tags(conn: Connection, note_id: str) -> list[str]:
    """One note's tags (as written in it), by tag key."""
    values = {"note_id": note_id}
    if uses_driver(conn):
        rows = _NOTE_TAGS.all(conn, values)
    else:
        rows = conn.execute(_NOTE_TAGS.statement, values).all()
    return [str(row[0]) for row in rows]


def tags_of(conn: Connection, note_ids: Sequence[str]) -> dict[str, list[str]]:
    """Each note's tags (as written in it), by note id; notes without tags map to []."""
    found: dict[str, list[str]] = {note_id: [] for note_id in note_ids}
    ids = list(found)
    if len(ids) == 1:
        found[ids[0]] = note_tags(conn, ids[0])
        return found
    driver = driver_connection(conn) if uses_driver(conn) else None
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        if driver is not None:  # an expanding IN through Core costs more than the read
            marks = ", ".join("?" for _ in chunk)
            rows: Any = driver.execute(
                f"SELECT note_id, tag FROM note_tags WHERE note_id IN ({marks})"
                " ORDER BY note_id, tag_key",
                chunk,
            )
        else:
            rows = conn.execute(_PAGE_TAGS, {"ids": chunk})
        for note_id, tag in rows:
            found[str(note_id)].append(str(tag))
    return found


def workspace_tags(
    conn: Connection, workspace: str, *, prefix: str | None, include_archived: bool, limit: int
) -> tuple[list[TagCount], int]:
    """The workspace's tags with how many notes carry each, by tag; each shown as first
    written (in the oldest note carrying it). ``prefix`` matches the start of the key (so a
    prefix ``project`` lists ``project``, ``projects`` and ``project/q3``). Also the total."""
    conditions: list[ColumnElement[bool]] = [tags.c.workspace == workspace]
    if prefix:
        key = tag_key(prefix.removeprefix("#"))
        conditions.append(func.substr(tags.c.tag_key, 1, len(key)) == key)
    if not include_archived:
        conditions.append(notes.c.archived.is_(False))
    rows = conn.execute(
        select(tags.c.tag_key, tags.c.tag, notes.c.created_at, notes.c.seq)
        .join(notes, notes.c.id == tags.c.note_id)
        .where(*conditions, notes.c.workspace == workspace)
        .order_by(tags.c.tag_key, notes.c.created_at, notes.c.seq)
    ).all()
    counted: dict[str, list[Any]] = {}
    for key, tag, _created, _seq in rows:
        entry = counted.get(key)
        if entry is None:
            counted[key] = [tag, 1]
        else:
            entry[1] += 1
    listed = [TagCount(str(tag), int(count)) for tag, count in counted.values()]
    return listed[:limit], len(listed)


def having_all(workspace: str, tag_names: Sequence[str]) -> list[ColumnElement[bool]]:
    """Conditions on `notes` that keep the notes carrying every one of ``tag_names``."""
    return [
        notes.c.id.in_(
            select(tags.c.note_id).where(tags.c.workspace == workspace, tags.c.tag_key == key)
        )
        for key in sorted({tag_key(name.removeprefix("#")) for name in tag_names})
    ]
