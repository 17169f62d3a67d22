"""Consumed confirmation nonces: the primary key is what makes a confirmation single-use.

`claim` is an INSERT ... ON CONFLICT DO NOTHING run inside the caller's write transaction, so
the claim commits or rolls back together with the mutation it authorizes, on SQLite and
PostgreSQL alike, with no process-local lock in the argument. `NonceStore` is the interface;
`SqliteNonces` runs all three statements on the driver, `CoreNonces` through Core with the
conflict clause of the connection's dialect.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import BigInteger, Connection, bindparam, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite

from notes_server.store.engine import CoreRun, DriverRead, DriverRun, DriverWrite, uses_driver
from notes_server.store.models import nonces_table as nonces

PRUNE_BATCH = 200

# Built once (every confirmed action runs all three); values are bound per call. On SQLite they
# run straight on the driver connection (DriverRead/DriverWrite), inside the caller's transaction.
_GET = DriverRead(
    select(
        nonces.c.nonce,
        nonces.c.principal,
        nonces.c.tool,
        nonces.c.outcome,
        nonces.c.answer_digest,
        nonces.c.result_json,
    ).where(nonces.c.nonce == bindparam("nonce"))
)
_CLAIM = {
    "postgresql": DriverWrite(
        postgresql.insert(nonces)
        .on_conflict_do_nothing(index_elements=["nonce"])
        .returning(nonces.c.nonce)
    ),
    "sqlite": DriverWrite(
        sqlite.insert(nonces)
        .on_conflict_do_nothing(index_elements=["nonce"])
        .returning(nonces.c.nonce)
    ),
}
# PostgreSQL: a transaction-scoped lock on the nonce, released at commit or rollback.
_LOCK = select(
    func.pg_advisory_xact_lock(func.hashtextextended(bindparam("nonce"), 0, type_=BigInteger))
)
_PRUNE = DriverWrite(
    delete(nonces).where(
        nonces.c.nonce.in_(
            select(nonces.c.nonce)
            .where(nonces.c.expires_at < bindparam("expired_before"))
            .limit(PRUNE_BATCH)
            .scalar_subquery()
        )
    )
)


@dataclass(frozen=True, slots=True)
class NonceRecord:
    nonce: str
    principal: str
    tool: str
    outcome: str
    answer_digest: str | None
    result_json: str | None


class NonceStore(Protocol):
    """The consumed-nonce aggregate."""

    def get(self, conn: Connection, nonce: str) -> NonceRecord | None: ...

    def claim(self, conn: Connection, values: dict[str, Any]) -> bool: ...

    def prune(self, conn: Connection, expired_before: datetime) -> int: ...


class CoreNonces(CoreRun):
    """Portable: every statement through SQLAlchemy Core; the claim's ON CONFLICT clause is
    the connection dialect's own (SQLite and PostgreSQL)."""

    def get(self, conn: Connection, nonce: str) -> NonceRecord | None:
        row = self._first(_GET, conn, {"nonce": nonce})
        return None if row is None else NonceRecord(*row)

    def claim(self, conn: Connection, values: dict[str, Any]) -> bool:
        dialect = conn.dialect.name
        if dialect not in _CLAIM:
            raise NotImplementedError(f"no single-statement nonce claim for {dialect}")
        return self._first(_CLAIM[dialect], conn, values) is not None

    def prune(self, conn: Connection, expired_before: datetime) -> int:
        return self._rowcount(_PRUNE, conn, {"expired_before": expired_before})


class SqliteNonces(DriverRun, CoreNonces):
    """SQLite through pysqlite: lookup, claim and prune on the driver."""


CORE: NonceStore = CoreNonces()
SQLITE: NonceStore = SqliteNonces()


def store(conn: Connection) -> NonceStore:
    """The nonces implementation for this connection."""
    return SQLITE if uses_driver(conn) else CORE


def lock(conn: Connection, nonce: str) -> None:
    """Serialize the transactions that present the same nonce, before they read anything.

    Under READ COMMITTED each statement sees what committed before it started: without this, a
    loser could read the note after the winner deleted it but before it tries its claim, and
    answer "the note no longer exists" instead of "confirmation already consumed". Holding this
    lock first, the loser waits for the winner's commit and then sees its nonce. SQLite needs
    nothing: BEGIN IMMEDIATE already serializes every write transaction.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(_LOCK, {"nonce": nonce})


def get(conn: Connection, nonce: str) -> NonceRecord | None:
    return store(conn).get(conn, nonce)


def claim(
    conn: Connection,
    *,
    nonce: str,
    principal: str,
    tool: str,
    outcome: str,
    answer_digest: str | None,
    result_json: str | None,
    now: datetime,
    expires_at: datetime,
) -> bool:
    """Insert the nonce; False if it was already consumed (by anyone, ever, until pruned)."""
    values: dict[str, Any] = {
        "nonce": nonce,
        "principal": principal,
        "tool": tool,
        "outcome": outcome,
        "answer_digest": answer_digest,
        "result_json": result_json,
        "consumed_at": now,
        "expires_at": expires_at,
    }
    return store(conn).claim(conn, values)


def prune(conn: Connection, *, expired_before: datetime) -> int:
    """Delete a bounded batch of nonces whose states expired before `expired_before`.

    Safe because a state is refused once past its expiry, so its nonce can never be presented
    again successfully; the caller passes a cut-off with a margin for clock skew.
    """
    return store(conn).prune(conn, expired_before)
