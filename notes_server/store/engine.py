"""Engine construction, transactions, and the one choice of how statements run.

pysqlite's implicit transaction handling is switched off so that SQLAlchemy's "begin" event can
emit the BEGIN itself: write transactions take the write lock up front (BEGIN IMMEDIATE) instead of
upgrading a deferred read lock later, which fails with "database is locked" under contention. Read
transactions on SQLite begin (deferred) on a per-thread held connection instead (store.snapshot).

Each repository (notes, grants, nonces, audit, search) has a portable implementation that runs
everything through SQLAlchemy Core and a SQLite one that runs its hot statements straight on the
pysqlite connection. `uses_driver` is where one is picked, per engine: the SQLite one on pysqlite
unless the engine was made Core-only (`store_impl="core"`, from NOTES_SERVER_STORE_IMPL=core, which
the test suite uses to run the portable code on SQLite).
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, cast

from sqlalchemy import Connection, Engine, Executable, create_engine, event
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

from notes_server.config import STORE_IMPLS
from notes_server.dburl import parse_database_url
from notes_server.store.faults import is_transient
from notes_server.store.snapshot import ThreadSnapshots, pooled_read

BUSY_TIMEOUT_MS = 30_000
# Server databases: one pooled connection per HTTP worker thread (transports.http.threads keeps
# 10 per process) plus a few for the stdio loop, the token cache and health checks.
POOL_SIZE = 10
POOL_OVERFLOW = 5
# A statement that runs longer than a request may is cancelled by the server (SQLSTATE 57014)
# instead of holding locks after the client was answered 503: the HTTP request timeout.
STATEMENT_TIMEOUT_MS = 30_000
RETRY_ATTEMPTS = 5
RETRY_BASE_DELAY = 0.01
_T = TypeVar("_T")
_WRITE = "notes_server_write"
# Dialects (one per engine) of engines made Core-only: their repositories never use the driver.
# A plain set (checked on every repository call; a WeakSet lookup costs 4x): it holds only the
# dialects of Core-only engines, which tests make.
_CORE_ONLY: set[Dialect] = set()


def make_engine(url: str, *, store_impl: str = "auto") -> Engine:
    """Create an engine; for SQLite, install the pragma and BEGIN hooks.

    `store_impl` (`Settings.store_impl`): "core" makes every repository use its portable Core
    implementation, even on SQLite; "auto" picks the SQLite one there.
    """
    if store_impl not in STORE_IMPLS:
        raise ValueError(f"store_impl must be one of {', '.join(STORE_IMPLS)}, not {store_impl!r}")
    database = parse_database_url(url)
    if database.sqlite_path is None:
        return _server_engine(database.url, store_impl)
    database.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(database.url)
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    if store_impl == "core":
        _CORE_ONLY.add(engine.dialect)
    elif engine.dialect.driver == "pysqlite":
        ThreadSnapshots.install(engine, _on_connect)
    return engine


def _server_engine(url: str, store_impl: str) -> Engine:
    """A server database (PostgreSQL): a pool sized for the worker threads, connections checked
    before use (a restarted server), and a statement timeout on every session."""
    engine = create_engine(url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW)
    event.listen(engine, "connect", _on_server_connect)
    if store_impl == "core":
        _CORE_ONLY.add(engine.dialect)
    return engine


def _on_server_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
    finally:
        cursor.close()
    # psycopg opens a transaction for the SET; leave the session idle, as the pool expects.
    dbapi_connection.commit()


def retrying(body: Callable[[], _T], *, attempts: int = RETRY_ATTEMPTS) -> _T:
    """Run `body` (one whole transaction) again after a transient failure, with bounded,
    jittered exponential backoff; the last failure, or any other error, propagates."""
    for attempt in range(attempts):
        try:
            return body()
        except Exception as exc:
            if attempt == attempts - 1 or not is_transient(exc):
                raise
        time.sleep(RETRY_BASE_DELAY * (2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


def uses_driver(conn: Connection) -> bool:
    """Whether repositories may run statements straight on this connection's pysqlite driver:
    SQLite through pysqlite with positional parameters, and the engine not made Core-only."""
    dialect = conn.dialect
    return (
        dialect.name == "sqlite"
        and dialect.driver == "pysqlite"
        and dialect.positional
        and dialect not in _CORE_ONLY
    )


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        # Sorts and statement journals in memory: a sandboxed server may create no temp file.
        cursor.execute("PRAGMA temp_store = MEMORY")
    finally:
        cursor.close()


def _on_begin(conn: Connection) -> None:
    driver = conn.connection.driver_connection
    if getattr(driver, "in_transaction", False):
        # A Core statement inside a per-thread snapshot: the driver's BEGIN already ran.
        return
    immediate = conn.get_execution_options().get(_WRITE, False)
    # Straight on the driver: through exec_driver_sql the BEGIN cost a whole Core execution
    # (~15 us), part of it after BEGIN IMMEDIATE returned, i.e. holding the write lock.
    cast(sqlite3.Connection, driver).execute("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """One write transaction: takes the write lock first on SQLite; commits or rolls back.
    A commit sets the engine's `write_signal` (the semantic indexer wakes on it)."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn
    signals = _WRITE_SIGNALS.get(engine)
    if signals is not None:
        for signal in signals.values():
            signal.set()


