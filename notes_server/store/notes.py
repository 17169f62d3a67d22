"""Notes repository: SQLAlchemy Core queries, one function per operation.

Functions take a Connection so the caller decides the transaction (one write transaction per
mutation, re-checks included). Nothing here knows about principals or the wire.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Table,
    and_,
    column,
    delete,
    func,
    insert,
    or_,
    select,
    table,
    update,
)
from sqlalchemy.exc import IntegrityError

from notes_server.store.models import FTS_TABLE, Note

notes = cast(Table, Note.__table__)
_fts = table(FTS_TABLE, column("rowid"), column(FTS_TABLE))

_COLUMNS = (
    notes.c.id,
    notes.c.workspace,
    notes.c.path,
    notes.c.title,
    notes.c.body,
    notes.c.created_at,
    notes.c.updated_at,
    notes.c.version,
    notes.c.archived,
    notes.c.archived_at,
)


@dataclass(frozen=True, slots=True)
class NoteRecord:
    id: str
    workspace: str
    path: str
    title: str
    body: str
    created_at: datetime
    updated_at: datetime
    version: int
    archived: bool
    archived_at: datetime | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> NoteRecord:
        return cls(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9])


@dataclass(frozen=True, slots=True)
class SearchHit:
    note: NoteRecord
    snippet: str
    rank: float


class PathConflict(Exception):
    """Another note already has this (workspace, path)."""


def new_note_id() -> str:
    return "note_" + secrets.token_hex(10)


def title_key(title: str) -> str:
    """Case-insensitive match key for titles."""
    return " ".join(title.casefold().split())


def insert_note(
    conn: Connection, *, workspace: str, path: str, title: str, body: str, now: datetime
) -> NoteRecord:
    note_id = new_note_id()
    values = {
        "id": note_id,
        "workspace": workspace,
        "path": path,
        "title": title,
        "title_key": title_key(title),
        "body": body,
        "created_at": now,
        "updated_at": now,
        "version": 1,
        "archived": False,
        "archived_at": None,
    }
    try:
        with conn.begin_nested():
            conn.execute(insert(notes).values(**values))
    except IntegrityError as exc:
        raise PathConflict(path) from exc
    return NoteRecord(note_id, workspace, path, title, body, now, now, 1, False, None)


def get_note(conn: Connection, workspace: str, note_id: str) -> NoteRecord | None:
    row = conn.execute(
        select(*_COLUMNS).where(notes.c.id == note_id, notes.c.workspace == workspace)
    ).first()
    return None if row is None else NoteRecord.from_row(row)


def get_note_by_path(conn: Connection, workspace: str, path: str) -> NoteRecord | None:
    row = conn.execute(
        select(*_COLUMNS).where(notes.c.workspace == workspace, notes.c.path == path)
    ).first()
    return None if row is None else NoteRecord.from_row(row)


def find_by_title(
    conn: Connection, workspace: str, title: str, *, archived: bool | None, limit: int
) -> list[NoteRecord]:
    """Notes whose title matches case-insensitively, newest first."""
    query = select(*_COLUMNS).where(
        notes.c.workspace == workspace, notes.c.title_key == title_key(title)
    )
    if archived is not None:
        query = query.where(notes.c.archived == archived)
    query = query.order_by(notes.c.updated_at.desc(), notes.c.id).limit(limit)
    return [NoteRecord.from_row(r) for r in conn.execute(query)]


def update_fields(
    conn: Connection, note: NoteRecord, *, now: datetime, **fields: Any
) -> NoteRecord | None:
    """Optimistic update: applies only if the row still has `note.version`."""
    values = dict(fields)
    if "title" in values:
        values["title_key"] = title_key(values["title"])
    result = conn.execute(
        update(notes)
        .where(notes.c.id == note.id, notes.c.version == note.version)
        .values(version=note.version + 1, updated_at=now, **values)
    )
    if result.rowcount != 1:
        return None
    return get_note(conn, values.get("workspace", note.workspace), note.id)


def delete_note(conn: Connection, note: NoteRecord) -> bool:
    result = conn.execute(
        delete(notes).where(notes.c.id == note.id, notes.c.version == note.version)
    )
    return result.rowcount == 1


_FTS_TOKEN = re.compile(r"\w+", re.UNICODE)


def fts_query(query: str) -> str | None:
    """Turn free text into a safe FTS5 query: every word as a quoted prefix term, ANDed."""
    words = _FTS_TOKEN.findall(query)[:16]
    if not words:
        return None
    return " ".join(f'"{w}"*' for w in words)


def search(
    conn: Connection,
    workspace: str,
    query: str | None,
    *,
    include_archived: bool,
    limit: int,
    offset: int,
) -> list[SearchHit]:
    """Ranked full-text search (SQLite FTS5) or, without a query, most recently updated first."""
    match = fts_query(query) if query else None
    if query and match is None:
        return []
    conditions = [notes.c.workspace == workspace]
    if not include_archived:
        conditions.append(notes.c.archived.is_(False))
    if match is None:
        rows = conn.execute(
            select(*_COLUMNS, notes.c.body)
            .where(and_(*conditions))
            .order_by(notes.c.updated_at.desc(), notes.c.id)
            .limit(limit)
            .offset(offset)
        )
        return [SearchHit(NoteRecord.from_row(r), _plain_snippet(r[4]), 0.0) for r in rows]
    if conn.dialect.name != "sqlite":
        return _search_like(conn, conditions, query or "", limit, offset)
    rank = func.bm25(_fts.c.notes_fts, 10.0, 1.0)
    snip = func.snippet(_fts.c.notes_fts, 1, "**", "**", "…", 12)
    rows = conn.execute(
        select(*_COLUMNS, snip, rank)
        .join_from(notes, _fts, _fts.c.rowid == notes.c.seq)
        .where(_fts.c.notes_fts.op("MATCH")(match), *conditions)
        .order_by(rank, notes.c.id)
        .limit(limit)
        .offset(offset)
    )
    return [SearchHit(NoteRecord.from_row(r), r[10] or "", float(r[11])) for r in rows]


def _search_like(
    conn: Connection, conditions: list[Any], query: str, limit: int, offset: int
) -> list[SearchHit]:
    """Portable fallback for non-SQLite databases: every word must appear in title or body."""
    for word in _FTS_TOKEN.findall(query)[:16]:
        pattern = f"%{word.lower()}%"
        conditions.append(
            or_(func.lower(notes.c.title).like(pattern), func.lower(notes.c.body).like(pattern))
        )
    rows = conn.execute(
        select(*_COLUMNS)
        .where(and_(*conditions))
        .order_by(notes.c.updated_at.desc(), notes.c.id)
        .limit(limit)
        .offset(offset)
    )
    return [SearchHit(NoteRecord.from_row(r), _plain_snippet(r[4]), 0.0) for r in rows]


def _plain_snippet(body: str, width: int = 160) -> str:
    flat = " ".join(body.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
