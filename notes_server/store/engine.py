"""Engine construction: SQLite pragmas and explicit BEGIN / BEGIN IMMEDIATE transactions.

pysqlite's implicit transaction handling is switched off so that SQLAlchemy's "begin" event can
emit the BEGIN itself: write transactions take the write lock up front (BEGIN IMMEDIATE) instead of
upgrading a deferred read lock later, which fails with "database is locked" under contention.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event

BUSY_TIMEOUT_MS = 30_000
_WRITE = "notes_server_write"


def make_engine(url: str) -> Engine:
    """Create an engine; for SQLite, install the pragma and BEGIN hooks."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    path = _sqlite_file(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _on_begin)
    return engine


def _sqlite_file(url: str) -> Path | None:
    rest = url.split("///", 1)[1] if "///" in url else ""
    rest = rest.split("?", 1)[0]
    return Path(rest) if rest and rest != ":memory:" else None


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
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


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def pysqlite(conn: Connection) -> sqlite3.Connection | None:
    """The stdlib sqlite3 connection under `conn` (same transaction), else None.

    For the few single-row reads that run on every tool call (grant lookup, note by id):
    through the DBAPI they cost a tenth of a Core execution. Callers keep a Core path for other
    databases and must convert values the way the column types would (see notes.NoteRecord).
    """
    if conn.dialect.name != "sqlite" or conn.dialect.driver != "pysqlite":
        return None
    driver = conn.connection.driver_connection
    return driver if isinstance(driver, sqlite3.Connection) else None
