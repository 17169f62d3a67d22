"""Which requests a transport may answer without a worker thread (`McpServer.runs_on_loop`):
static results and a note read by id on embedded SQLite; nothing that scans, writes, or waits
on a database server."""

from __future__ import annotations

import dataclasses

import pytest

from notes_server.app import create_server
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.tools.services import Services


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("server/discover", None),
        ("tools/list", None),
        pytest.param(
            "tools/call",
            "notes_read",
            marks=pytest.mark.sqlite_only("a read is quick on a local file, not over a network"),
        ),
    ],
)
def test_static_results_and_a_note_read_are_quick(
    server: McpServer, method: str, name: str | None
) -> None:
    assert server.runs_on_loop(method, name)


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("tools/call", "notes_search"),
        ("tools/call", "notes_create"),
        ("tools/call", "notes_delete"),
        ("tools/call", "no_such_tool"),
        ("tools/call", None),
        ("resources/read", "notes_read"),
    ],
)
def test_scans_writes_and_unknown_requests_are_not_quick(
    server: McpServer, method: str, name: str | None
) -> None:
    assert not server.runs_on_loop(method, name)


def test_a_note_read_on_a_database_server_is_not_quick(settings: Settings) -> None:
    remote = dataclasses.replace(settings, db_url="postgresql://notes@db.example/notes")

    server = create_server(remote, Services(remote))

    assert not server.runs_on_loop("tools/call", "notes_read")
