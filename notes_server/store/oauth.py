"""The built-in authorization server's rows: accounts, sign-in failures, clients, consents
(grants), authorization codes and tokens.

Everything a flow needs lives here, so any worker or instance can finish a flow another began.
Secrets are stored only as SHA-256 digests (codes and tokens carry 256 bits of entropy) or
argon2id hashes (passwords). Single use is settled by one conditional UPDATE each (a code's or
refresh token's `used_at`), so two instances racing on one code both see one winner. Portable
Core only; callers pass the connection and own the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, delete, select, update

from notes_server.store.models import accounts_table as accounts
from notes_server.store.models import oauth_clients_table as clients
from notes_server.store.models import oauth_codes_table as codes
from notes_server.store.models import oauth_grants_table as grants
from notes_server.store.models import oauth_tokens_table as tokens
from notes_server.store.models import sign_in_failures_table as failures

MAX_SIGN_IN_FAILURES = 5
"""Wrong sign-ins for one principal name within `FAILURE_WINDOW` before it is locked."""
FAILURE_WINDOW = timedelta(minutes=15)
LOCKOUT = timedelta(minutes=15)


# -- accounts -------------------------------------------------------------------------------


def password_hash(conn: Connection, principal: str) -> str | None:
    row = conn.execute(
        select(accounts.c.password_hash).where(accounts.c.principal == principal)
    ).first()
    return None if row is None else str(row[0])


def set_password(conn: Connection, principal: str, hashed: str, now: datetime) -> bool:
    """Create the account or replace its password; True when it was created."""
    done = conn.execute(
        update(accounts)
        .where(accounts.c.principal == principal)
        .values(password_hash=hashed, updated_at=now)
    )
    if done.rowcount == 1:
        return False
    conn.execute(
        accounts.insert().values(
            principal=principal, password_hash=hashed, created_at=now, updated_at=now
        )
    )
    return True


def remove_account(conn: Connection, principal: str) -> bool:
    return conn.execute(delete(accounts).where(accounts.c.principal == principal)).rowcount == 1


# -- sign-in failures -------------------------------------------------------------------------


def locked(conn: Connection, principal: str, now: datetime) -> bool:
    row = conn.execute(
        select(failures.c.locked_until).where(failures.c.principal == principal)
    ).first()
    return row is not None and row[0] is not None and row[0] > now


def count_failure(conn: Connection, principal: str, now: datetime) -> bool:
    """Count one wrong sign-in for `principal` (whether or not it has an account); True when
    this one locks it. A window older than `FAILURE_WINDOW` starts again from one."""
    row = conn.execute(
        select(failures.c.failures, failures.c.window_start).where(
            failures.c.principal == principal
        )
    ).first()
    if row is None and _insert_first_failure(conn, principal, now):
        count = 1
    elif row is None:  # another instance counted this name's first failure meanwhile
        count = int(
            conn.execute(
                update(failures)
                .where(failures.c.principal == principal)
                .values(failures=failures.c.failures + 1)
                .returning(failures.c.failures)
            ).scalar_one()
        )
    elif row[1] + FAILURE_WINDOW <= now:
        conn.execute(
            update(failures)
            .where(failures.c.principal == principal)
            .values(failures=1, window_start=now, locked_until=None)
        )
        count = 1
    else:
        count = int(
            conn.execute(
                update(failures)
                .where(failures.c.principal == principal)
                .values(failures=failures.c.failures + 1)
                .returning(failures.c.failures)
            ).scalar_one()
        )
    if count >= MAX_SIGN_IN_FAILURES:
        conn.execute(
            update(failures)
            .where(failures.c.principal == principal)
            .values(locked_until=now + LOCKOUT)
        )
        return True
    return False


def _insert_first_failure(conn: Connection, principal: str, now: datetime) -> bool:
    """Insert the name's first failure in a savepoint; False when a racing insert won."""
    from sqlalchemy.exc import IntegrityError

    try:
        with conn.begin_nested():
            conn.execute(
                failures.insert().values(
                    principal=principal, failures=1, window_start=now, locked_until=None
                )
            )
    except IntegrityError:
        return False
    return True


def clear_failures(conn: Connection, principal: str) -> None:
    conn.execute(delete(failures).where(failures.c.principal == principal))


