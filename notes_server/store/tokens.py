"""API tokens: rows keyed by the SHA-256 of the secret; the secret itself is never stored."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, bindparam, insert, or_, select, update

from notes_server.store.engine import (
    CoreRun,
    DriverRun,
    DriverWrite,
    read_statement,
    runs_on_loop,
    uses_driver,
    write_tx,
)
from notes_server.store.faults import database_fault
from notes_server.store.models import tokens_table as api_tokens
from notes_server.store.types import from_stored

# `last_used_at` is informational: refresh it at most this often so that a busy client does not
# turn every authenticated read into a write transaction.
TOUCH_INTERVAL = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as shown to operators: everything but the hash."""

    id: int
    principal: str
    name: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    def status(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


_COLUMNS = (
    api_tokens.c.id,
    api_tokens.c.principal,
    api_tokens.c.name,
    api_tokens.c.created_at,
    api_tokens.c.expires_at,
    api_tokens.c.revoked_at,
    api_tokens.c.last_used_at,
)


def create(
    conn: Connection,
    *,
    principal: str,
    name: str | None,
    token_hash: str,
    now: datetime,
    expires_at: datetime | None,
) -> int:
    result = conn.execute(
        insert(api_tokens).values(
            principal=principal,
            name=name,
            token_hash=token_hash,
            created_at=now,
            expires_at=expires_at,
        )
    )
    return int(result.inserted_primary_key[0])  # type: ignore[index]


def list_tokens(conn: Connection, principal: str | None = None) -> list[TokenInfo]:
    query = select(*_COLUMNS).order_by(api_tokens.c.id)
    if principal is not None:
        query = query.where(api_tokens.c.principal == principal)
    return [TokenInfo(*row) for row in conn.execute(query)]


def revoke(conn: Connection, token_id: int, now: datetime) -> bool:
    """Revoke an active token; False when there is no such token or it was already revoked."""
    result = conn.execute(
        update(api_tokens)
        .where(api_tokens.c.id == token_id, api_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    return result.rowcount > 0


# Built once: every HTTP request whose token check is not remembered (any commit since, which
# during a 2025-era session round is every request) runs it. On SQLite it runs on the driver
# (DriverWrite, for the bind processing of `now`).
_FIND_ACTIVE = DriverWrite(
    select(*_COLUMNS).where(
        api_tokens.c.token_hash == bindparam("token_hash"),
        api_tokens.c.revoked_at.is_(None),
        or_(api_tokens.c.expires_at.is_(None), api_tokens.c.expires_at > bindparam("now")),
    )
)
_CORE = CoreRun()
_DRIVER = DriverRun()


def find_active(conn: Connection, token_hash: str, now: datetime) -> TokenInfo | None:
    """The unrevoked, unexpired token with this hash, or None."""
    run = _DRIVER if uses_driver(conn) else _CORE
    row = run._first(_FIND_ACTIVE, conn, {"token_hash": token_hash, "now": now})
    if row is None:
        return None
    token_id, principal, name, created_at, expires_at, revoked_at, last_used_at = row
    created = from_stored(created_at)
    assert created is not None  # NOT NULL
    return TokenInfo(
        token_id,
        principal,
        name,
        created,
        from_stored(expires_at),
        from_stored(revoked_at),
        from_stored(last_used_at),
    )


def touch(conn: Connection, token_id: int, now: datetime) -> None:
    conn.execute(
        update(api_tokens)
        .where(
            api_tokens.c.id == token_id,
            or_(
                api_tokens.c.last_used_at.is_(None),
                api_tokens.c.last_used_at <= now - TOUCH_INTERVAL,
            ),
        )
        .values(last_used_at=now)
    )


class SqlTokenRecords:
    """The token repository on one engine, one short transaction per call (the shape the
    authentication layer's `TokenRecords` expects)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def create(
        self,
        *,
        principal: str,
        name: str | None,
        token_hash: str,
        now: datetime,
        expires_at: datetime | None,
    ) -> int:
        with write_tx(self.engine) as conn:
            return create(
                conn,
                principal=principal,
                name=name,
                token_hash=token_hash,
                now=now,
                expires_at=expires_at,
            )

    @property
    def runs_on_loop(self) -> bool:
        """Whether `find_active` is one local indexed read (embedded SQLite on the thread's
        held connection), cheap enough for the event loop."""
        return runs_on_loop(self.engine)

    def find_active(self, token_hash: str, now: datetime) -> TokenInfo | None:
        with read_statement(self.engine) as conn:  # one statement: one snapshot by itself
            return find_active(conn, token_hash, now)

    def touch_if_due(self, token_id: int, last_used_at: datetime | None, now: datetime) -> None:
        """Record use at most once per TOUCH_INTERVAL, so reads rarely write. A database that
        cannot be written (read-only, full) raises its classified DatabaseFault."""
        if last_used_at is None or last_used_at <= now - TOUCH_INTERVAL:
            try:
                with write_tx(self.engine) as conn:
                    touch(conn, token_id, now)
            except Exception as exc:
                fault = database_fault(exc)
                if fault is None:
                    raise
                raise fault from exc
