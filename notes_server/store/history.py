"""Note history: every superseded version of a note, kept in the transaction that replaced it.

`keep_revision` is the one place a revision is written; `notes.update_fields`, the one function
every change of a note row goes through (tools, folder import and sync, revert), calls it before
its UPDATE, so no write path can forget it. It copies the row as it is (INSERT ... SELECT, the
kept front matter included) with ON CONFLICT DO NOTHING on (note_id, version): a concurrent
writer of the same version finds the revision already taken and reports a conflict instead of
failing the transaction. Full text per revision (see BENCHMARKS.md for what it costs on disk).
Callers own the transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite

from notes_server.store.engine import DriverWrite, uses_driver, write_rowcount
from notes_server.store.models import TZ
from notes_server.store.models import front_matter_table as front
from notes_server.store.models import notes_table as notes
from notes_server.store.models import revisions_table as revisions

_KEPT = (
    revisions.c.note_id,
    revisions.c.version,
    revisions.c.workspace,
    revisions.c.path,
    revisions.c.title,
    revisions.c.body,
    revisions.c.front_matter,
    revisions.c.archived,
    revisions.c.changed_at,
    revisions.c.principal,
    revisions.c.tool,
    revisions.c.replaced_at,
)
_SOURCE = select(
    notes.c.id,
    notes.c.version,
    notes.c.workspace,
    notes.c.path,
    notes.c.title,
    notes.c.body,
    select(front.c.extra).where(front.c.note_id == notes.c.id).scalar_subquery(),
    notes.c.archived,
    notes.c.updated_at,
    notes.c.changed_by,
    notes.c.changed_tool,
    bindparam("replaced_at", type_=TZ),
).where(notes.c.id == bindparam("note_id"), notes.c.version == bindparam("version"))


def _keep(dialect: Any) -> DriverWrite:
    return DriverWrite(
        dialect.insert(revisions)
        .from_select([c.name for c in _KEPT], _SOURCE)
        .on_conflict_do_nothing(index_elements=["note_id", "version"])
        .returning(revisions.c.version)
    )


_KEEP = {"sqlite": _keep(sqlite), "postgresql": _keep(postgresql)}


class Revision(NamedTuple):
    """One version of a note as it was."""

    note_id: str
    version: int
    workspace: str
    path: str
    title: str
    body: str
    front_matter: str | None
    archived: bool
    changed_at: datetime
    principal: str | None
    tool: str | None


_COLUMNS = _KEPT[:-1]


def keep_revision(conn: Connection, note_id: str, version: int, now: datetime) -> bool:
    """Copy the note's row, if it is still at `version`, into its history; False when it is
    not (changed or gone) or a concurrent writer already kept that version: a conflict."""
    statement = _KEEP[conn.dialect.name]
    values = {"note_id": note_id, "version": version, "replaced_at": now}
    # RETURNING, not rowcount: psycopg reports no rowcount for INSERT ... SELECT here.
    if uses_driver(conn):
        return statement.first(conn, values) is not None
    return conn.execute(statement.statement, values).first() is not None


def revisions_of(
    conn: Connection, note_id: str, *, below: int | None, limit: int
) -> list[Revision]:
    """Kept versions of a note, newest first: at most `limit`, only versions < `below`."""
    query = select(*_COLUMNS).where(revisions.c.note_id == note_id)
    if below is not None:
        query = query.where(revisions.c.version < below)
    rows = conn.execute(query.order_by(revisions.c.version.desc()).limit(limit))
    return [Revision(*row) for row in rows]


def revision(conn: Connection, note_id: str, version: int) -> Revision | None:
    row = conn.execute(
        select(*_COLUMNS).where(revisions.c.note_id == note_id, revisions.c.version == version)
    ).first()
    return None if row is None else Revision(*row)


def versions_kept(conn: Connection, note_id: str) -> list[int]:
    """The kept version numbers of a note, newest first (for an error that lists them)."""
    query = select(revisions.c.version).where(revisions.c.note_id == note_id)
    return [int(v) for v in conn.execute(query.order_by(revisions.c.version.desc())).scalars()]


# Prepared once: a permanent delete runs it inside its write transaction (on SQLite straight
# on the driver, like the delete itself; building and compiling a Core DELETE ... IN there cost
# ~0.3 ms of the write lock per delete).
_FORGET = DriverWrite(delete(revisions).where(revisions.c.note_id == bindparam("note_id")))


def forget(conn: Connection, note_id: str) -> int:
    """Remove the whole history of this note (a permanent delete); how many revisions."""
    return write_rowcount(_FORGET, conn, {"note_id": note_id})


class Pruned(NamedTuple):
    revisions: int
    notes: int


def prune(conn: Connection, *, replaced_before: datetime, workspace: str | None) -> Pruned:
    """Remove revisions replaced before `replaced_before`: of the notes now in `workspace`, or
    of every note (and of notes that no longer exist) when it is None."""
    where = [revisions.c.replaced_at < replaced_before]
    if workspace is not None:
        where.append(
            revisions.c.note_id.in_(select(notes.c.id).where(notes.c.workspace == workspace))
        )
    touched = conn.execute(
        select(func.count(func.distinct(revisions.c.note_id))).where(*where)
    ).scalar_one()
    result = conn.execute(delete(revisions).where(*where))
    return Pruned(int(result.rowcount), int(touched))


def current_author(conn: Connection, note_id: str) -> tuple[str | None, str | None]:
    """Who made the note's current version and with which tool (None: not recorded)."""
    row = conn.execute(
        select(notes.c.changed_by, notes.c.changed_tool).where(notes.c.id == note_id)
    ).first()
    return (None, None) if row is None else (row[0], row[1])


def count(conn: Connection, note_id: str) -> int:
    return int(
        conn.execute(
            select(func.count()).select_from(revisions).where(revisions.c.note_id == note_id)
        ).scalar_one()
    )
