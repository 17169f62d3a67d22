"""Bounded prefix and recency lookups over one workspace's live notes, for argument completion
and prompts. Nothing here knows about principals (callers authorize the workspace first), except
`granted_notes`, the resource listing, which joins the principal's grants itself.

A prefix is a range on an existing index, so a lookup reads at most `limit` index entries
whatever the workspace's size: `(workspace, path)` (the unique constraint) for paths and
`(workspace, title_key)` for titles. Both databases compare this text code point by code point
(SQLite always; our PostgreSQL databases use the C.UTF-8 collation), which is what makes the
range `[prefix, prefix + U+10FFFF)` hold exactly the strings that start with the prefix; the
`substr` check keeps the answer right even under another collation (the range then only
decides how fast it is found). Archived notes are excluded in the query.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import ColumnElement, Connection, bindparam, func, select

from notes_server.store.engine import CoreRun, DriverRead, DriverRun, uses_driver
from notes_server.store.models import grants_table as grants
from notes_server.store.models import notes_table as notes
from notes_server.store.notes import COLUMNS, NEWEST_FIRST, NoteRecord, title_key

TOP = "\U0010ffff"


def _prefixed(column: ColumnElement[str], select_column: ColumnElement[str]) -> DriverRead:
    """Up to :limit values of `select_column` for live notes of :workspace whose `column`
    starts with :low, in `column` order. One statement for every prefix, the empty one too
    (`substr(x, 1, 0)` is ''), built once: on embedded SQLite it runs on the driver."""
    return DriverRead(
        select(select_column)
        .where(
            notes.c.workspace == bindparam("workspace"),
            column >= bindparam("low"),
            column < bindparam("high"),
            func.substr(column, 1, bindparam("n")) == bindparam("low"),
            notes.c.archived == bindparam("archived"),
        )
        .order_by(column)
        .limit(bindparam("limit"))
    )


_PATHS = _prefixed(notes.c.path, notes.c.path)
_TITLES = _prefixed(notes.c.title_key, notes.c.title)


def _run(stmt: DriverRead, conn: Connection, workspace: str, prefix: str, limit: int) -> list[str]:
    values = {
        "workspace": workspace,
        "low": prefix,
        "high": prefix + TOP,
        "n": len(prefix),
        "archived": False,
        "limit": limit,
    }
    runner = DriverRun() if uses_driver(conn) else CoreRun()
    return [row[0] for row in runner._all(stmt, conn, values)]


def paths_with_prefix(conn: Connection, workspace: str, prefix: str, limit: int) -> list[str]:
    """Up to `limit` live note paths of the workspace starting with `prefix`, in path order."""
    return _run(_PATHS, conn, workspace, prefix, limit)


def titles_with_prefix(conn: Connection, workspace: str, prefix: str, limit: int) -> list[str]:
    """Up to `limit` titles of live notes whose title starts with `prefix`, case-insensitively
    (the titles' match key), in key order; one entry per row (the caller removes repeats)."""
    return _run(_TITLES, conn, workspace, title_key(prefix) if prefix.strip() else "", limit)


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


class ListedNote(NamedTuple):
    """A live note as the resource listing names it."""

    workspace: str
    path: str
    title: str
    id: str


def granted_notes(
    conn: Connection,
    principal: str,
    workspaces: Sequence[str] | None,
    limit: int,
    offset: int,
) -> list[ListedNote]:
    """Up to `limit` live notes from `offset` in the workspaces granted to `principal`, in
    (workspace, path) order; `workspaces`, when given, narrows the grants (never widens them)."""
    query = (
        select(notes.c.workspace, notes.c.path, notes.c.title, notes.c.id)
        .join(grants, grants.c.workspace == notes.c.workspace)
        .where(grants.c.principal == principal, notes.c.archived.is_(False))
        .order_by(notes.c.workspace, notes.c.path)
        .limit(limit)
        .offset(offset)
    )
    if workspaces is not None:
        query = query.where(notes.c.workspace.in_(workspaces))
    return [ListedNote(*row) for row in conn.execute(query)]