# -- clients ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientRecord:
    client_id: str
    kind: str  # "operator", "dcr" or "cimd"
    name: str | None
    secret_hash: str | None
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    @property
    def redirect_uris(self) -> list[str]:
        uris = self.metadata.get("redirect_uris")
        return [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []


_CLIENT_COLUMNS = (
    clients.c.client_id,
    clients.c.kind,
    clients.c.name,
    clients.c.secret_hash,
    clients.c.metadata_json,
    clients.c.created_at,
    clients.c.expires_at,
    clients.c.revoked_at,
)


def _client(row: Any) -> ClientRecord:
    return ClientRecord(
        client_id=row.client_id,
        kind=row.kind,
        name=row.name,
        secret_hash=row.secret_hash,
        metadata=json.loads(row.metadata_json),
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


def get_client(conn: Connection, client_id: str) -> ClientRecord | None:
    row = conn.execute(select(*_CLIENT_COLUMNS).where(clients.c.client_id == client_id)).first()
    return None if row is None else _client(row)


def list_clients(conn: Connection) -> list[ClientRecord]:
    rows = conn.execute(select(*_CLIENT_COLUMNS).order_by(clients.c.created_at))
    return [_client(row) for row in rows]


def put_client(
    conn: Connection,
    *,
    client_id: str,
    kind: str,
    name: str | None,
    secret_hash: str | None,
    metadata: dict[str, Any],
    now: datetime,
    expires_at: datetime | None = None,
) -> None:
    """Insert a client, or refresh a cached metadata document (never un-revokes one)."""
    values = {
        "kind": kind,
        "name": name,
        "secret_hash": secret_hash,
        "metadata_json": json.dumps(metadata, sort_keys=True),
        "expires_at": expires_at,
    }
    done = conn.execute(update(clients).where(clients.c.client_id == client_id).values(**values))
    if done.rowcount == 0:
        conn.execute(
            clients.insert().values(client_id=client_id, created_at=now, revoked_at=None, **values)
        )


def count_registered_since(conn: Connection, since: datetime) -> int:
    """Dynamically registered clients since `since` (the registration rate limit)."""
    from sqlalchemy import func

    query = select(func.count()).where(clients.c.kind == "dcr", clients.c.created_at >= since)
    return int(conn.execute(query).scalar_one())


def revoke_client(conn: Connection, client_id: str, now: datetime) -> bool:
    """Revoke the client and every consent it holds (and so every token)."""
    done = _revoke(conn, clients, clients.c.client_id, client_id, now)
    _revoke(conn, grants, grants.c.client_id, client_id, now)
    return done == 1


def _revoke(
    conn: Connection, table: Table, key: ColumnElement[str], value: str, now: datetime
) -> int:
    """Mark `table`'s rows whose `key` is `value` and that are not revoked yet as revoked at
    `now`; how many there were."""
    done = conn.execute(
        update(table).where(key == value, table.c.revoked_at.is_(None)).values(revoked_at=now)
    )
    return int(done.rowcount)


# -- grants (consents) ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrantRecord:
    id: str
    client_id: str
    principal: str
    resource: str
    workspaces: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None


_GRANT_COLUMNS = (
    grants.c.id,
    grants.c.client_id,
    grants.c.principal,
    grants.c.resource,
    grants.c.workspaces_json,
    grants.c.created_at,
    grants.c.revoked_at,
)


def _grant(row: Any) -> GrantRecord:
    return GrantRecord(
        id=row.id,
        client_id=row.client_id,
        principal=row.principal,
        resource=row.resource,
        workspaces=tuple(json.loads(row.workspaces_json)),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def create_grant(
    conn: Connection,
    *,
    grant_id: str,
    client_id: str,
    principal: str,
    resource: str,
    workspaces: Sequence[str],
    now: datetime,
) -> None:
    conn.execute(
        grants.insert().values(
            id=grant_id,
            client_id=client_id,
            principal=principal,
            resource=resource,
            workspaces_json=json.dumps(sorted(workspaces)),
            created_at=now,
            revoked_at=None,
        )
    )


def get_grant(conn: Connection, grant_id: str) -> GrantRecord | None:
    row = conn.execute(select(*_GRANT_COLUMNS).where(grants.c.id == grant_id)).first()
    return None if row is None else _grant(row)


def list_grants(conn: Connection, client_id: str | None = None) -> list[GrantRecord]:
    query = select(*_GRANT_COLUMNS).order_by(grants.c.created_at)
    if client_id is not None:
        query = query.where(grants.c.client_id == client_id)
    return [_grant(row) for row in conn.execute(query)]


def revoke_grant(conn: Connection, grant_id: str, now: datetime) -> bool:
    return _revoke(conn, grants, grants.c.id, grant_id, now) == 1


# -- authorization codes ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CodeRecord:
    grant_id: str
    client_id: str
    redirect_uri: str
    code_challenge: str
    expires_at: datetime


def save_code(
    conn: Connection,
    *,
    code_hash: str,
    grant_id: str,
    client_id: str,
    redirect_uri: str,
    code_challenge: str,
    expires_at: datetime,
) -> None:
    conn.execute(
        codes.insert().values(
            code_hash=code_hash,
            grant_id=grant_id,
            client_id=client_id,
            redirect_uri=redirect_uri,
            code_challenge=code_challenge,
            expires_at=expires_at,
            used_at=None,
        )
    )


def claim_code(conn: Connection, code_hash: str, now: datetime) -> tuple[CodeRecord | None, bool]:
    """Spend a code: (its record, False) once; (None, True) when it was already spent (a
    replay: the caller revokes its grant); (None, False) when unknown or expired."""
    claimed = conn.execute(
        update(codes)
        .where(codes.c.code_hash == code_hash, codes.c.used_at.is_(None))
        .values(used_at=now)
    ).rowcount
    row = conn.execute(select(codes).where(codes.c.code_hash == code_hash)).first()
    if row is None:
        return None, False
    if claimed != 1:
        return CodeRecord(row.grant_id, row.client_id, "", "", row.expires_at), True
    if row.expires_at <= now:
        return None, False
    record = CodeRecord(
        row.grant_id, row.client_id, row.redirect_uri, row.code_challenge, row.expires_at
    )
    return record, False


# -- tokens -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActiveToken:
    """An unrevoked, unexpired token of an unrevoked grant of an unrevoked client."""

    kind: str
    expires_at: datetime
    grant: GrantRecord


def save_token(
    conn: Connection,
    *,
    token_hash: str,
    kind: str,
    grant_id: str,
    now: datetime,
    expires_at: datetime,
) -> None:
    conn.execute(
        tokens.insert().values(
            token_hash=token_hash,
            kind=kind,
            grant_id=grant_id,
            created_at=now,
            expires_at=expires_at,
            used_at=None,
            revoked_at=None,
        )
    )


def find_token(conn: Connection, token_hash: str, kind: str, now: datetime) -> ActiveToken | None:
    """The active token of this kind (a spent refresh token is not active)."""
    query = (
        select(tokens.c.kind, tokens.c.expires_at, *_GRANT_COLUMNS)
        .join(grants, grants.c.id == tokens.c.grant_id)
        .join(clients, clients.c.client_id == grants.c.client_id)
        .where(
            tokens.c.token_hash == token_hash,
            tokens.c.kind == kind,
            tokens.c.revoked_at.is_(None),
            tokens.c.used_at.is_(None),
            tokens.c.expires_at > now,
            grants.c.revoked_at.is_(None),
            clients.c.revoked_at.is_(None),
        )
    )
    row = conn.execute(query).first()
    if row is None:
        return None
    return ActiveToken(row.kind, row.expires_at, _grant(row))


def claim_refresh(conn: Connection, token_hash: str, now: datetime) -> tuple[str | None, bool]:
    """Spend a refresh token for its rotation: (grant id, False) once; (grant id, True) when
    it was already spent (a reuse: the caller revokes the grant); (None, False) if unknown."""
    claimed = conn.execute(
        update(tokens)
        .where(
            tokens.c.token_hash == token_hash,
            tokens.c.kind == "refresh",
            tokens.c.used_at.is_(None),
        )
        .values(used_at=now)
    ).rowcount
    row = conn.execute(
        select(tokens.c.grant_id).where(
            tokens.c.token_hash == token_hash, tokens.c.kind == "refresh"
        )
    ).first()
    if row is None:
        return None, False
    return str(row[0]), claimed != 1


def token_grant(conn: Connection, token_hash: str) -> str | None:
    row = conn.execute(select(tokens.c.grant_id).where(tokens.c.token_hash == token_hash)).first()
    return None if row is None else str(row[0])


def revoke_token(conn: Connection, token_hash: str, now: datetime) -> None:
    conn.execute(
        update(tokens)
        .where(tokens.c.token_hash == token_hash, tokens.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )


def prune(conn: Connection, now: datetime) -> None:
    """Drop expired codes and tokens (their grants stay, for `client grants`)."""
    conn.execute(delete(codes).where(codes.c.expires_at < now - timedelta(days=1)))
    conn.execute(delete(tokens).where(tokens.c.expires_at < now - timedelta(days=1)))
