"""Tool calls that hit a database fault: -32603 with a message naming the class of fault.

In process, on real SQLite faults: a write lock held by another connection (busy) and a file
whose pages were overwritten (corrupt). A bug (anything not a database fault) stays a bare
"Internal error".
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, event

from notes_server.app import create_app
from notes_server.config import Settings
from notes_server.errors import to_wire
from notes_server.protocol.dispatch import McpServer
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants
from notes_server.store.engine import make_engine, write_tx
from notes_server.tools.services import Services, utc_now
from tests.helpers import make_request

NOTES = "file:///home/alice/notes"
INTERNAL_ERROR = -32603


def tool(server: McpServer, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    request = make_request("tools/call", {"name": name, "arguments": arguments})
    raw = server.handle_raw(json.dumps(request).encode(), "alice")
    assert raw is not None
    reply: dict[str, Any] = json.loads(raw)
    return reply


def create(server: McpServer, title: str) -> dict[str, Any]:
    return tool(server, "notes_create", {"workspaceUri": NOTES, "title": title, "body": "b"})


def search(server: McpServer) -> dict[str, Any]:
    return tool(server, "notes_search", {"workspaceUri": NOTES})


def impatient(url: str) -> Engine:
    """The server's engine, but giving up at once on a lock instead of after 30 s."""
    engine = make_engine(url)

    def no_wait(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA busy_timeout = 0")

    event.listen(engine, "connect", no_wait)
    return engine


@pytest.fixture
def granted(migrated_engine: Engine) -> Engine:
    with write_tx(migrated_engine) as conn:
        grants.upsert(conn, "alice", canonical_workspace(NOTES), "write", utc_now())
    return migrated_engine


@pytest.fixture
def impatient_server(settings: Settings, granted: Engine) -> Iterator[McpServer]:
    engine = impatient(settings.db_url)
    yield create_app(settings, Services(settings, engine=engine))
    engine.dispose()


@pytest.mark.sqlite_only("SQLite write lock")
def test_a_write_while_another_process_holds_the_lock_is_the_database_is_busy(
    impatient_server: McpServer, settings: Settings
) -> None:
    assert settings.sqlite_path is not None
    with closing(sqlite3.connect(settings.sqlite_path, isolation_level=None)) as holder:
        holder.execute("BEGIN IMMEDIATE")

        reply = create(impatient_server, "Blocked")
        during = search(impatient_server)
        holder.execute("ROLLBACK")

    assert reply["error"] == {
        "code": INTERNAL_ERROR,
        "message": "Internal error: the database is busy",
    }
    assert "result" in during  # WAL: readers are not blocked by the writer
    assert "result" in create(impatient_server, "After the lock")


@pytest.mark.sqlite_only("a corrupt SQLite file")
def test_a_corrupt_database_file_is_named_and_its_path_is_not(
    settings: Settings, granted: Engine, tmp_path: Path
) -> None:
    setup = create_app(settings, Services(settings, engine=granted))
    for i in range(50):
        assert "result" in create(setup, f"Note {i} " + "words " * 50)
    granted.dispose()  # checkpoints the WAL into the file
    assert settings.sqlite_path is not None
    with settings.sqlite_path.open("r+b") as db:
        db.seek(4096)  # keep the header page; scramble every page after it
        size = settings.sqlite_path.stat().st_size
        db.write(bytes((i * 7 + 3) % 256 for i in range(size - 4096)))
    engine = make_engine(settings.db_url)
    try:
        reply = search(create_app(settings, Services(settings, engine=engine)))
    finally:
        engine.dispose()

    assert reply["error"]["code"] == INTERNAL_ERROR
    assert reply["error"]["message"] == "Internal error: the database file is corrupt"
    assert str(tmp_path) not in json.dumps(reply)


@pytest.mark.sqlite_only("drops the FTS5 table")
def test_an_error_that_is_not_a_database_fault_stays_a_bare_internal_error(
    settings: Settings, granted: Engine
) -> None:
    with write_tx(granted) as conn:
        conn.exec_driver_sql("DROP TABLE notes_fts")
    server = create_app(settings, Services(settings, engine=granted))

    reply = create(server, "No index")

    assert reply["error"] == {"code": INTERNAL_ERROR, "message": "Internal error"}


def test_an_operational_error_from_another_driver_without_sqlstate_is_an_unreachable_server() -> (
    None
):
    class OperationalError(Exception):
        """What a PEP 249 driver (psycopg, pymysql...) raises when its server is unreachable."""

    refused = OperationalError('connection to server at "10.0.0.5", port 5432 failed')
    wrapped = sqlalchemy.exc.OperationalError("SELECT 1", {}, refused)

    assert to_wire(wrapped) == {
        "code": INTERNAL_ERROR,
        "message": "Internal error: the database server cannot be reached",
    }


@pytest.mark.parametrize(
    ("sqlstate", "cause"),
    [
        ("57014", "a statement took longer than the statement timeout"),
        ("28P01", "the server refused the credentials"),
        ("3D000", "the database does not exist on the server"),
        ("XX000", "the database is unavailable"),
    ],
)
def test_an_operational_error_with_a_sqlstate_names_its_cause(sqlstate: str, cause: str) -> None:
    class OperationalError(Exception):
        def __init__(self) -> None:
            super().__init__("FATAL: something for user secret_user")
            self.sqlstate = sqlstate

    wrapped = sqlalchemy.exc.OperationalError("SELECT 1", {}, OperationalError())

    assert to_wire(wrapped) == {"code": INTERNAL_ERROR, "message": f"Internal error: {cause}"}
