"""The one classification of database faults: what a driver's error code means here.

A failure the database reports (SQLite result codes, PostgreSQL SQLSTATEs, libpq's connection
text) is either the environment an operator can act on (a `DatabaseFault` naming its cause in
client-safe words), a transient conflict worth running the transaction again for, or a bug
that stays a bare internal error. `errors` keeps the exception hierarchy and its wire codes and
knows no driver: the store package installs `database_fault` there when it loads
(`errors.classify_database_faults`), so the protocol, which never imports the store, still
names a fault's cause.
"""

from __future__ import annotations

import sqlite3

from notes_server.errors import DatabaseFault

# SQLite primary result codes (the low byte of an extended code) and what each means here.
_SQLITE_CAUSES: dict[int, str] = {
    3: "permission to the database file was denied",  # SQLITE_PERM
    5: "the database is busy",  # SQLITE_BUSY
    6: "the database is busy",  # SQLITE_LOCKED
    8: "the database is read-only",  # SQLITE_READONLY
    10: "a disk I/O error occurred",  # SQLITE_IOERR
    11: "the database file is corrupt",  # SQLITE_CORRUPT
    13: "the disk is full",  # SQLITE_FULL
    14: "the database file cannot be opened",  # SQLITE_CANTOPEN
    26: "the file is not a database",  # SQLITE_NOTADB
}

# PostgreSQL SQLSTATEs an operator can act on (psycopg's `.sqlstate`; None before a session).
_SQLSTATE_CAUSES = {
    "28P01": "the server refused the credentials",
    "28000": "the server refused the credentials",
    "3D000": "the database does not exist on the server",
    "57014": "a statement took longer than the statement timeout",
    "57P01": "the server is shutting down",
    "53300": "the server has no free connection slots",
}

# SQLSTATEs that mean "run the whole transaction again": serialization failure, deadlock.
TRANSIENT_SQLSTATES = frozenset({"40001", "40P01"})

# libpq reports a refused connection as text only (no SQLSTATE): the server's FATAL line. Only
# the category is shown; the text itself names the user, which may be a secret.
_CONNECT_CAUSES = (
    ("password authentication failed", "the server refused the credentials"),
    ("authentication failed", "the server refused the credentials"),
    ("role ", "the server refused the credentials"),
    ("database ", "the database does not exist on the server"),
)


def database_fault(exc: BaseException) -> DatabaseFault | None:
    """Classify a driver failure (raw sqlite3, or wrapped by SQLAlchemy as `.orig`) into a
    DatabaseFault, or None when it is not one (a bug such as a constraint violation stays a
    plain internal error). The one place that knows what a database error code means."""
    if isinstance(exc, DatabaseFault):
        return exc
    orig = getattr(exc, "orig", None)
    driver_error = orig if isinstance(orig, BaseException) else exc
    if isinstance(driver_error, sqlite3.Error):
        code = getattr(driver_error, "sqlite_errorcode", None)
        cause = None if code is None else _SQLITE_CAUSES.get(code & 0xFF)
        return None if cause is None else DatabaseFault(cause, driver_words(exc))
    # Another driver: SQLAlchemy files connection and server failures under OperationalError.
    if orig is not None and type(exc).__name__ == "OperationalError":
        return DatabaseFault(_server_cause(orig), driver_words(exc))
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether a failed transaction should simply run again: a serialization failure or a
    deadlock the server broke (PostgreSQL SQLSTATE 40001/40P01)."""
    orig = getattr(exc, "orig", exc)
    return getattr(orig, "sqlstate", None) in TRANSIENT_SQLSTATES


def driver_words(exc: BaseException) -> str:
    """The driver's own words for a log line, without SQLAlchemy's statement and parameters."""
    orig = getattr(exc, "orig", None)
    return str(orig if isinstance(orig, BaseException) else exc)[:200]


def unusable_url_cause(exc: BaseException) -> str | None:
    """Why SQLAlchemy refused a database URL before connecting (a malformed URL or an unknown
    dialect), in words for the operator; None when `exc` is not such a refusal."""
    from sqlalchemy.exc import ArgumentError

    if isinstance(exc, ArgumentError):
        return f"not a usable database URL ({exc})"
    return None


def _server_cause(orig: object) -> str:
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate is not None:
        return _SQLSTATE_CAUSES.get(str(sqlstate), "the database is unavailable")
    text = str(orig)
    fatal = text.partition("FATAL:")[2]
    for needle, cause in _CONNECT_CAUSES:
        if needle in fatal and ("exist" in fatal or "authentication" in needle):
            return cause
    return "the database server cannot be reached"
