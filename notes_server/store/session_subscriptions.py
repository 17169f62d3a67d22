"""A 2025-11-25 HTTP session's change subscriptions and its one GET stream, in the database
(migration 0018), so that every worker and instance serves them alike.

A subscription row keeps the note its URI resolved to and the change-log sequence it was made
at; the stream row keeps the sequence the session's list changes start at and the id of its
current GET stream. Both are deleted with their session (ON DELETE CASCADE, also on SQLite:
`foreign_keys` is on for every connection).
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from notes_server.store.models import legacy_streams_table as streams
from notes_server.store.models import legacy_subscriptions_table as subscriptions


class Subscribed(NamedTuple):
    uri: str
    note_id: str | None
    from_seq: int


class StreamState(NamedTuple):
    """What a GET stream reads before each delivery: whether it is still the session's one
    stream, from when list changes are sent, and the subscriptions."""

    current: bool
    list_from_seq: int | None
    subscribed: tuple[Subscribed, ...]


def count(conn: Connection, session_hash: str) -> int:
    query = select(func.count()).where(subscriptions.c.session_hash == session_hash)
    return int(conn.execute(query).scalar_one())


def is_subscribed(conn: Connection, session_hash: str, uri: str) -> bool:
    query = select(subscriptions.c.uri).where(
        subscriptions.c.session_hash == session_hash, subscriptions.c.uri == uri
    )
    return conn.execute(query).first() is not None


def subscribe(conn: Connection, session_hash: str, uri: str, note_id: str | None, seq: int) -> None:
    """Add (or renew) the subscription; the session's list changes start now if not yet."""
    conn.execute(
        delete(subscriptions).where(
            subscriptions.c.session_hash == session_hash, subscriptions.c.uri == uri
        )
    )
    conn.execute(
        insert(subscriptions).values(
            session_hash=session_hash, uri=uri, note_id=note_id, from_seq=seq
        )
    )
    started = conn.execute(
        update(streams)
        .where(streams.c.session_hash == session_hash, streams.c.list_from_seq.is_(None))
        .values(list_from_seq=seq)
    ).rowcount
    if not started and not _has_stream_row(conn, session_hash):
        _insert_stream_row(conn, session_hash, list_from_seq=seq, stream_id=None)


def unsubscribe(conn: Connection, session_hash: str, uri: str) -> None:
    conn.execute(
        delete(subscriptions).where(
            subscriptions.c.session_hash == session_hash, subscriptions.c.uri == uri
        )
    )


def claim_stream(conn: Connection, session_hash: str, stream_id: str) -> None:
    """Make `stream_id` the session's one GET stream (any earlier one ends at its next read)."""
    changed = conn.execute(
        update(streams).where(streams.c.session_hash == session_hash).values(stream_id=stream_id)
    ).rowcount
    if not changed:
        _insert_stream_row(conn, session_hash, list_from_seq=None, stream_id=stream_id)


def release_stream(conn: Connection, session_hash: str, stream_id: str) -> None:
    """The stream ended: forget it, unless a newer one took its place."""
    conn.execute(
        update(streams)
        .where(streams.c.session_hash == session_hash, streams.c.stream_id == stream_id)
        .values(stream_id=None)
    )


def stream_state(conn: Connection, session_hash: str, stream_id: str) -> StreamState:
    row = conn.execute(
        select(streams.c.stream_id, streams.c.list_from_seq).where(
            streams.c.session_hash == session_hash
        )
    ).first()
    if row is None or row[0] != stream_id:
        return StreamState(False, None, ())
    rows = conn.execute(
        select(subscriptions.c.uri, subscriptions.c.note_id, subscriptions.c.from_seq)
        .where(subscriptions.c.session_hash == session_hash)
        .order_by(subscriptions.c.uri)
    ).all()
    found = tuple(Subscribed(r[0], r[1], int(r[2])) for r in rows)
    return StreamState(True, None if row[1] is None else int(row[1]), found)


def _has_stream_row(conn: Connection, session_hash: str) -> bool:
    query = select(streams.c.session_hash).where(streams.c.session_hash == session_hash)
    return conn.execute(query).first() is not None


def _insert_stream_row(
    conn: Connection, session_hash: str, *, list_from_seq: int | None, stream_id: str | None
) -> None:
    """Insert the row; a concurrent insert of the same session wins and is updated instead."""
    values = {"list_from_seq": list_from_seq, "stream_id": stream_id}
    try:
        with conn.begin_nested():
            conn.execute(insert(streams).values(session_hash=session_hash, **values))
    except IntegrityError:
        kept = {k: v for k, v in values.items() if v is not None}
        if kept:
            conn.execute(update(streams).where(streams.c.session_hash == session_hash).values(kept))
