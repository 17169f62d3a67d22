"""2025-11-25 HTTP sessions and their open questions, shared by every worker through the database.

A session row holds the little a session needs (principal, negotiated version, capabilities,
expiry); a question row is one server-initiated request waiting for the client's answer. Every
lookup is scoped to the principal, so another principal's credential never finds a session.
One short transaction per call; expired rows are pruned in bounded batches on creation and by
the transport's periodic `sweep`. A principal keeps at most `max_per_principal` sessions:
opening one more ends its least recently used (the one whose expiry, which moves forward with
use, is earliest).

The statements of every round (look up the session, ask, poll, answer, close) are built once;
on embedded SQLite they run straight on the driver (`DriverRead`/`DriverWrite`) and the two reads
may run on the caller's thread (`runs_on_loop`): one indexed statement on the thread's held
connection, where a worker-thread hand-off would cost more than the read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, delete, insert, select, update

from notes_server.store.engine import (
    CoreRun,
    DriverRead,
    DriverRun,
    DriverWrite,
    read_statement,
    runs_on_loop,
    uses_driver,
    write_tx,
)
from notes_server.store.models import http_questions_table as questions
from notes_server.store.models import http_sessions_table as sessions
from notes_server.store.types import from_stored

PRUNE_BATCH = 200
# Live 2025-era HTTP sessions one principal may hold; one more evicts its least recently used.
MAX_SESSIONS_PER_PRINCIPAL = 64
# At most this many batches per sweep, so one sweep stays a short series of transactions.
SWEEP_BATCHES = 10
# The request id of a cancellation that arrived before any question (ours start with "s-").
CANCELLED_MARKER = "cancelled:"
# An active session's expiry moves forward at most this often (not a write per request).
REFRESH_INTERVAL = timedelta(minutes=5)

# Bind names differ from column names: in an UPDATE those are reserved for its SET values.
_FIND = DriverWrite(  # DriverWrite: `now` needs the column's bind processing on the driver too
    select(
        sessions.c.principal,
        sessions.c.version,
        sessions.c.capabilities_json,
        sessions.c.client_info_json,
        sessions.c.expires_at,
        sessions.c.roots_json,
        sessions.c.roots_generation,
        sessions.c.log_level,
    ).where(
        sessions.c.session_hash == bindparam("hash"),
        sessions.c.principal == bindparam("who"),
        sessions.c.expires_at > bindparam("now"),
    )
)
_REFRESH = DriverWrite(
    update(sessions)
    .where(sessions.c.session_hash == bindparam("hash"))
    .values(expires_at=bindparam("expiry", type_=sessions.c.expires_at.type))
)
_CANCELLED = DriverRead(
    select(questions.c.request_id)
    .where(
        questions.c.session_hash == bindparam("hash"),
        questions.c.client_request == bindparam("call"),
        questions.c.cancelled.is_(True),
    )
    .limit(1)
)
_ASK = DriverWrite(insert(questions))
_ANSWER = DriverWrite(
    update(questions)
    .where(
        questions.c.session_hash == bindparam("hash"),
        questions.c.request_id == bindparam("question"),
        questions.c.response_json.is_(None),
        questions.c.expires_at > bindparam("now"),
    )
    .values(response_json=bindparam("response", type_=questions.c.response_json.type))
)
_SAME_CALL = questions.alias("same_call")
_POLL = DriverRead(
    select(
        questions.c.response_json,
        select(_SAME_CALL.c.request_id)
        .where(
            _SAME_CALL.c.session_hash == questions.c.session_hash,
            _SAME_CALL.c.client_request == questions.c.client_request,
            _SAME_CALL.c.cancelled.is_(True),
        )
        .exists(),
    ).where(
        questions.c.session_hash == bindparam("hash"),
        questions.c.request_id == bindparam("question"),
    )
)
_CLOSE = DriverWrite(
    delete(questions).where(
        questions.c.session_hash == bindparam("hash"),
        questions.c.request_id == bindparam("question"),
        questions.c.cancelled.is_(False),
    )
)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    principal: str
    version: str
    capabilities_json: str
    client_info_json: str | None
    expires_at: datetime
    roots_json: str | None = None
    roots_generation: int = 0
    log_level: str | None = None


@dataclass(frozen=True, slots=True)
class QuestionState:
    """A question's state: the client's JSON-RPC response (text), and whether it was cancelled."""

    response_json: str | None
    cancelled: bool


class SqlLegacySessions:
    """The session repository on one engine, one short transaction per call."""

    def __init__(
        self, engine: Engine, ttl: timedelta, max_per_principal: int = MAX_SESSIONS_PER_PRINCIPAL
    ) -> None:
        self.engine = engine
        self.ttl = ttl
        self.max_per_principal = max_per_principal

    def create(self, session_hash: str, record: SessionRecord, now: datetime) -> None:
        """Store a new session; past the principal's cap, its least recently used end."""
        with write_tx(self.engine) as conn:
            _prune(conn, now)
            evicted = list(
                conn.execute(
                    select(sessions.c.session_hash)
                    .where(sessions.c.principal == record.principal)
                    .order_by(sessions.c.expires_at.desc(), sessions.c.created_at.desc())
                    .offset(self.max_per_principal - 1)
                ).scalars()
            )
            if evicted:
                conn.execute(delete(sessions).where(sessions.c.session_hash.in_(evicted)))
                conn.execute(delete(questions).where(questions.c.session_hash.in_(evicted)))
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

    def sweep(self, now: datetime) -> int:
        """Delete expired sessions and questions (cancellation markers included), in bounded
        batches; the number of sessions deleted."""
        deleted = 0
        for _ in range(SWEEP_BATCHES):
            with write_tx(self.engine) as conn:
                batch = _prune(conn, now)
            deleted += batch
            if batch < PRUNE_BATCH:
                break
        return deleted

    @property
    def runs_on_loop(self) -> bool:
        """Whether `lookup` and `poll` are one local indexed read (embedded SQLite on the
        thread's held connection), cheap enough to run on the event loop."""
        return runs_on_loop(self.engine)

    def lookup(self, session_hash: str, principal: str, now: datetime) -> SessionRecord | None:
        """The live session of this principal, read in one statement. Its expiry moves only
        through `refresh` (a write), which the caller runs when `refresh_due`: the read may
        run on an event loop, the write never does."""
        values = {"hash": session_hash, "who": principal, "now": now}
        with read_statement(self.engine) as conn:
            row = _runner(conn)._first(_FIND, conn, values)
        if row is None:
            return None
        expires = from_stored(row[4])
        assert expires is not None  # the column is NOT NULL
        return SessionRecord(row[0], row[1], row[2], row[3], expires, row[5], row[6], row[7])

    def refresh_due(self, record: SessionRecord, now: datetime) -> bool:
        """An active session's expiry moves forward at most every REFRESH_INTERVAL."""
        return record.expires_at < now + self.ttl - REFRESH_INTERVAL

    def refresh(self, session_hash: str, now: datetime) -> None:
        with write_tx(self.engine) as conn:
            values = {"hash": session_hash, "expiry": now + self.ttl}
            _runner(conn)._rowcount(_REFRESH, conn, values)

    def forget_roots(self, session_hash: str, principal: str) -> None:
        """The client's roots changed: drop the stored ones, so the next request asks again."""
        with write_tx(self.engine) as conn:
            conn.execute(
                update(sessions)
                .where(sessions.c.session_hash == session_hash, sessions.c.principal == principal)
                .values(roots_json=None, roots_generation=sessions.c.roots_generation + 1)
            )

    def set_log_level(self, session_hash: str, principal: str, level: str) -> None:
        """`logging/setLevel`: the level of the session's later log messages."""
        with write_tx(self.engine) as conn:
            conn.execute(
                update(sessions)
                .where(sessions.c.session_hash == session_hash, sessions.c.principal == principal)
                .values(log_level=level)
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
            run = _runner(conn)
            if run._first(_CANCELLED, conn, {"hash": session_hash, "call": client_request}):
                return False
            values = _question(session_hash, request_id, client_request, expires, cancelled=False)
            run._rowcount(_ASK, conn, values)
        return True

    def answer(self, session_hash: str, request_id: str, response_json: str, now: datetime) -> bool:
        """Store the first answer to an open question; False for unknown, answered or expired."""
        values = {"hash": session_hash, "question": request_id, "now": now}
        with write_tx(self.engine) as conn:
            changed = _runner(conn)._rowcount(_ANSWER, conn, {**values, "response": response_json})
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
                values = _question(session_hash, marker, client_request, expires, cancelled=True)
                _runner(conn)._rowcount(_ASK, conn, values)

    def poll(self, session_hash: str, request_id: str) -> QuestionState | None:
        """The question's state; None when it is gone (the session ended). It counts as
        cancelled when any row of its client request is: under READ COMMITTED a cancel can
        commit beside an `ask` it did not see, leaving the marker but not this row marked."""
        with read_statement(self.engine) as conn:
            row = _runner(conn)._first(_POLL, conn, {"hash": session_hash, "question": request_id})
        return None if row is None else QuestionState(row[0], bool(row[1]))

    def close(self, session_hash: str, request_id: str) -> None:
        """Forget an answered or abandoned question. A cancelled one stays until it expires:
        it is the call's cancellation, which a later round (or page wait) must still see."""
        with write_tx(self.engine) as conn:
            _runner(conn)._rowcount(_CLOSE, conn, {"hash": session_hash, "question": request_id})


def _runner(conn: Connection) -> CoreRun | DriverRun:
    """How this connection runs the prepared statements (`engine.uses_driver`)."""
    return _DRIVER if uses_driver(conn) else _CORE


_CORE = CoreRun()
_DRIVER = DriverRun()


def _question(
    session_hash: str, request_id: str, client_request: str, expires: datetime, *, cancelled: bool
) -> dict[str, Any]:
    return {
        "session_hash": session_hash,
        "request_id": request_id,
        "client_request": client_request,
        "response_json": None,
        "cancelled": cancelled,
        "expires_at": expires,
    }


def _prune(conn: Connection, now: datetime) -> int:
    """Delete a bounded batch of expired sessions, and expired questions (few: one per open
    confirmation, plus cancellation markers), inside the caller's write transaction; returns
    how many sessions went."""
    expired = (
        select(sessions.c.session_hash)
        .where(sessions.c.expires_at < now)
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    gone = conn.execute(delete(sessions).where(sessions.c.session_hash.in_(expired))).rowcount
    conn.execute(delete(questions).where(questions.c.expires_at < now))
    return int(gone or 0)
