"""The change log's reader and the change feed every change subscription is served from.

The log (`note_changes`, migration 0016) is written by triggers on `notes`, in the writer's
own transaction: a row exists if and only if its note mutation committed. Kinds: `created`,
`updated`, `moved`, `archived`, `restored`, `deleted` (a purge is a `deleted`). It is bounded
by a trigger too: every PRUNE_EVERY-th row deletes the rows more than MAX_ROWS behind it and
those older than MAX_AGE_HOURS.

`feed(engine)` is the one `ChangeFeed` of an engine in this process, shared by all its
subscribers: one background thread, started by the first subscriber and ended after the
last, that reads the log after the last sequence it delivered and hands each batch to every
listener (which must not block: subscriptions queue, bounded). What wakes it:

- PostgreSQL: a dedicated psycopg connection that `LISTEN`s on `notes_changes` (the trigger's
  `pg_notify`, sent at commit), plus a safety read every POLL_S.
- SQLite: one cheap check per INTERVAL_S for all subscribers, `PRAGMA data_version` on its own
  connection (it changes when any other connection, of any process, committed), and at once
  after a commit of this process (`engine.write_signal(engine, "changes")`).

Sequences can commit out of order on PostgreSQL (seq 7 commits after seq 8 was read): the feed
remembers what it delivered above its low-water mark and waits up to GAP_WAIT_S for a missing
sequence before deciding it was rolled back, so a late commit is still delivered, once.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection, Engine, func, select

from notes_server.store.engine import write_signal
from notes_server.store.models import changes_table as changes
from notes_server.store.per_object import OnePer

log = logging.getLogger("notes_server.changes")

# The same numbers as migration 0016's triggers.
MAX_ROWS = 100_000
PRUNE_EVERY = 512
MAX_AGE_HOURS = 24
CHANNEL = "notes_changes"
# Kinds that change which notes a workspace lists (`notifications/resources/list_changed`).
LIST_KINDS = frozenset({"created", "deleted", "moved", "archived", "restored"})
INTERVAL_S = 0.05
POLL_S = 1.0
GAP_WAIT_S = 5.0
BATCH = 1000
_GAP_SPAN = 10_000
_ROWS = "SELECT seq, workspace, note_id, kind, previous_workspace FROM note_changes "


class Change(NamedTuple):
    """One committed note mutation."""

    seq: int
    workspace: str
    note_id: str
    kind: str
    previous_workspace: str | None

    def workspaces(self) -> tuple[str, ...]:
        """The workspaces whose listing this change touches (a move between two: both)."""
        if self.previous_workspace is None:
            return (self.workspace,)
        return (self.workspace, self.previous_workspace)


Listener = Callable[[Sequence[Change]], None]


def latest(conn: Connection) -> int:
    """The newest logged sequence, 0 for an empty log."""
    return int(conn.execute(select(func.coalesce(func.max(changes.c.seq), 0))).scalar_one())


def since(conn: Connection, seq: int, limit: int = BATCH) -> list[Change]:
    """Logged changes after `seq`, oldest first, at most `limit`."""
    rows = conn.execute(
        select(
            changes.c.seq,
            changes.c.workspace,
            changes.c.note_id,
            changes.c.kind,
            changes.c.previous_workspace,
        )
        .where(changes.c.seq > seq)
        .order_by(changes.c.seq)
        .limit(limit)
    ).all()
    return [Change(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]


def oldest(conn: Connection) -> int | None:
    """The oldest sequence the log still keeps (None: empty), to tell a pruned position."""
    value = conn.execute(select(func.min(changes.c.seq))).scalar_one()
    return None if value is None else int(value)


def gap_wait_s(engine: Engine) -> float:
    """How long a reader waits for a missing sequence before taking it as rolled back: SQLite
    commits sequences in order (one writer), PostgreSQL may commit a lower one later."""
    return 0.0 if engine.dialect.name == "sqlite" else GAP_WAIT_S


class _Source(Protocol):
    """How the feed learns that something may have been logged, and reads it."""

    gap_wait: float

    def wait(self, stop: threading.Event) -> None:
        """Return when a change may have committed (or after a bounded interval)."""

    def rows(self, after: int, limit: int) -> list[Change]: ...

    def latest(self) -> int: ...

    def close(self) -> None: ...


class _SqliteSource:
    """One own connection: `PRAGMA data_version` once per interval, woken by this process's
    commits; reads in autocommit (each statement its own snapshot)."""

    gap_wait = 0.0  # one writer at a time: sequences commit in order

    def __init__(self, engine: Engine) -> None:
        path = engine.url.database
        if not path:
            raise ValueError("the change feed needs a SQLite file")
        self.signal = write_signal(engine, "changes")
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA busy_timeout = 5000")
        self.version = self._data_version()

    def _data_version(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def wait(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + POLL_S
        while not stop.is_set() and time.monotonic() < deadline:
            woken = self.signal.wait(INTERVAL_S)
            if woken:
                self.signal.clear()
                return
            version = self._data_version()
            if version != self.version:
                self.version = version
                return

    def rows(self, after: int, limit: int) -> list[Change]:
        cursor = self.conn.execute(_ROWS + "WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit))
        return [Change(int(r[0]), r[1], r[2], r[3], r[4]) for r in cursor.fetchall()]

    def latest(self) -> int:
        return int(
            self.conn.execute("SELECT coalesce(max(seq), 0) FROM note_changes").fetchone()[0]
        )

    def close(self) -> None:
        self.conn.close()


class _PostgresSource:
    """A dedicated psycopg connection (autocommit) that LISTENs on the log's channel; reads go
    through it too, so the feed never holds one of the pool's connections."""

    gap_wait = GAP_WAIT_S

    def __init__(self, engine: Engine) -> None:
        import psycopg

        url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.signal = write_signal(engine, "changes")
        self.conn: Any = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")

    def wait(self, stop: threading.Event) -> None:
        # The notification of a commit of any process; this process's own commits also set
        # the signal, checked between short waits so a stop is seen promptly.
        deadline = time.monotonic() + POLL_S
        while not stop.is_set() and time.monotonic() < deadline:
            if self.signal.is_set():
                self.signal.clear()
                return
            if any(True for _ in self.conn.notifies(timeout=INTERVAL_S, stop_after=1)):
                # Drain what else arrived with it: one read serves them all.
                for _ in self.conn.notifies(timeout=0, stop_after=10_000):
                    pass
                return

    def rows(self, after: int, limit: int) -> list[Change]:
        cursor = self.conn.execute(_ROWS + "WHERE seq > %s ORDER BY seq LIMIT %s", (after, limit))
        return [Change(int(r[0]), r[1], r[2], r[3], r[4]) for r in cursor.fetchall()]

    def latest(self) -> int:
        row = self.conn.execute("SELECT coalesce(max(seq), 0) FROM note_changes").fetchone()
        return int(row[0])

    def close(self) -> None:
        self.conn.close()


