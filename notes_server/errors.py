"""One exception hierarchy that carries JSON-RPC wire codes.

Every failure that may reach a client is a ``McpError``; ``to_wire`` is the single place that
turns an exception into a JSON-RPC error object. Anything else becomes -32603 with no internals.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022

# Fixed messages: they must never reveal why access was refused or what exists.
WORKSPACE_DENIED = "Workspace is not available to this principal"
# At most this many of the caller's own workspaces are named in a refusal.
MAX_LISTED_WORKSPACES = 20
STATE_REJECTED = "Invalid or expired requestState"


class NotesServerError(Exception):
    """Root of everything the server raises on purpose."""


class McpError(NotesServerError):
    """An error with a JSON-RPC code, a client-safe message and optional data."""

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class ParseError(McpError):
    code = PARSE_ERROR


class InvalidRequest(McpError):
    code = INVALID_REQUEST


class MethodNotFound(McpError):
    code = METHOD_NOT_FOUND


class InvalidParams(McpError):
    code = INVALID_PARAMS


MAX_URI_ECHO = 2048


def resource_not_found(uri: str) -> InvalidParams:
    """-32602 for a resource that does not exist for this principal, shared by every resource
    provider (the notes' own and the extensions'); the echoed URI is capped."""
    return InvalidParams("Resource not found", {"uri": uri[:MAX_URI_ECHO]})


class HeaderMismatch(McpError):
    code = HEADER_MISMATCH


class MissingCapability(McpError):
    code = MISSING_CAPABILITY


class UnsupportedVersion(McpError):
    code = UNSUPPORTED_VERSION


class WorkspaceDenied(InvalidParams):
    """Unauthorized, unknown or malformed workspace: one message for all three. With
    `usable` (the caller's own workspaces this tool may use, which depend only on the caller,
    never on the workspace it named), the message says what to do instead, and `data` lists
    them as `usableWorkspaces`."""

    def __init__(self, usable: Sequence[str] | None = None, *, write: bool = False) -> None:
        if usable is None:
            super().__init__(WORKSPACE_DENIED)
            return
        shown = list(usable[:MAX_LISTED_WORKSPACES])
        if not shown:
            hint = (
                "it has no workspace it can write to" if write else "it has no workspace"
            ) + " (an operator grants one with `notes-server workspace grant`)"
        else:
            more = len(usable) - len(shown)
            verb = "it can write to" if write else "it can use"
            hint = f"workspaces {verb}: " + ", ".join(shown) + (f" and {more} more" if more else "")
        super().__init__(f"{WORKSPACE_DENIED}; {hint}", {"usableWorkspaces": shown})


class StateRejected(InvalidParams):
    """requestState failed verification; the precise reason is logged, never sent."""

    def __init__(self, reason: str) -> None:
        super().__init__(STATE_REJECTED)
        self.reason = reason


class ToolFailure(NotesServerError):
    """A tool-level failure the model can act on: becomes an ``isError: true`` result."""

    def __init__(self, message: str, structured: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.structured = structured


class UriError(NotesServerError, ValueError):
    """A file URI or relative note path that the strict parser refuses."""


class StoreError(NotesServerError):
    """A storage-layer failure that is not the client's fault."""


class DatabaseFault(McpError):
    """The database cannot do what was asked (read-only, full, corrupt, busy, unreachable).

    `cause` names the class of fault in words safe for a client: never a path or a statement.
    """

    code = INTERNAL_ERROR

    def __init__(self, cause: str) -> None:
        super().__init__(f"Internal error: {cause}")
        self.cause = cause


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
        return None if cause is None else DatabaseFault(cause)
    # Another driver: SQLAlchemy files connection and server failures under OperationalError.
    if orig is not None and type(exc).__name__ == "OperationalError":
        return DatabaseFault(_server_cause(orig))
    return None


# PostgreSQL SQLSTATEs an operator can act on (psycopg's `.sqlstate`; None before a session).
_SQLSTATE_CAUSES = {
    "28P01": "the server refused the credentials",
    "28000": "the server refused the credentials",
    "3D000": "the database does not exist on the server",
    "57014": "a statement took longer than the statement timeout",
    "57P01": "the server is shutting down",
    "53300": "the server has no free connection slots",
}


# libpq reports a refused connection as text only (no SQLSTATE): the server's FATAL line. Only
# the category is shown; the text itself names the user, which may be a secret.
_CONNECT_CAUSES = (
    ("password authentication failed", "the server refused the credentials"),
    ("authentication failed", "the server refused the credentials"),
    ("role ", "the server refused the credentials"),
    ("database ", "the database does not exist on the server"),
)


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


def to_wire(exc: BaseException) -> dict[str, Any]:
    """Translate an exception into a JSON-RPC error object (the one translation point)."""
    if not isinstance(exc, McpError):
        fault = database_fault(exc)
        if fault is None:
            return {"code": INTERNAL_ERROR, "message": "Internal error"}
        exc = fault
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return error