# Per engine, one event per waiter kind (the semantic indexer, the change feed): each clears
# its own, so one never swallows the other's wake-up.
_WRITE_SIGNALS: weakref.WeakKeyDictionary[Engine, dict[str, threading.Event]] = (
    weakref.WeakKeyDictionary()
)
_SIGNALS_LOCK = threading.Lock()


def write_signal(engine: Engine, waiter: str = "indexer") -> threading.Event:
    """An event set after every committed write transaction of this engine in this process:
    what a background worker waits on instead of polling (writes from other processes need a
    poll of their own). One per `waiter` name, created on first ask; writes cost nothing more
    until then."""
    with _SIGNALS_LOCK:
        signals = _WRITE_SIGNALS.get(engine)
        if signals is None:
            signals = _WRITE_SIGNALS[engine] = {}
        signal = signals.get(waiter)
        if signal is None:
            signal = signals[waiter] = threading.Event()
        return signal


def connect_once(engine: Engine) -> None:
    """Open a connection and run one trivial statement: the driver is imported, the pragmas
    (or session settings) applied and the pool holds a live connection before it is needed."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")


def read_tx(engine: Engine) -> AbstractContextManager[Connection]:
    """A read transaction: one consistent snapshot for multi-statement reads. On embedded
    SQLite it runs on the thread's held connection (store.snapshot), without a pool checkout."""
    snapshots = ThreadSnapshots.of(engine)
    return pooled_read(engine) if snapshots is None else snapshots.read()


def runs_on_loop(engine: Engine) -> bool:
    """The one answer to "may an indexed read on this engine run on an event loop?": its
    `read_tx` and `read_statement` run on the thread's held connection (embedded SQLite through
    the driver, WAL: a reader never waits for a writer or a network), cheaper than a hand-off
    to a worker thread. False on a database server and on Core-only engines."""
    return ThreadSnapshots.of(engine) is not None


def read_statement(engine: Engine) -> AbstractContextManager[Connection]:
    """A read that is one statement: on embedded SQLite the thread's held connection without
    BEGIN and COMMIT (a statement reads one snapshot by itself); elsewhere as `read_tx`."""
    snapshots = ThreadSnapshots.of(engine)
    return pooled_read(engine) if snapshots is None else snapshots.read(one_statement=True)


