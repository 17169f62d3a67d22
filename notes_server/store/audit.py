"""Audit log of destructive actions: who did what to which note, via which confirmation.

`AuditStore` is the interface; `SqliteAudit` writes the entry on the driver inside the
confirmed action's transaction, `CoreAudit` through Core (see `engine.uses_driver`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import Connection, insert, select

from notes_server.store.engine import CoreRun, DriverRun, DriverWrite, uses_driver
from notes_server.store.models import audit_table as audit

# Built once; the values are bound per call (on SQLite straight on the driver connection).
_INSERT = DriverWrite(insert(audit))


@dataclass(frozen=True, slots=True)
class AuditRecord:
    at: datetime
    principal: str
    tool: str
    outcome: str
    workspace: str
    note_id: str | None
    note_title: str | None
    note_path: str | None
    nonce: str | None


class AuditStore(Protocol):
    """The audit aggregate: append and read back."""

    def record(self, conn: Connection, entry: AuditRecord) -> None: ...

    def recent(
        self, conn: Connection, *, workspace: str | None, principal: str | None, limit: int
    ) -> list[AuditRecord]: ...


class CoreAudit(CoreRun):
    """Portable: every statement through SQLAlchemy Core."""

    def record(self, conn: Connection, entry: AuditRecord) -> None:
        self._rowcount(_INSERT, conn, _values(entry))

    def recent(
        self, conn: Connection, *, workspace: str | None, principal: str | None, limit: int
    ) -> list[AuditRecord]:
        query = select(
            audit.c.at,
            audit.c.principal,
            audit.c.tool,
            audit.c.outcome,
            audit.c.workspace,
            audit.c.note_id,
            audit.c.note_title,
            audit.c.note_path,
            audit.c.nonce,
        )
        if workspace is not None:
            query = query.where(audit.c.workspace == workspace)
        if principal is not None:
            query = query.where(audit.c.principal == principal)
        query = query.order_by(audit.c.at.desc(), audit.c.id.desc()).limit(limit)
        return [AuditRecord(*row) for row in conn.execute(query)]


class SqliteAudit(DriverRun, CoreAudit):
    """SQLite through pysqlite: the entry is written on the driver."""


def _values(entry: AuditRecord) -> dict[str, Any]:
    return {
        "at": entry.at,
        "principal": entry.principal,
        "tool": entry.tool,
        "outcome": entry.outcome,
        "workspace": entry.workspace,
        "note_id": entry.note_id,
        "note_title": entry.note_title,
        "note_path": entry.note_path,
        "nonce": entry.nonce,
    }


CORE: AuditStore = CoreAudit()
SQLITE: AuditStore = SqliteAudit()


def store(conn: Connection) -> AuditStore:
    """The audit implementation for this connection."""
    return SQLITE if uses_driver(conn) else CORE


def record(conn: Connection, entry: AuditRecord) -> None:
    store(conn).record(conn, entry)


def recent(
    conn: Connection,
    *,
    workspace: str | None = None,
    principal: str | None = None,
    limit: int = 50,
) -> list[AuditRecord]:
    return store(conn).recent(conn, workspace=workspace, principal=principal, limit=limit)
