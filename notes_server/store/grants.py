"""Workspace grants: which principal may touch which workspace, and how."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from notes_server.store.engine import FastRead
from notes_server.store.models import grants_table as grants

ROLES = ("read", "write")
# Built once: role_for runs on every tool call.
_ROLE = FastRead(
    select(grants.c.role).where(
        grants.c.principal == bindparam("principal"), grants.c.workspace == bindparam("workspace")
    )
)


@dataclass(frozen=True, slots=True)
class Grant:
    principal: str
    workspace: str
    role: str
    created_at: datetime


def role_for(conn: Connection, principal: str, workspace: str) -> str | None:
    """The principal's role on exactly this canonical workspace, or None (deny by default)."""
    row = _ROLE.first(conn, {"principal": principal, "workspace": workspace})
    return None if row is None else str(row[0])


def upsert(conn: Connection, principal: str, workspace: str, role: str, now: datetime) -> bool:
    """Grant or change a role; returns True when a new grant was created."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    existing = role_for(conn, principal, workspace)
    if existing is None:
        conn.execute(
            insert(grants).values(
                principal=principal, workspace=workspace, role=role, created_at=now
            )
        )
        return True
    conn.execute(
        update(grants)
        .where(grants.c.principal == principal, grants.c.workspace == workspace)
        .values(role=role)
    )
    return False


def revoke(conn: Connection, principal: str, workspace: str) -> bool:
    result = conn.execute(
        delete(grants).where(grants.c.principal == principal, grants.c.workspace == workspace)
    )
    return result.rowcount > 0


def list_grants(conn: Connection, principal: str | None = None) -> list[Grant]:
    query = select(grants.c.principal, grants.c.workspace, grants.c.role, grants.c.created_at)
    if principal is not None:
        query = query.where(grants.c.principal == principal)
    query = query.order_by(grants.c.principal, grants.c.workspace)
    return [Grant(*row) for row in conn.execute(query)]
