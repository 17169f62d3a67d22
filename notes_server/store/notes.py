"""Notes repository: the `NoteStore` interface, its portable Core implementation and its SQLite
one (hot reads and the confirmed delete straight on the driver), and one function per operation
that uses the implementation `engine.uses_driver` picks for the connection.

Everything takes a Connection so the caller decides the transaction (one write transaction per
mutation, re-checks included). Nothing here knows about principals or the wire.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import (
    Connection,
    Integer,
    and_,
    any_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from notes_server.store import content_index, history
from notes_server.store.engine import (
    CoreRun,
    DriverRead,
    DriverRun,
    DriverWrite,
    uses_driver,
    write_rowcount,
)
from notes_server.store.keys import title_key as title_key  # re-exported: callers know it here
from notes_server.store.models import front_matter_table as front
from notes_server.store.models import grants_table as grants
from notes_server.store.models import notes_table as notes
from notes_server.store.search_terms import spaceless_runs
from notes_server.store.types import from_stored

COLUMNS = (
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
# statement on every call cost more than running it (reads also skip Core on SQLite: DriverRead).
_GET_NOTE = DriverRead(
    select(*COLUMNS).where(
        notes.c.id == bindparam("note_id"), notes.c.workspace == bindparam("workspace")
    )
)
# The grant and the note in one statement (no row: no grant; NULL note columns: no such note),
# so that a by-id read is one statement instead of two.
_GET_GRANTED = DriverRead(
    select(grants.c.role, *COLUMNS)
    .select_from(
        grants.outerjoin(
            notes,
            and_(notes.c.workspace == grants.c.workspace, notes.c.id == bindparam("note_id")),
        )
    )
    .where(
        grants.c.principal == bindparam("principal"),
        grants.c.workspace == bindparam("workspace"),
    )
)
NEWEST_FIRST = (notes.c.updated_at.desc(), notes.c.id)


class _Position(FunctionElement[int]):
    """Where the second string starts in the first (1-based, 0 if absent), code point by code
    point: instr on SQLite, strpos on PostgreSQL."""

    type = Integer()
    name = "instr"
    inherit_cache = True


@compiles(_Position)
def _instr(element: _Position, compiler: SQLCompiler, **kw: Any) -> str:
    return f"instr({compiler.process(element.clauses, **kw)})"


@compiles(_Position, "postgresql")
def _strpos(element: _Position, compiler: SQLCompiler, **kw: Any) -> str:
    return f"strpos({compiler.process(element.clauses, **kw)})"


# Candidates for a confirmed action: live notes whose title key contains the argument's key.
# Both keys are normalized in Python (title_key), so the database only finds code points: no
# LIKE (SQLite's folds ASCII case only, and needs wildcards escaped), and instr is ~40% faster
# than LIKE here. Matches are found by scanning the (workspace, title_key) index in a subquery
# (covering: no row is read for a non-match); the window count is taken before the LIMIT, so
# the caller knows how many matched beyond the ones shown.
_TITLE_CONTAINS = select(notes.c.seq).where(
    notes.c.workspace == bindparam("workspace"),
    _Position(notes.c.title_key, bindparam("title_key")) > 0,
)
_CANDIDATES = DriverRead(
    select(*COLUMNS, func.count().over())
    .where(notes.c.seq.in_(_TITLE_CONTAINS), notes.c.archived == bindparam("archived"))
    .order_by((notes.c.title_key == bindparam("title_key")).desc(), *NEWEST_FIRST)
    .limit(bindparam("limit"))
)
# PostgreSQL: the same candidates, planned another way. Its planner cannot estimate strpos()
# and assumes a third of the notes match, so `seq IN (subquery)` sorted every live note before
# probing them (90 ms at 10k notes, spilling to disk; O(n log n) per round 1 of a delete). Here
# the matching keys come from one index-only scan of (workspace, title_key), run once as an
# InitPlan, and the rows are fetched through the same index by key (equal keys match alike).
_MATCHING_KEYS = select(notes.c.title_key).where(
    notes.c.workspace == bindparam("workspace"),
    _Position(notes.c.title_key, bindparam("title_key")) > 0,
)
_PG_CANDIDATES = DriverRead(
    select(*COLUMNS, func.count().over())
    .where(
        notes.c.workspace == bindparam("workspace"),
        notes.c.title_key == any_(func.array(_MATCHING_KEYS.scalar_subquery())),
        notes.c.archived == bindparam("archived"),
    )
    .order_by((notes.c.title_key == bindparam("title_key")).desc(), *NEWEST_FIRST)
    .limit(bindparam("limit"))
)
# Runs inside a confirmed action's write transaction: straight on the driver on SQLite.
_DELETE = DriverWrite(
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
        """From a pysqlite row: converts values as the column types do (timestamps from ISO
        text to aware UTC, Boolean from 0/1), so both implementations return equal records."""
        return cls(
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            from_stored(row[5]),  # type: ignore[arg-type]
            from_stored(row[6]),  # type: ignore[arg-type]
            row[7],
            bool(row[8]),
            from_stored(row[9]),
        )


class Granted(NamedTuple):
    """A principal's role on a workspace, and the note asked for in it (None: no such note)."""

    role: str
    note: NoteRecord | None


