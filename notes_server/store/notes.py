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
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    String,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError

from notes_server.store.engine import FastRead, FastWrite
from notes_server.store.models import FTS_TABLE
from notes_server.store.models import notes_table as notes

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
# The hot statements are built once, with bind parameters: building and cache-keying a Core
# statement on every call cost more than running it (reads also skip Core on SQLite: FastRead).
_GET_NOTE = FastRead(
    select(*_COLUMNS).where(
        notes.c.id == bindparam("note_id"), notes.c.workspace == bindparam("workspace")
    )
)
# Found through the (workspace, title_key) index in a subquery: given the whole filter,
# SQLite's planner (no ANALYZE statistics) picks the (workspace, updated_at) index to skip
# the sort and reads every note of the workspace.
_TITLE_MATCHES = select(notes.c.seq).where(
    notes.c.workspace == bindparam("workspace"), notes.c.title_key == bindparam("title_key")
)
_NEWEST_FIRST = (notes.c.updated_at.desc(), notes.c.id)
_BY_TITLE = {
    archived_filter: FastRead(
        select(*_COLUMNS)
        .where(
            notes.c.seq.in_(_TITLE_MATCHES),
            *([notes.c.archived == bindparam("archived")] if archived_filter else []),
        )
        .order_by(*_NEWEST_FIRST)
        .limit(bindparam("limit"))
    )
    for archived_filter in (False, True)
}
# Runs inside a confirmed action's write transaction: straight on the driver on SQLite.
_DELETE = FastWrite(
    delete(notes).where(notes.c.id == bindparam("note_id"), notes.c.version == bindparam("version"))
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

    @classmethod
    def from_driver_row(cls, row: Sequence[Any]) -> NoteRecord:
        """From a FastRead row: converts driver values as SQLAlchemy's SQLite types do
        (DateTime text via datetime.fromisoformat, Boolean 0/1 via bool); typed values pass."""
        return cls(
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            _sqlite_datetime(row[5]),
            _sqlite_datetime(row[6]),
            row[7],
            bool(row[8]),
            _sqlite_datetime(row[9]),
        )


def _sqlite_datetime(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


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
    row = _GET_NOTE.first(conn, {"note_id": note_id, "workspace": workspace})
    return None if row is None else NoteRecord.from_driver_row(row)


def get_note_by_path(conn: Connection, workspace: str, path: str) -> NoteRecord | None:
    row = conn.execute(
        select(*_COLUMNS).where(notes.c.workspace == workspace, notes.c.path == path)
    ).first()
    return None if row is None else NoteRecord.from_row(row)


def find_by_title(
    conn: Connection, workspace: str, title: str, *, archived: bool | None, limit: int
) -> list[NoteRecord]:
    """Notes whose title matches case-insensitively, newest first."""
    params: dict[str, Any] = {"workspace": workspace, "title_key": title_key(title), "limit": limit}
    if archived is not None:
        params["archived"] = archived
    rows = _BY_TITLE[archived is not None].all(conn, params)
    return [NoteRecord.from_driver_row(r) for r in rows]


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
    return _DELETE.rowcount(conn, {"note_id": note.id, "version": note.version}) == 1


_FTS_TOKEN = re.compile(r"\w+", re.UNICODE)


_RANK = "bm25(notes_fts, 10.0, 1.0)"
_SNIPPET = "snippet(notes_fts, 1, '**', '**', '…', 12)"


def _search_statements() -> tuple[dict[bool, FastRead], dict[bool, FastRead], dict[bool, FastRead]]:
    """(most recent first, FTS5 top-k, FTS5 full join) statements, keyed by include_archived."""
    recent, top_k, joined = {}, {}, {}
    # Ordered by the label: a second bm25() call in ORDER BY, with its own bound weights,
    # would be scored again for every match.
    rank = literal_column(_RANK, Float).label("score")
    snip = literal_column(_SNIPPET, String)
    for include_archived in (False, True):
        conditions = [notes.c.workspace == bindparam("workspace")]
        if not include_archived:
            conditions.append(notes.c.archived.is_(False))
        recent[include_archived] = FastRead(
            select(*_COLUMNS, notes.c.body)
            .where(and_(*conditions))
            .order_by(*_NEWEST_FIRST)
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
        )
        joined[include_archived] = FastRead(
            select(*_COLUMNS, snip, rank)
            .join_from(notes, _fts, _fts.c.rowid == notes.c.seq)
            .where(_fts.c.notes_fts.op("MATCH")(bindparam("match")), *conditions)
            .order_by(rank, notes.c.seq)
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
        )
        live = "" if include_archived else " AND n.archived = 0"
        top_k[include_archived] = FastRead(
            text(
                # 1. rank inside FTS5 alone and keep the best :k rows (no per-match join);
                # 2. walk the matches again, cheaply, to reach the FTS cursor for snippet(),
                #    which SQLite then computes for the k kept rows only;
                # 3. LEFT JOIN the notes with the scope filter: a filtered-out row comes back
                #    with NULL columns, so the caller knows whether k was enough.
                "WITH top AS ("
                f"SELECT rowid AS seq, {_RANK} AS score FROM notes_fts"
                " WHERE notes_fts MATCH :match ORDER BY score, rowid LIMIT :k) "
                f"SELECT {', '.join('n.' + c.name for c in _COLUMNS)},"
                f" CASE WHEN n.seq IS NULL THEN NULL ELSE {_SNIPPET} END, top.score"
                " FROM notes_fts CROSS JOIN top ON top.seq = notes_fts.rowid"
                f" LEFT JOIN notes AS n ON n.seq = top.seq AND n.workspace = :workspace{live}"
                " WHERE notes_fts MATCH :match ORDER BY top.score, top.seq"
            )
        )
    return recent, top_k, joined


_RECENT, _TOP_K, _RANKED = _search_statements()
# Over-fetch for the top-k statement: beyond this many FTS rows, rank with the full join.
_TOP_K_MAX = 2048


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
    """Ranked full-text search (SQLite FTS5) or, without a query, most recently updated first.

    Ranked hits are ordered by (bm25, seq) whichever statement found them, so pages agree.
    """
    match = fts_query(query) if query else None
    if query and match is None:
        return []
    params: dict[str, Any] = {"workspace": workspace, "limit": limit, "offset": offset}
    if match is None:
        rows = _RECENT[include_archived].all(conn, params)
        return [SearchHit(NoteRecord.from_driver_row(r), _plain_snippet(r[4]), 0.0) for r in rows]
    if conn.dialect.name != "sqlite":
        conditions = [notes.c.workspace == workspace]
        if not include_archived:
            conditions.append(notes.c.archived.is_(False))
        return _search_like(conn, conditions, query or "", limit, offset)
    wanted = offset + limit
    k = wanted  # snippet() runs for every in-scope row of the k: no spare rows
    while k <= max(_TOP_K_MAX, wanted):
        rows = _TOP_K[include_archived].all(conn, {**params, "match": match, "k": k})
        kept = [r for r in rows if r[0] is not None]
        # Enough in scope, or FTS had no more matches than k: the top-k answer is exact.
        if len(kept) >= wanted or len(rows) < k:
            return [_ranked_hit(r) for r in kept[offset:wanted]]
        k *= 8
    # Most of the best matches lie outside this scope: rank the scope's matches only.
    rows = _RANKED[include_archived].all(conn, {**params, "match": match})
    return [_ranked_hit(r) for r in rows]


def _ranked_hit(row: Sequence[Any]) -> SearchHit:
    return SearchHit(NoteRecord.from_driver_row(row), row[10] or "", float(row[11]))


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
