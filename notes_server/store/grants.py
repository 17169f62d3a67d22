"""Workspace grants: which principal may touch which workspace, and how.

`GrantStore` is the interface; `CoreGrants` the portable implementation, `SqliteGrants` the same
with the per-call role lookup on the driver (see `engine.uses_driver`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from notes_server.store.engine import CoreRun, DriverRead, DriverRun, uses_driver
from notes_server.store.models import grants_table as grants

ROLES = ("read", "write")
# Built once: role_for runs on every tool call.
_ROLE = DriverRead(
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


class GrantStore(Protocol):
    """The grants aggregate."""

    def role_for(self, conn: Connection, principal: str, workspace: str) -> str | None: ...

    def upsert(
        self, conn: Connection, principal: str, workspace: str, role: str, now: datetime
    ) -> bool: ...

    def revoke(self, conn: Connection, principal: str, workspace: str) -> bool: ...

    def list(self, conn: Connection, principal: str | None = None) -> list[Grant]: ...


class CoreGrants(CoreRun):
    """Portable: every statement through SQLAlchemy Core."""

    def role_for(self, conn: Connection, principal: str, workspace: str) -> str | None:
        row = self._first(_ROLE, conn, {"principal": principal, "workspace": workspace})
        return None if row is None else str(row[0])

    def upsert(
        self, conn: Connection, principal: str, workspace: str, role: str, now: datetime
    ) -> bool:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        if self.role_for(conn, principal, workspace) is None:
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

    def revoke(self, conn: Connection, principal: str, workspace: str) -> bool:
        result = conn.execute(
            delete(grants).where(grants.c.principal == principal, grants.c.workspace == workspace)
        )
        return result.rowcount > 0

    def list(self, conn: Connection, principal: str | None = None) -> list[Grant]:
        query = select(grants.c.principal, grants.c.workspace, grants.c.role, grants.c.created_at)
        if principal is not None:
            query = query.where(grants.c.principal == principal)
        query = query.order_by(grants.c.principal, grants.c.workspace)
        return [Grant(*row) for row in conn.execute(query)]


class SqliteGrants(DriverRun, CoreGrants):
    """SQLite through pysqlite: the role lookup of every tool call on the driver."""


CORE: GrantStore = CoreGrants()
SQLITE: GrantStore = SqliteGrants()


def store(conn: Connection) -> GrantStore:
    """The grants implementation for this connection."""
    return SQLITE if uses_driver(conn) else CORE


def role_for(conn: Connection, principal: str, workspace: str) -> str | None:
    """The principal's role on exactly this canonical workspace, or None (deny by default)."""
    return store(conn).role_for(conn, principal, workspace)


def upsert(conn: Connection, principal: str, workspace: str, role: str, now: datetime) -> bool:
    """Grant or change a role; returns True when a new grant was created."""
    return store(conn).upsert(conn, principal, workspace, role, now)


def revoke(conn: Connection, principal: str, workspace: str) -> bool:
    return store(conn).revoke(conn, principal, workspace)


def list_grants(conn: Connection, principal: str | None = None) -> list[Grant]:
    return store(conn).list(conn, principal)
