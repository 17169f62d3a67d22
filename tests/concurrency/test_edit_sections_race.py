"""notes_edit across real server processes on one database (SQLite file or, with
NOTES_SERVER_TEST_DB=postgresql, one PostgreSQL database): 8 processes edit different sections
of one note at once, all from the same expectedVersion; every edit lands exactly once, in its
section, each as its own version. 8 processes editing the same section: one lands, the others
are conflict errors, nothing is lost or doubled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import pg_support
from tests.concurrency.harness import (
    WORKSPACE,
    Server,
    generate_keys,
    prepare_database,
    race,
    start_servers,
)
from tests.concurrency.harness import stop_servers as stop

PROCESSES = 8
TRIALS = 3


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    root: Path = tmp_path_factory.mktemp("edit-race")
    # One database for the module (a per-test PostgreSQL database would end with the first).
    on_pg = pg_support.on_postgresql()
    url = pg_support.database_url(root, per_test=False) if on_pg else f"sqlite:///{root}/n.db"
    try:
        prepare_database(url)
        started = start_servers(url, generate_keys(), root, PROCESSES, store_impls=("auto", "core"))
        try:
            yield started
        finally:
            stop(started)
    finally:
        if on_pg:
            pg_support.drop_database(url)
    for server in started:
        assert server.alarms() == [], server.stderr_text()[-2000:]


def sections_body() -> str:
    return "# Log\n\n" + "".join(f"## S{i}\nstart {i}\n\n" for i in range(PROCESSES))


def create(server: Server, title: str) -> dict[str, Any]:
    reply = server.tool(
        "notes_create", {"workspaceUri": WORKSPACE, "title": title, "body": sections_body()}
    )
    note: dict[str, Any] = reply["result"]["structuredContent"]["note"]
    return note


def edit_line(server: Server, note_id: str, section: str, text: str, version: int) -> bytes:
    arguments = {
        "workspaceUri": WORKSPACE,
        "noteId": note_id,
        "expectedVersion": version,
        "edits": [{"section": section, "action": "append", "text": text}],
    }
    return server.encode("tools/call", {"name": "notes_edit", "arguments": arguments})


def read(server: Server, note_id: str, **extra: Any) -> dict[str, Any]:
    reply = server.tool("notes_read", {"workspaceUri": WORKSPACE, "noteId": note_id, **extra})
    result: dict[str, Any] = reply["result"]["structuredContent"]
    return result


@pytest.mark.parametrize("trial", range(TRIALS))
def test_edits_of_different_sections_from_one_version_all_land_exactly_once(
    servers: list[Server], trial: int
) -> None:
    note = create(servers[0], f"Different sections {trial}")
    lines = [
        edit_line(server, note["id"], f"Log/S{i}", f"edit {i} of trial {trial}", 1)
        for i, server in enumerate(servers)
    ]

    replies = race(servers, lines)

    for reply in replies:
        assert "error" not in reply, reply
        assert reply["result"]["isError"] is False, reply
    assert sorted(r["result"]["structuredContent"]["note"]["version"] for r in replies) == list(
        range(2, PROCESSES + 2)
    )
    final = read(servers[0], note["id"])
    assert final["note"]["version"] == PROCESSES + 1
    body = final["note"]["body"]
    for i in range(PROCESSES):
        section = read(servers[0], note["id"], section=f"Log/S{i}")["note"]["body"]
        assert section == f"## S{i}\nstart {i}\nedit {i} of trial {trial}\n\n"
        assert body.count(f"edit {i} of trial {trial}") == 1
    history = servers[1].tool(
        "notes_history", {"workspaceUri": WORKSPACE, "noteId": note["id"], "limit": 100}
    )["result"]["structuredContent"]["versions"]
    assert [v["version"] for v in history] == list(range(PROCESSES + 1, 0, -1))
    assert sorted(v["linesAdded"] for v in history[:-1]) == [1] * PROCESSES


def test_edits_of_one_section_from_one_version_land_once_and_the_rest_conflict(
    servers: list[Server],
) -> None:
    note = create(servers[0], "Same section")
    lines = [
        edit_line(server, note["id"], "Log/S3", f"contender {i}", 1)
        for i, server in enumerate(servers)
    ]

    replies = race(servers, lines)

    for reply in replies:
        assert "error" not in reply, reply
    won = [r for r in replies if r["result"]["isError"] is False]
    lost = [r for r in replies if r["result"]["isError"] is True]
    assert len(won) == 1
    assert len(lost) == PROCESSES - 1
    for reply in lost:
        text = reply["result"]["content"][0]["text"]
        assert text.startswith("Edit conflict: section 'Log/S3' changed after version 1")
    final = read(servers[0], note["id"])
    assert final["note"]["version"] == 2
    body = final["note"]["body"]
    assert sum(body.count(f"contender {i}") for i in range(PROCESSES)) == 1
