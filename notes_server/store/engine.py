"""Engine construction: SQLite pragmas and explicit BEGIN / BEGIN IMMEDIATE transactions.

pysqlite's implicit transaction handling is switched off so that SQLAlchemy's "begin" event can
emit the BEGIN itself: write transactions take the write lock up front (BEGIN IMMEDIATE) instead of
upgrading a deferred read lock later, which fails with "database is locked" under contention.
"""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from sqlalchemy import Connection, Engine, Executable, create_engine, event
from sqlalchemy.sql.compiler import SQLCompiler

from notes_server.dburl import parse_database_url

BUSY_TIMEOUT_MS = 30_000
_WRITE = "notes_server_write"


def make_engine(url: str) -> Engine:
    """Create an engine; for SQLite, install the pragma and BEGIN hooks."""
    database = parse_database_url(url)
    if database.sqlite_path is None:
        return create_engine(database.url, pool_pre_ping=True)
    database.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(database.url)
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    return engine


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
    immediate = conn.get_execution_options().get(_WRITE, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def write_tx(engine: Engine) -> Iterator[Connection]:
    """One write transaction: takes the write lock first on SQLite; commits or rolls back."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn


@contextmanager
def read_tx(engine: Engine) -> Iterator[Connection]:
    """A read transaction: one consistent snapshot for multi-statement reads."""
    with engine.connect() as conn, conn.begin():
        yield conn


class _OnDriver(ABC):
    """A Core statement that, on SQLite with pysqlite, runs on the DB-API connection itself
    (inside the caller's transaction); on other databases it goes through Core unchanged."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement

    def first(self, conn: Connection, values: Mapping[str, Any]) -> Sequence[Any] | None:
        """The first row (a read, or a write with RETURNING), or None."""
        raw = _pysqlite(conn)
        if raw is None:
            return conn.execute(self.statement, dict(values)).first()
        row: Sequence[Any] | None = raw.execute(*self._sql(conn, values)).fetchone()
        return row

    @abstractmethod
    def _sql(self, conn: Connection, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        """The SQL text and positional values SQLAlchemy itself would send."""


class FastRead(_OnDriver):
    """A read-only Core statement that, on SQLite, runs straight on the pysqlite connection.

    For the reads on every tool call (grant lookup, note by id, title match, search): sent
    through the DBAPI with the SQL text and bind values SQLAlchemy itself would send (compiled
    once), they cost a fraction of a Core execution, inside the same transaction. Only for
    statements whose bound values need no type processing (text, numbers, booleans). Rows come
    back as the driver returns them (SQLite: DateTime as ISO text, Boolean as 0/1), so callers
    convert values as the column types would; other databases go through Core unchanged.
    """

    def __init__(self, statement: Executable) -> None:
        super().__init__(statement)
        self._compiled: SQLCompiler | None = None

    def all(self, conn: Connection, values: Mapping[str, Any]) -> Sequence[Sequence[Any]]:
        raw = _pysqlite(conn)
        if raw is None:
            return conn.execute(self.statement, dict(values)).all()
        return raw.execute(*self._sql(conn, values)).fetchall()

    def _sql(self, conn: Connection, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        compiled = self._compiled
        if compiled is None:
            compiled = cast(SQLCompiler, cast(Any, self.statement).compile(dialect=conn.dialect))
            self._compiled = compiled
        params = compiled.construct_params(dict(values))
        return compiled.string, [params[name] for name in compiled.positiontup or ()]


class FastWrite(_OnDriver):
    """A DML Core statement that, on SQLite, runs straight on the pysqlite connection.

    The write-side twin of FastRead, for the statements inside the confirmed-action transaction
    (claim the nonce, delete, audit, prune): compiled once per set of value names, bound values
    converted by the columns' own bind processors (DateTime as SQLAlchemy's SQLite text), so the
    driver receives exactly what a Core execution would send. Statements that need Python-side
    column defaults are refused (those only a Core execution computes). Other databases go
    through Core unchanged.
    """

    def __init__(self, statement: Executable) -> None:
        super().__init__(statement)
        self._compiled: dict[frozenset[str], _Bound] = {}

    def rowcount(self, conn: Connection, values: Mapping[str, Any]) -> int:
        """Execute; the number of rows the statement itself changed (triggers not counted)."""
        raw = _pysqlite(conn)
        if raw is None:
            return int(cast(Any, conn.execute(self.statement, dict(values))).rowcount)
        return int(raw.execute(*self._sql(conn, values)).rowcount)

    def _sql(self, conn: Connection, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        names = frozenset(values)
        bound = self._compiled.get(names)
        if bound is None:
            bound = _Bound.compile(self.statement, conn, sorted(names))
            self._compiled[names] = bound
        params = bound.compiled.construct_params(dict(values))
        return bound.compiled.string, [
            value if process is None else process(value)
            for value, process in zip(
                [params[name] for name in bound.names], bound.processors, strict=True
            )
        ]


class _Bound:
    """A statement compiled for one dialect and one set of value names, with bind processors."""

    def __init__(
        self, compiled: SQLCompiler, names: list[str], processors: list[Any | None]
    ) -> None:
        self.compiled = compiled
        self.names = names
        self.processors = processors

    @classmethod
    def compile(cls, statement: Executable, conn: Connection, keys: list[str]) -> _Bound:
        dialect = conn.dialect
        compiled = cast(
            SQLCompiler, cast(Any, statement).compile(dialect=dialect, column_keys=keys)
        )
        if compiled.insert_prefetch or compiled.update_prefetch:
            raise TypeError("FastWrite cannot compute Python-side column defaults")
        names = list(compiled.positiontup or ())
        processors = [
            compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
            for name in names
        ]
        return cls(compiled, names, processors)


def _pysqlite(conn: Connection) -> sqlite3.Connection | None:
    """The stdlib sqlite3 connection under `conn` (same transaction), else None."""
    dialect = conn.dialect
    if dialect.name != "sqlite" or dialect.driver != "pysqlite" or not dialect.positional:
        return None
    driver = conn.connection.driver_connection
    return driver if isinstance(driver, sqlite3.Connection) else None