class DriverStatement(ABC):
    """A Core statement, prepared once, that the SQLite repositories run straight on the
    DB-API connection (inside the caller's transaction); the Core ones execute `.statement`."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement

    def first(self, conn: Connection, values: Mapping[str, Any]) -> Sequence[Any] | None:
        """The first row (a read, or a write with RETURNING), or None."""
        row: Sequence[Any] | None = _pysqlite(conn).execute(*self._sql(conn, values)).fetchone()
        return row

    @abstractmethod
    def _sql(self, conn: Connection, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """The SQL text and positional values SQLAlchemy itself would send."""


class DriverRead(DriverStatement):
    """A read-only Core statement that the SQLite repositories run on the pysqlite connection.

    For the reads on every tool call (grant lookup, note by id, title match, search): sent
    through the DBAPI with the SQL text and bind values SQLAlchemy itself would send (compiled
    once), they cost a fraction of a Core execution, inside the same transaction. Only for
    statements whose bound values need no type processing (text, numbers, booleans). Rows come
    back as the driver returns them (SQLite: DateTime as ISO text, Boolean as 0/1), so the
    SQLite repositories convert values as the column types would (`store.types.from_stored`).
    """

    def __init__(self, statement: Executable) -> None:
        super().__init__(statement)
        self._plan: tuple[str, tuple[tuple[str, Any, bool, bool], ...]] | None = None

    def all(self, conn: Connection, values: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        return _pysqlite(conn).execute(*self._sql(conn, values)).fetchall()

    def _sql(self, conn: Connection, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        plan = self._plan
        if plan is None:
            plan = self._plan = self._prepare(conn)
        text, binds = plan
        # What `construct_params` would give (a passed value wins; else the bind's own value;
        # a required one must be passed), without its per-call bookkeeping. An expanding bind
        # (`IN` a list) becomes one `?` per item, as SQLAlchemy renders it.
        params: list[Any] = []
        for key, default, required, expanding in binds:
            value = values[key] if required else values.get(key, default)
            if not expanding:
                params.append(value)
                continue
            items = list(value)
            if not items:
                raise ValueError(f"DriverRead: {key} is an empty list")
            text = text.replace(f"__[POSTCOMPILE_{key}]", ", ".join("?" * len(items)), 1)
            params.extend(items)
        return text, params

    def _prepare(self, conn: Connection) -> tuple[str, tuple[tuple[str, Any, bool, bool], ...]]:
        """The SQL text once, and per positional parameter its bind's key, own value, whether
        a value must be passed and whether it is a list (expanding; at most once per key)."""
        compiled = cast(SQLCompiler, cast(Any, self.statement).compile(dialect=conn.dialect))
        binds = []
        for name in compiled.positiontup or ():
            bind = compiled.binds[name]
            if bind.callable is not None:
                raise TypeError("DriverRead takes plain bound values only")
            binds.append((bind.key, bind.value, bool(bind.required), bool(bind.expanding)))
        return compiled.string, tuple(binds)


def read_all(
    stmt: DriverRead, conn: Connection, values: Mapping[str, Any]
) -> Sequence[Sequence[Any]]:
    """The rows of a prepared read: on the pysqlite driver when the connection allows it (rows
    as the driver returns them), else through Core (rows typed by the columns)."""
    if uses_driver(conn):
        return stmt.all(conn, values)
    return conn.execute(stmt.statement, dict(values)).all()


def write_rowcount(stmt: DriverWrite, conn: Connection, values: Mapping[str, Any]) -> int:
    """Run a prepared write, the twin of `read_all`: on the pysqlite driver when the connection
    allows it, else through Core; how many rows the statement itself changed."""
    if uses_driver(conn):
        return stmt.rowcount(conn, values)
    return int(cast(Any, conn.execute(stmt.statement, dict(values))).rowcount)


class DriverWrite(DriverStatement):
    """A DML Core statement that the SQLite repositories run on the pysqlite connection.

    The write-side twin of DriverRead, for the statements inside the confirmed-action transaction
    (claim the nonce, delete, audit, prune): compiled once per set of value names, bound values
    converted by the columns' own bind processors (timestamps as SQLAlchemy's SQLite text), so
    the driver receives exactly what a Core execution would send. Statements that need
    Python-side column defaults are refused (those only a Core execution computes).
    """

    def __init__(self, statement: Executable) -> None:
        super().__init__(statement)
        self._compiled: dict[frozenset[str], _Bound] = {}

    def rowcount(self, conn: Connection, values: Mapping[str, Any]) -> int:
        """Execute; the number of rows the statement itself changed (triggers not counted)."""
        return int(_pysqlite(conn).execute(*self._sql(conn, values)).rowcount)

    def _sql(self, conn: Connection, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        names = frozenset(values)
        bound = self._compiled.get(names)
        if bound is None:
            bound = _Bound.compile(self.statement, conn, sorted(names))
            self._compiled[names] = bound
        # What `construct_params` would give (a passed value wins; else the bind's own value;
        # a required one must be passed), converted by the bind's processor, without its
        # per-call bookkeeping (as DriverRead does).
        return bound.compiled.string, [
            (values[key] if required else values.get(key, default))
            if process is None
            else process(values[key] if required else values.get(key, default))
            for key, default, required, process in bound.plan
        ]


class CoreRun:
    """How the portable repositories run a prepared statement: SQLAlchemy Core, any database;
    rows come back typed by the column types (aware UTC timestamps, booleans)."""

    @staticmethod
    def _first(stmt: DriverStatement, conn: Connection, values: Mapping[str, Any]) -> Any:
        return conn.execute(stmt.statement, dict(values)).first()

    @staticmethod
    def _all(stmt: DriverRead, conn: Connection, values: Mapping[str, Any]) -> Sequence[Any]:
        return conn.execute(stmt.statement, dict(values)).all()

    @staticmethod
    def _rowcount(stmt: DriverWrite, conn: Connection, values: Mapping[str, Any]) -> int:
        return int(cast(Any, conn.execute(stmt.statement, dict(values))).rowcount)


class DriverRun:
    """How the SQLite repositories run a prepared statement: straight on pysqlite, rows as the
    driver returns them (the repository converts them the way the column types would)."""

    @staticmethod
    def _first(stmt: DriverStatement, conn: Connection, values: Mapping[str, Any]) -> Any:
        return stmt.first(conn, values)

    @staticmethod
    def _all(stmt: DriverRead, conn: Connection, values: Mapping[str, Any]) -> Sequence[Any]:
        return stmt.all(conn, values)

    @staticmethod
    def _rowcount(stmt: DriverWrite, conn: Connection, values: Mapping[str, Any]) -> int:
        return stmt.rowcount(conn, values)


class _Bound:
    """A statement compiled for one dialect and one set of value names: per positional
    parameter its bind's key, own value, whether a value must be passed, and its processor."""

    def __init__(self, compiled: SQLCompiler, plan: tuple[tuple[str, Any, bool, Any], ...]) -> None:
        self.compiled = compiled
        self.plan = plan

    @classmethod
    def compile(cls, statement: Executable, conn: Connection, keys: list[str]) -> _Bound:
        dialect = conn.dialect
        compiled = cast(
            SQLCompiler, cast(Any, statement).compile(dialect=dialect, column_keys=keys)
        )
        if compiled.insert_prefetch or compiled.update_prefetch:
            raise TypeError("DriverWrite cannot compute Python-side column defaults")
        plan = []
        for name in compiled.positiontup or ():
            bind = compiled.binds[name]
            if bind.expanding or bind.callable is not None:
                raise TypeError("DriverWrite takes plain bound values only")
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            plan.append((bind.key, bind.value, bool(bind.required), process))
        return cls(compiled, tuple(plan))


def driver_connection(conn: Connection) -> sqlite3.Connection:
    """The pysqlite connection under `conn` (same transaction), for a repository's statements
    whose shape varies per call (IN lists, many rows) on the driver path."""
    return _pysqlite(conn)


def _pysqlite(conn: Connection) -> sqlite3.Connection:
    """The stdlib sqlite3 connection under `conn` (same transaction)."""
    driver = conn.connection.driver_connection
    if not isinstance(driver, sqlite3.Connection):
        raise TypeError("the SQLite repositories need the pysqlite driver")
    return driver
