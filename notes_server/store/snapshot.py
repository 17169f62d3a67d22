"""Read snapshots on embedded SQLite without a pool checkout: one held connection per thread.

A read transaction through the pool costs a checkout, SQLAlchemy's transaction objects, a BEGIN
and a COMMIT executed through Core, and the reset on check-in: about ten times the two indexed
queries a `notes_read` runs. Here each thread keeps one connection of its own (outside the
engine's pool, so reads never take a slot a write needs) and opens and ends the snapshot with a
plain BEGIN and COMMIT on the driver. The connection is still a SQLAlchemy `Connection` on the
same engine, so repositories, Core fallbacks and the engine's events work on it unchanged;
a Core statement inside the snapshot joins the driver's transaction (`engine._on_begin` emits no
second BEGIN). Writes keep their pooled BEGIN IMMEDIATE transactions.

Connections are closed when the engine is disposed, and a dead thread's connection is closed when
a new thread makes its own. A snapshot whose end fails drops the thread's connection; the next
read opens a fresh one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import NullPool

_ATTRIBUTE = "_notes_server_snapshots"


class _Held(threading.local):
    """This thread's reader connection, and the context manager of a snapshot on it (one
    object per thread: a read allocates nothing)."""

    def __init__(self, owner: ThreadSnapshots) -> None:
        self.owner = owner
        self.conn: Connection | None = None
        self.driver: sqlite3.Connection | None = None
        self.busy = False
        self.begin = True  # False: one statement, which reads one snapshot by itself

    def __enter__(self) -> Connection:
        conn, driver = self.conn, self.driver
        if conn is None or driver is None:
            conn, driver = self.owner._open(self)
        if self.begin:
            try:
                driver.execute("BEGIN")
            except BaseException:
                self.owner._drop(self, conn)
                raise
        self.busy = True
        return conn

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        """Commit (or, on an exception, roll back) the snapshot: through the Connection when a
        Core statement began its transaction object, else on the driver. A failure drops the
        connection."""
        conn, driver = self.conn, self.driver
        self.busy = False
        if conn is None or driver is None:
            return
        commit = exc_type is None
        try:
            if conn.in_transaction():
                if commit:
                    conn.commit()
                else:
                    conn.rollback()
            elif driver.in_transaction:
                if commit:
                    driver.commit()
                else:
                    driver.rollback()
        except BaseException:
            self.owner._drop(self, conn)
            raise
        if conn.invalidated or conn.closed:
            self.owner._drop(self, conn)


class ThreadSnapshots:
    """The per-thread reader connections of one SQLite engine."""

    def __init__(self, engine: Engine, on_connect: Callable[[Any, Any], None]) -> None:
        self._engine = engine
        self._on_connect = on_connect
        self._lock = threading.Lock()
        self._held = _Held(self)
        self._owners: dict[threading.Thread, Connection] = {}
        self._readers: Engine | None = None

    @classmethod
    def install(cls, engine: Engine, on_connect: Callable[[Any, Any], None]) -> None:
        """Give `engine` per-thread snapshots; they close when the engine is disposed."""
        snapshots = cls(engine, on_connect)
        setattr(engine, _ATTRIBUTE, snapshots)
        event.listen(engine, "engine_disposed", lambda _engine: snapshots.close_all())

    @staticmethod
    def of(engine: Engine) -> ThreadSnapshots | None:
        """The engine's snapshots, or None (a server database, or a Core-only engine)."""
        snapshots: ThreadSnapshots | None = getattr(engine, _ATTRIBUTE, None)
        return snapshots

    def read(self, *, one_statement: bool = False) -> AbstractContextManager[Connection]:
        """One snapshot on this thread's connection; a pooled read transaction when one is
        already open here (a nested read, or a coroutine suspended inside one). For a read of
        `one_statement`, no BEGIN and COMMIT: SQLite runs a lone statement in a snapshot of
        its own, and the two cost about as much as the statement."""
        held = self._held
        if held.busy:
            return pooled_read(self._engine)
        held.begin = not one_statement
        return held

    def _open(self, held: _Held) -> tuple[Connection, sqlite3.Connection]:
        with self._lock:
            if self._readers is None:
                # Same URL and pragmas as the engine; the connection is closed by whichever
                # thread outlives its owner, hence not bound to the thread that opened it.
                readers = create_engine(
                    self._engine.url,
                    poolclass=NullPool,
                    connect_args={"check_same_thread": False},
                )
                event.listen(readers, "connect", self._on_connect)
                self._readers = readers
            readers = self._readers
            for thread in [t for t in self._owners if not t.is_alive()]:
                _close(self._owners.pop(thread))
        fairy = readers.raw_connection()
        driver = fairy.driver_connection
        if not isinstance(driver, sqlite3.Connection):
            fairy.close()
            raise TypeError("per-thread snapshots need the pysqlite driver")
        conn = Connection(self._engine, connection=fairy)
        with self._lock:
            self._owners[threading.current_thread()] = conn
        held.conn, held.driver = conn, driver
        return conn, driver

    def _drop(self, held: _Held, conn: Connection) -> None:
        held.conn = held.driver = None
        with self._lock:
            if self._owners.get(threading.current_thread()) is conn:
                del self._owners[threading.current_thread()]
        _close(conn)

    def close_all(self) -> None:
        """Close every thread's connection (engine disposal); threads open new ones on their
        next read."""
        with self._lock:
            owned = list(self._owners.values())
            self._owners.clear()
            self._held = _Held(self)
            readers, self._readers = self._readers, None
        for conn in owned:
            _close(conn)
        if readers is not None:
            readers.dispose()


@contextmanager
def pooled_read(engine: Engine) -> Iterator[Connection]:
    """A read transaction on a connection checked out of the engine's pool."""
    with engine.connect() as conn, conn.begin():
        yield conn


def _close(conn: Connection) -> None:
    """Close a reader connection, whatever state a failure left it in."""
    with suppress(Exception):  # best effort: the file handle goes either way
        conn.close()