class Author(NamedTuple):
    """Who changes a note and with which tool: kept with the version it writes (history)."""

    principal: str
    tool: str


class PathConflict(Exception):
    """Another note already has this (workspace, path)."""


def new_note_id() -> str:
    return "note_" + secrets.token_hex(10)


class NoteStore(Protocol):
    """The notes aggregate, as tools and the CLI use it."""

    def insert(
        self,
        conn: Connection,
        *,
        workspace: str,
        path: str,
        title: str,
        body: str,
        now: datetime,
        author: Author | None = None,
    ) -> NoteRecord: ...

    def get(self, conn: Connection, workspace: str, note_id: str) -> NoteRecord | None: ...

    def get_granted(
        self, conn: Connection, principal: str, workspace: str, note_id: str
    ) -> Granted | None: ...

    def get_by_path(self, conn: Connection, workspace: str, path: str) -> NoteRecord | None: ...

    def find_candidates(
        self, conn: Connection, workspace: str, key: str, *, limit: int
    ) -> tuple[list[NoteRecord], int]: ...

    def update_fields(
        self,
        conn: Connection,
        note: NoteRecord,
        *,
        now: datetime,
        author: Author | None = None,
        updated_at: datetime | None = None,
        extra: str | None = None,
        **fields: Any,
    ) -> NoteRecord | None: ...

    def delete(self, conn: Connection, note: NoteRecord) -> bool: ...


def insert_row(
    conn: Connection,
    *,
    workspace: str,
    path: str,
    title: str,
    body: str,
    created: datetime,
    updated: datetime,
    extra: str = "",
    author: Author | None = None,
) -> NoteRecord:
    """A new live note at version 1 (portable Core), its links and tags indexed (``extra``: its
    front matter lines, kept by the caller); PathConflict if the path is taken. Tools create
    with one timestamp; the folder importer keeps the file's two."""
    note_id = new_note_id()
    values = {
        "id": note_id,
        "workspace": workspace,
        "path": path,
        "title": title,
        "title_key": title_key(title),
        "body": body,
        "body_spaceless": spaceless_runs(body),
        "created_at": created,
        "updated_at": updated,
        "version": 1,
        "archived": False,
        "archived_at": None,
        "changed_by": None if author is None else author.principal,
        "changed_tool": None if author is None else author.tool,
    }
    content_index.writing(conn, workspace)
    try:
        with conn.begin_nested():
            conn.execute(insert(notes).values(**values))
    except IntegrityError as exc:
        raise PathConflict(path) from exc
    note = NoteRecord(note_id, workspace, path, title, body, created, updated, 1, False, None)
    content_index.index_note_content(conn, note, extra=extra, new=True)
    return note


