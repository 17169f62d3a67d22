"""Audit log of destructive actions: who did what to which note, via which confirmation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, insert, select

from notes_server.store.engine import FastWrite
from notes_server.store.models import audit_table as audit

# Built once; the values are bound per call (on SQLite straight on the driver connection).
_INSERT = FastWrite(insert(audit))


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


def record(conn: Connection, entry: AuditRecord) -> None:
    _INSERT.rowcount(
        conn,
        {
            "at": entry.at,
            "principal": entry.principal,
            "tool": entry.tool,
            "outcome": entry.outcome,
            "workspace": entry.workspace,
            "note_id": entry.note_id,
            "note_title": entry.note_title,
            "note_path": entry.note_path,
            "nonce": entry.nonce,
        },
    )


def recent(
    conn: Connection,
    *,
    workspace: str | None = None,
    principal: str | None = None,
    limit: int = 50,
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
