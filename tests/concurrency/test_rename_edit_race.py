"""A rename racing edits of the notes that link to it, across real server processes on one
database (SQLite file or, with NOTES_SERVER_TEST_DB=postgresql, one PostgreSQL database): one
process renames a note while four others edit four of its 34 linking notes. Whatever the
order, every linking note ends up naming the new title, its link resolved, and every edit lands
exactly once: a linking note edited while the rename runs is rewritten on its new version,
never left dangling."""

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

EDITORS = 4
FILLERS = 30  # linking notes the rename rewrites before it reaches the edited ones (by path)
TRIALS = 3


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    root: Path = tmp_path_factory.mktemp("rename-race")
    on_pg = pg_support.on_postgresql()
    url = pg_support.database_url(root, per_test=False) if on_pg else f"sqlite:///{root}/n.db"
    try:
        prepare_database(url)
        started = start_servers(
            url, generate_keys(), root, EDITORS + 1, store_impls=("auto", "core")
        )
        try:
            yield started
        finally:
            stop(started)
    finally:
        if on_pg:
            pg_support.drop_database(url)
    for server in started:
        assert server.alarms() == [], server.stderr_text()[-2000:]


def tool(server: Server, name: str, **arguments: Any) -> dict[str, Any]:
    reply = server.tool(name, {"workspaceUri": WORKSPACE, **arguments})
    assert reply["result"]["isError"] is False, reply
    result: dict[str, Any] = reply["result"]["structuredContent"]
    return result


def line(server: Server, name: str, **arguments: Any) -> bytes:
    params = {"name": name, "arguments": {"workspaceUri": WORKSPACE, **arguments}}
    return server.encode("tools/call", params)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_linking_notes_edited_during_a_rename_are_rewritten_and_keep_their_edits(
    servers: list[Server], trial: int
) -> None:
    first = servers[0]
    old, new = f"Target {trial}", f"Renamed {trial}"
    target = tool(first, "notes_create", title=old, path=f"t{trial}/target.md")["note"]
    for i in range(FILLERS):
        body = f"filler [[{old}]]\n"
        tool(first, "notes_create", title=f"F{trial}-{i}", path=f"t{trial}/a{i:02}.md", body=body)
    edited = [
        tool(
            first,
            "notes_create",
            title=f"E{trial}-{i}",
            path=f"t{trial}/z{i}.md",
            body=f"# Log\nsee [[{old}]]\n\n## Edits\nstart\n",
        )["note"]
        for i in range(EDITORS)
    ]
    lines = [line(first, "notes_update", noteId=target["id"], title=new)] + [
        line(
            server,
            "notes_edit",
            noteId=note["id"],
            edits=[{"section": "Log/Edits", "action": "append", "text": f"edit {i}"}],
        )
        for i, (server, note) in enumerate(zip(servers[1:], edited, strict=True))
    ]

    replies = race(servers, lines)

    for reply in replies:
        assert "error" not in reply, reply
        assert reply["result"]["isError"] is False, reply
    rewritten = replies[0]["result"]["structuredContent"]["rewritten"]
    assert len(rewritten) == FILLERS + EDITORS
    for i, note in enumerate(edited):
        body = tool(first, "notes_read", noteId=note["id"])["note"]["body"]
        assert body == f"# Log\nsee [[{new}]]\n\n## Edits\nstart\nedit {i}\n"
        links = tool(servers[i + 1], "notes_links", noteId=note["id"])
        assert [o.get("id") for o in links["outgoing"]] == [target["id"]]
    # Every linking note (the fillers too) still resolves to the renamed note.
    assert tool(first, "notes_links", noteId=target["id"])["counts"]["incoming"] == (
        FILLERS + EDITORS
    )