_INSERT_FRONT = insert(front)
# Prepared once (on the driver on SQLite): a permanent delete runs it in its write transaction.
_FORGET_FRONT = DriverWrite(delete(front).where(front.c.note_id == bindparam("note_id")))


def forget_front_matter(conn: Connection, note_id: str) -> None:
    """Remove a note's kept front matter lines (a permanent delete, or before new ones)."""
    write_rowcount(_FORGET_FRONT, conn, {"note_id": note_id})


def set_front_matter(conn: Connection, note_id: str, extra: str, *, new: bool = False) -> None:
    """Replace a note's kept front matter lines (``new``: the note was just inserted, has
    none). Not a versioned write by itself: a change of them goes through `update_fields`."""
    if not new:
        forget_front_matter(conn, note_id)
    if extra:
        conn.execute(_INSERT_FRONT, {"note_id": note_id, "extra": extra})


# Fields whose change leaves what the note says untouched (archive, restore): not re-indexed.
# An update of no field at all (its front matter changed) is re-indexed.
_STATE_ONLY = frozenset({"archived", "archived_at"})


class CoreNotes(CoreRun):
    """Portable: every statement through SQLAlchemy Core."""

    _record = staticmethod(NoteRecord.from_row)
    _candidates = _CANDIDATES

    def insert(
        self,
        conn: Connection,
        *,
        workspace: str,
        path: str,
        title: str,
        body: str,
        now: datetime,
        author: Author | None = None,
    ) -> NoteRecord:
        return insert_row(
            conn,
            workspace=workspace,
            path=path,
            title=title,
            body=body,
            created=now,
            updated=now,
            author=author,
        )

    def get(self, conn: Connection, workspace: str, note_id: str) -> NoteRecord | None:
        row = self._first(_GET_NOTE, conn, {"note_id": note_id, "workspace": workspace})
        return None if row is None else self._record(row)

    def get_granted(
        self, conn: Connection, principal: str, workspace: str, note_id: str
    ) -> Granted | None:
        values = {"principal": principal, "workspace": workspace, "note_id": note_id}
        row = self._first(_GET_GRANTED, conn, values)
        if row is None:
            return None
        note = None if row[1] is None else self._record(row[1:])
        return Granted(str(row[0]), note)

    def get_by_path(self, conn: Connection, workspace: str, path: str) -> NoteRecord | None:
        row = conn.execute(
            select(*COLUMNS).where(notes.c.workspace == workspace, notes.c.path == path)
        ).first()
        return None if row is None else NoteRecord.from_row(row)

    def find_candidates(
        self, conn: Connection, workspace: str, key: str, *, limit: int
    ) -> tuple[list[NoteRecord], int]:
        params = {"workspace": workspace, "title_key": key, "archived": False, "limit": limit}
        rows = self._all(self._candidates, conn, params)
        total = int(rows[0][len(COLUMNS)]) if rows else 0
        return [self._record(r) for r in rows], total

    def update_fields(
        self,
        conn: Connection,
        note: NoteRecord,
        *,
        now: datetime,
        author: Author | None = None,
        updated_at: datetime | None = None,
        extra: str | None = None,
        **fields: Any,
    ) -> NoteRecord | None:
        content_index.writing(conn, note.workspace, fields.get("workspace", note.workspace))
        # The version being replaced goes into the history first, in this transaction; if the
        # row is no longer at note.version (or a racing writer kept it), nothing is written.
        if not history.keep_revision(conn, note.id, note.version, now):
            return None
        values = dict(fields)
        if "title" in values:
            values["title_key"] = title_key(values["title"])
        if "body" in values:
            values["body_spaceless"] = spaceless_runs(values["body"])
        result = conn.execute(
            update(notes)
            .where(notes.c.id == note.id, notes.c.version == note.version)
            .values(
                version=note.version + 1,
                updated_at=now if updated_at is None else updated_at,
                changed_by=None if author is None else author.principal,
                changed_tool=None if author is None else author.tool,
                **values,
            )
        )
        if result.rowcount != 1:
            return None
        if extra is not None:
            set_front_matter(conn, note.id, extra)
        updated = self.get(conn, values.get("workspace", note.workspace), note.id)
        if updated is not None and (
            extra is not None or not (fields and fields.keys() <= _STATE_ONLY)
        ):
            content_index.index_note_content(conn, updated, extra=extra, previous=note)
        if updated is not None and updated.archived != note.archived:
            content_index.archive_changed(conn, updated)
        return updated

    def delete(self, conn: Connection, note: NoteRecord) -> bool:
        content_index.writing(conn, note.workspace)
        if self._rowcount(_DELETE, conn, {"note_id": note.id, "version": note.version}) != 1:
            return False
        content_index.forget_note(conn, note)
        return True


