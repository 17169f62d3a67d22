"""2025-11-25 HTTP sessions and their open questions, shared by every worker through the database.

A session row holds the little a session needs (principal, negotiated version, capabilities,
expiry); a question row is one server-initiated request waiting for the client's answer. Every
lookup is scoped to the principal, so another principal's credential never finds a session.
One short transaction per call; expired rows are pruned in bounded batches on creation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, delete, insert, select, update

from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import http_questions_table as questions
from notes_server.store.models import http_sessions_table as sessions

PRUNE_BATCH = 200
# The request id of a cancellation that arrived before any question (ours start with "s-").
CANCELLED_MARKER = "cancelled:"
# An active session's expiry moves forward at most this often (not a write per request).
REFRESH_INTERVAL = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    principal: str
    version: str
    capabilities_json: str
    client_info_json: str | None
    expires_at: datetime
    roots_json: str | None = None
    roots_generation: int = 0


@dataclass(frozen=True, slots=True)
class Answer:
    """A question's state: the client's JSON-RPC response (text), and whether it was cancelled."""

    response_json: str | None
    cancelled: bool


class SqlLegacySessions:
    """The session repository on one engine, one short transaction per call."""

    def __init__(self, engine: Engine, ttl: timedelta) -> None:
        self.engine = engine
        self.ttl = ttl

    def create(self, session_hash: str, record: SessionRecord, now: datetime) -> None:
        with write_tx(self.engine) as conn:
            _prune(conn, now)
            conn.execute(
                insert(sessions).values(
                    session_hash=session_hash,
                    principal=record.principal,
                    version=record.version,
                    capabilities_json=record.capabilities_json,
                    client_info_json=record.client_info_json,
                    created_at=now,
                    expires_at=record.expires_at,
                )
            )

    def find(self, session_hash: str, principal: str, now: datetime) -> SessionRecord | None:
        """The live session of this principal; refreshes its expiry when due."""
        with read_tx(self.engine) as conn:
            row = conn.execute(
                select(
                    sessions.c.principal,
                    sessions.c.version,
                    sessions.c.capabilities_json,
                    sessions.c.client_info_json,
                    sessions.c.expires_at,
                    sessions.c.roots_json,
                    sessions.c.roots_generation,
                ).where(
                    sessions.c.session_hash == session_hash,
                    sessions.c.principal == principal,
                    sessions.c.expires_at > now,
                )
            ).first()
        if row is None:
            return None
        record = SessionRecord(*row)
        if record.expires_at < now + self.ttl - REFRESH_INTERVAL:
            with write_tx(self.engine) as conn:
                conn.execute(
                    update(sessions)
                    .where(sessions.c.session_hash == session_hash)
                    .values(expires_at=now + self.ttl)
                )
        return record

    def forget_roots(self, session_hash: str, principal: str) -> None:
        """The client's roots changed: drop the stored ones, so the next request asks again."""
        with write_tx(self.engine) as conn:
            conn.execute(
                update(sessions)
                .where(sessions.c.session_hash == session_hash, sessions.c.principal == principal)
                .values(roots_json=None, roots_generation=sessions.c.roots_generation + 1)
            )

    def store_roots(self, session_hash: str, roots_json: str, generation: int) -> None:
        """Keep the roots fetched at `generation`, unless the client changed them since."""
        with write_tx(self.engine) as conn:
            conn.execute(
                update(sessions)
                .where(
                    sessions.c.session_hash == session_hash,
                    sessions.c.roots_generation == generation,
                )
                .values(roots_json=roots_json)
            )

    def end(self, session_hash: str, principal: str) -> bool:
        """Delete the principal's session and its open questions; False when there was none."""
        with write_tx(self.engine) as conn:
            deleted = conn.execute(
                delete(sessions).where(
                    sessions.c.session_hash == session_hash, sessions.c.principal == principal
                )
            ).rowcount
            if deleted:
                conn.execute(delete(questions).where(questions.c.session_hash == session_hash))
        return bool(deleted)

    def ask(
        self, session_hash: str, request_id: str, client_request: str, expires: datetime
    ) -> bool:
        """Record a question before it is sent, so that its answer has somewhere to land;
        False (nothing recorded) when the client already cancelled `client_request`."""
        with write_tx(self.engine) as conn:
            if _cancelled(conn, session_hash, client_request):
                return False
            _insert(conn, session_hash, request_id, client_request, expires, cancelled=False)
        return True

    def answer(self, session_hash: str, request_id: str, response_json: str, now: datetime) -> bool:
        """Store the first answer to an open question; False for unknown, answered or expired."""
        with write_tx(self.engine) as conn:
            changed = conn.execute(
                update(questions)
                .where(
                    questions.c.session_hash == session_hash,
                    questions.c.request_id == request_id,
                    questions.c.response_json.is_(None),
                    questions.c.expires_at > now,
                )
                .values(response_json=response_json)
            ).rowcount
        return bool(changed)

    def cancel(self, session_hash: str, client_request: str, expires: datetime) -> None:
        """Mark every question asked while serving `client_request` as cancelled. With none
        open yet (the call is still in its first round), leave a marker so that none is asked."""
        with write_tx(self.engine) as conn:
            changed = conn.execute(
                update(questions)
                .where(
                    questions.c.session_hash == session_hash,
                    questions.c.client_request == client_request,
                )
                .values(cancelled=True)
            ).rowcount
            if not changed:
                marker = CANCELLED_MARKER + client_request
                _insert(conn, session_hash, marker, client_request, expires, cancelled=True)

    def poll(self, session_hash: str, request_id: str) -> Answer | None:
        """The question's state; None when it is gone (the session ended). It counts as
        cancelled when any row of its client request is: under READ COMMITTED a cancel can
        commit beside an `ask` it did not see, leaving the marker but not this row marked."""
        same_call = questions.alias("same_call")
        cancelled = (
            select(same_call.c.request_id)
            .where(
                same_call.c.session_hash == questions.c.session_hash,
                same_call.c.client_request == questions.c.client_request,
                same_call.c.cancelled.is_(True),
            )
            .exists()
        )
        with read_tx(self.engine) as conn:
            row = conn.execute(
                select(questions.c.response_json, cancelled).where(
                    questions.c.session_hash == session_hash,
                    questions.c.request_id == request_id,
                )
            ).first()
        return None if row is None else Answer(row[0], bool(row[1]))

    def close(self, session_hash: str, request_id: str) -> None:
        """Forget an answered or abandoned question. A cancelled one stays until it expires:
        it is the call's cancellation, which a later round (or page wait) must still see."""
        with write_tx(self.engine) as conn:
            conn.execute(
                delete(questions).where(
                    questions.c.session_hash == session_hash,
                    questions.c.request_id == request_id,
                    questions.c.cancelled.is_(False),
                )
            )


def _cancelled(conn: Connection, session_hash: str, client_request: str) -> bool:
    row = conn.execute(
        select(questions.c.request_id)
        .where(
            questions.c.session_hash == session_hash,
            questions.c.client_request == client_request,
            questions.c.cancelled.is_(True),
        )
        .limit(1)
    ).first()
    return row is not None


def _insert(
    conn: Connection,
    session_hash: str,
    request_id: str,
    client_request: str,
    expires: datetime,
    *,
    cancelled: bool,
) -> None:
    conn.execute(
        insert(questions).values(
            session_hash=session_hash,
            request_id=request_id,
            client_request=client_request,
            response_json=None,
            cancelled=cancelled,
            expires_at=expires,
        )
    )


def _prune(conn: Connection, now: datetime) -> None:
    """Delete a bounded batch of expired sessions, and expired questions (few: one per open
    confirmation), inside the caller's write transaction."""
    expired = (
        select(sessions.c.session_hash)
        .where(sessions.c.expires_at < now)
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    conn.execute(delete(sessions).where(sessions.c.session_hash.in_(expired)))
    conn.execute(delete(questions).where(questions.c.expires_at < now))
