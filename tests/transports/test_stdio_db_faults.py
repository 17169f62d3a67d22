"""A running stdio server whose database stops accepting writes: read-only file, full disk.

Real `serve` processes on real faults (tests/db_faults.py). Reads keep working; a write answers
-32603 with a message that names the class of fault and never the path; the process stays up
and logs one line, not a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from notes_server.security.uri import canonical_workspace
from notes_server.store import grants, migrate
from notes_server.store.engine import make_engine, write_tx
from notes_server.tools.services import utc_now
from tests.db_faults import fill, read_only, small_disk
from tests.helpers import ServerProcess

Spawn = Callable[..., ServerProcess]
NOTES = "file:///home/alice/notes"
INTERNAL_ERROR = -32603


def prepare(path: Path) -> str:
    """A migrated database at `path` where alice may write NOTES; its URL."""
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        with write_tx(engine) as conn:
            grants.upsert(conn, "alice", canonical_workspace(NOTES), "write", utc_now())
    finally:
        engine.dispose()
    return url


def search(server: ServerProcess) -> dict[str, Any]:
    reply: dict[str, Any] = server.request(
        "tools/call", {"name": "notes_search", "arguments": {"workspaceUri": NOTES}}
    )
    return reply


def create(server: ServerProcess, title: str, body: str = "") -> dict[str, Any]:
    arguments = {"workspaceUri": NOTES, "title": title, "body": body}
    reply: dict[str, Any] = server.request(
        "tools/call", {"name": "notes_create", "arguments": arguments}
    )
    return reply


def assert_fault(reply: dict[str, Any], cause: str, path: Path) -> None:
    assert reply["error"] == {"code": INTERNAL_ERROR, "message": f"Internal error: {cause}"}
    assert str(path.parent) not in str(reply)


def test_a_read_only_database_file_serves_reads_and_refuses_writes_by_name(
    tmp_path: Path, spawn_server: Spawn
) -> None:
    path = tmp_path / "notes.db"
    url = prepare(path)
    with read_only(path):
        server = spawn_server(db_url=url)
        assert search(server)["result"]["structuredContent"]["notes"] == []

        assert_fault(create(server, "Refused"), "the database is read-only", path)

        assert "result" in search(server)
        assert server.close() == 0
    assert "Traceback" not in server.stderr_text()
    assert "the database is read-only" in server.stderr_text()


def test_a_full_disk_serves_reads_and_refuses_writes_by_name(
    tmp_path: Path, spawn_server: Spawn
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        path = disk / "notes.db"
        server = spawn_server(db_url=prepare(path))
        assert "result" in create(server, "Before the disk filled up")
        fill(disk)

        assert_fault(create(server, "After", "x" * 8192), "the disk is full", path)

        notes = search(server)["result"]["structuredContent"]["notes"]
        assert [note["title"] for note in notes] == ["Before the disk filled up"]
        assert server.close() == 0
    assert "Traceback" not in server.stderr_text()