class SqliteNotes(DriverRun, CoreNotes):
    """SQLite through pysqlite: note by id, title candidates and the delete on the driver."""

    _record = staticmethod(NoteRecord.from_driver_row)


class PostgresNotes(CoreNotes):
    """PostgreSQL: Core, with title candidates planned for its optimizer (_PG_CANDIDATES)."""

    _candidates = _PG_CANDIDATES


CORE: NoteStore = CoreNotes()
SQLITE: NoteStore = SqliteNotes()
POSTGRESQL: NoteStore = PostgresNotes()


def store(conn: Connection) -> NoteStore:
    """The notes implementation for this connection."""
    if uses_driver(conn):
        return SQLITE
    return POSTGRESQL if conn.dialect.name == "postgresql" else CORE


def insert_note(
    conn: Connection,
    *,
    workspace: str,
    path: str,
    title: str,
    body: str,
    now: datetime,
    author: Author | None = None,
) -> NoteRecord:
    return store(conn).insert(
        conn, workspace=workspace, path=path, title=title, body=body, now=now, author=author
    )


def get_note(conn: Connection, workspace: str, note_id: str) -> NoteRecord | None:
    return store(conn).get(conn, workspace, note_id)


def get_granted(conn: Connection, principal: str, workspace: str, note_id: str) -> Granted | None:
    """The principal's role on exactly this workspace with the note by id in it, in one
    statement; None when there is no grant (deny by default)."""
    return store(conn).get_granted(conn, principal, workspace, note_id)


def get_note_by_path(conn: Connection, workspace: str, path: str) -> NoteRecord | None:
    return store(conn).get_by_path(conn, workspace, path)


def find_candidates(
    conn: Connection, workspace: str, text: str, *, limit: int
) -> tuple[list[NoteRecord], int]:
    """Live notes whose title contains `text` (same key rules as title_key): exact matches
    first, then most recently updated; at most `limit`, plus how many matched in all."""
    key = title_key(text)
    if not key:
        return [], 0
    return store(conn).find_candidates(conn, workspace, key, limit=limit)


def update_fields(
    conn: Connection,
    note: NoteRecord,
    *,
    now: datetime,
    author: Author | None = None,
    updated_at: datetime | None = None,
    extra: str | None = None,
    **fields: Any,
) -> NoteRecord | None:
    """THE write of a note row (every tool, folder import and sync, revert): optimistic, it
    applies only if the row still has `note.version`, and keeps that version in the history
    (`history.keep_revision`) in the same transaction, front matter included, then indexes its
    links and tags again (`content_index`). `updated_at` defaults to `now` (the folder importer
    passes the file's time); `extra`: the note's new front matter lines (None: unchanged),
    written after the old ones went into the revision and before the new ones are indexed."""
    return store(conn).update_fields(
        conn, note, now=now, author=author, updated_at=updated_at, extra=extra, **fields
    )


def delete_note(conn: Connection, note: NoteRecord) -> bool:
    """A permanent delete: the note, its kept front matter lines and its whole history go
    together."""
    if not store(conn).delete(conn, note):
        return False
    forget_front_matter(conn, note.id)
    history.forget(conn, note.id)
    return True
