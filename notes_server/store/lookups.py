"""Bounded prefix and recency lookups over one workspace's live notes, for argument completion
and prompts. Nothing here knows about principals: callers authorize the workspace first.

A prefix is a range on an existing index, so a lookup reads at most `limit` index entries
whatever the workspace's size: `(workspace, path)` (the unique constraint) for paths and
`(workspace, title_key)` for titles. Both databases compare this text code point by code point
(SQLite always; our PostgreSQL databases use the C.UTF-8 collation), which is what makes the
range `[prefix, prefix + U+10FFFF)` hold exactly the strings that start with the prefix; the
`substr` check keeps the answer right even under another collation (the range then only
decides how fast it is found). Archived notes are excluded in the query.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Connection, func, select

from notes_server.store.models import notes_table as notes
from notes_server.store.notes import COLUMNS, NEWEST_FIRST, NoteRecord, title_key

TOP = "\U0010ffff"


def _prefix_range(column: ColumnElement[str], prefix: str) -> list[ColumnElement[bool]]:
    if not prefix:
        return []
    return [column >= prefix, column < prefix + TOP, func.substr(column, 1, len(prefix)) == prefix]


def paths_with_prefix(conn: Connection, workspace: str, prefix: str, limit: int) -> list[str]:
    """Up to `limit` live note paths of the workspace starting with `prefix`, in path order."""
    query = (
        select(notes.c.path)
        .where(
            notes.c.workspace == workspace,
            notes.c.archived.is_(False),
            *_prefix_range(notes.c.path, prefix),
        )
        .order_by(notes.c.path)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def titles_with_prefix(conn: Connection, workspace: str, prefix: str, limit: int) -> list[str]:
    """Up to `limit` titles of live notes whose title starts with `prefix`, case-insensitively
    (the titles' match key), in key order; one entry per row (the caller removes repeats)."""
    key = title_key(prefix) if prefix.strip() else ""
    query = (
        select(notes.c.title)
        .where(
            notes.c.workspace == workspace,
            notes.c.archived.is_(False),
            *_prefix_range(notes.c.title_key, key),
        )
        .order_by(notes.c.title_key)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def updated_since(
    conn: Connection, workspace: str, since: datetime, limit: int
) -> list[tuple[str, str, datetime]]:
    """(path, title, updated_at) of live notes updated at or after `since`, newest first."""
    query = (
        select(notes.c.path, notes.c.title, notes.c.updated_at)
        .where(
            notes.c.workspace == workspace,
            notes.c.updated_at >= since,
            notes.c.archived.is_(False),
        )
        .order_by(notes.c.updated_at.desc(), notes.c.id)
        .limit(limit)
    )
    return [(row[0], row[1], row[2]) for row in conn.execute(query)]


def note_titled(conn: Connection, workspace: str, title: str) -> NoteRecord | None:
    """The most recently updated live note whose title matches `title` ignoring case."""
    query = (
        select(*COLUMNS)
        .where(
            notes.c.workspace == workspace,
            notes.c.title_key == title_key(title),
            notes.c.archived.is_(False),
        )
        .order_by(*NEWEST_FIRST)
        .limit(1)
    )
    row = conn.execute(query).first()
    return None if row is None else NoteRecord.from_row(row)