def _source(engine: Engine) -> _Source:
    if engine.dialect.name == "postgresql":
        return _PostgresSource(engine)
    if engine.dialect.name == "sqlite":
        return _SqliteSource(engine)
    raise ValueError(f"no change feed for {engine.dialect.name}")


class Subscription:
    """A listener's registration; `close` ends it (the feed stops after the last)."""

    def __init__(self, feed: ChangeFeed, listener: Listener, position: int) -> None:
        self.feed = feed
        self.listener = listener
        self.position = position

    def close(self) -> None:
        self.feed._remove(self)


class ChangeFeed:
    """The changes of one engine, read once per wake-up for all listeners."""

    def __init__(self, engine: Engine, source: Callable[[Engine], _Source] = _source) -> None:
        self.engine = engine
        self._make_source = source
        self._lock = threading.Lock()
        self._subscriptions: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._low = 0
        self._seen: set[int] = set()
        self._gaps: dict[int, float] = {}

    def subscribe(self, listener: Listener) -> Subscription:
        """Register `listener` for every change committed from now on (the feed's position is
        read before this returns, so nothing committed after it is missed)."""
        with self._lock:
            if self._thread is None:
                source = self._make_source(self.engine)
                self._low = source.latest()
                self._seen, self._gaps = set(), {}
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(source, self._stop), name="notes-changes", daemon=True
                )
                self._thread.start()
            subscription = Subscription(self, listener, self._low)
            self._subscriptions.append(subscription)
            return subscription

    def listeners(self) -> int:
        with self._lock:
            return len(self._subscriptions)

    def _remove(self, subscription: Subscription) -> None:
        """After the last listener the thread stops and its connection closes (waited for,
        unless a listener leaves from inside the feed thread itself)."""
        ending: threading.Thread | None = None
        with self._lock:
            if subscription in self._subscriptions:
                self._subscriptions.remove(subscription)
            if not self._subscriptions and self._thread is not None:
                self._stop.set()
                ending, self._thread = self._thread, None
        if ending is not None and ending is not threading.current_thread():
            ending.join(timeout=2 * POLL_S)

    def _run(self, source: _Source | None, stop: threading.Event) -> None:
        """Wait, read, deliver; a lost connection (a database restart) is opened again after
        POLL_S, and the read resumes from the low-water mark, so nothing is skipped."""
        while not stop.is_set():
            try:
                if source is None:
                    source = self._make_source(self.engine)
                source.wait(stop)
                if stop.is_set():
                    break
                self._deliver(source)
            except Exception as exc:
                log.warning("the change feed lost its database connection: %s", type(exc).__name__)
                if source is not None:
                    with contextlib.suppress(Exception):
                        source.close()
                source = None
                stop.wait(POLL_S)
        if source is not None:
            with contextlib.suppress(Exception):
                source.close()

    def _deliver(self, source: _Source) -> None:
        while True:
            rows = source.rows(self._low, BATCH)
            fresh = [row for row in rows if row.seq not in self._seen]
            self._seen.update(row.seq for row in fresh)
            self._advance(source.gap_wait)
            if fresh:
                with self._lock:
                    subscribers = list(self._subscriptions)
                for subscription in subscribers:
                    try:
                        subscription.listener(fresh)
                    except Exception:
                        log.exception("a change listener failed")
            if len(rows) < BATCH:
                return

    def _advance(self, gap_wait: float) -> None:
        """Move the low-water mark over delivered sequences and gaps given up on."""
        if not self._seen:
            return
        now = time.monotonic()
        highest = max(self._seen)
        if highest - self._low > _GAP_SPAN:
            gap_wait = 0.0
        for seq in range(self._low + 1, highest):
            if seq not in self._seen:
                self._gaps.setdefault(seq, now)
        while True:
            following = self._low + 1
            if following in self._seen:
                self._seen.discard(following)
            elif following in self._gaps and now - self._gaps[following] >= gap_wait:
                del self._gaps[following]
            else:
                return
            self._low = following


_FEEDS: OnePer[Engine, ChangeFeed] = OnePer(ChangeFeed)


def feed(engine: Engine) -> ChangeFeed:
    """The one change feed of `engine` in this process."""
    return _FEEDS(engine)
