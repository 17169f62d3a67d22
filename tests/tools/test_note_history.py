"""Note history across the tools: every change keeps the version it replaces (who, which tool,
the content), notes_history lists them newest first, notes_read reads one, notes_revert brings
one back; a confirmed delete removes the history with the note, archive keeps it; prune."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine, func, select

from notes_server.cli.main import main
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.store import notes
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import front_matter_table, revisions_table
from notes_server.tools.schema import validate
from notes_server.tools.services import Services
from tests.tools.confirm_support import ARCHIVE, DELETE, Flow, accept

Call = Callable[..., dict[str, Any]]
WS = "file:///home/alice/notes"
WORK = "file:///home/alice/work"


class SteppingClock:
    """Each reading one minute after the last; `jump` moves it (for prune)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


@pytest.fixture
def services(settings: Settings, migrated_engine: Engine, clock: SteppingClock) -> Services:
    return Services(settings, engine=migrated_engine, clock=clock)


@pytest.fixture
def ws(grant: Callable[..., str]) -> str:
    grant("alice", WORK)
    return grant("alice", WS)


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    assert reply["result"]["isError"] is False, reply
    structured: dict[str, Any] = reply["result"]["structuredContent"]
    return structured


def failed(reply: dict[str, Any]) -> str:
    assert "error" not in reply, reply
    assert reply["result"]["isError"] is True, reply
    text: str = reply["result"]["content"][0]["text"]
    return text


def make(call_tool: Call, body: str = "one\ntwo\n") -> dict[str, Any]:
    args = {"workspaceUri": WS, "title": "Plan", "body": body}
    note: dict[str, Any] = ok(call_tool("notes_create", args))["note"]
    return note


def history(call_tool: Call, note_id: str, ws: str = WS, **extra: Any) -> dict[str, Any]:
    return ok(call_tool("notes_history", {"workspaceUri": ws, "noteId": note_id, **extra}))


def versions(call_tool: Call, note_id: str, ws: str = WS) -> list[tuple[Any, ...]]:
    return [
        (v["version"], v["tool"], v["title"], v["linesAdded"], v["linesRemoved"], v["current"])
        for v in history(call_tool, note_id, ws)["versions"]
    ]


def read_version(call_tool: Call, note_id: str, version: int, ws: str = WS) -> dict[str, Any]:
    args = {"workspaceUri": ws, "noteId": note_id, "version": version}
    return ok(call_tool("notes_read", args))


def front_matter_rows(engine: Engine, note_id: str) -> int:
    with read_tx(engine) as conn:
        query = select(func.count()).where(front_matter_table.c.note_id == note_id)
        return int(conn.execute(query).scalar_one())


def revision_rows(engine: Engine, note_id: str) -> int:
    with read_tx(engine) as conn:
        query = select(func.count()).where(revisions_table.c.note_id == note_id)
        return int(conn.execute(query).scalar_one())


def test_a_new_note_has_one_version_made_by_its_creator(
    call_tool: Call, ws: str, server: McpServer
) -> None:
    note = make(call_tool)

    listed = history(call_tool, note["id"])

    assert listed == {
        "noteId": note["id"],
        "versions": [
            {
                "version": 1,
                "time": "2026-08-01T12:01:00Z",
                "principal": "alice",
                "tool": "notes_create",
                "title": "Plan",
                "path": "plan.md",
                "size": 8,
                "linesAdded": 2,
                "linesRemoved": 0,
                "current": True,
            }
        ],
    }
    tool = server.registry.get("notes_history")
    assert tool is not None and tool.output_schema is not None
    assert validate(listed, tool.output_schema) is None


def test_every_tool_that_changes_a_note_keeps_the_version_it_replaces(
    call_tool: Call, ws: str, flow_free_archive: Callable[[str], None]
) -> None:
    note = make(call_tool)
    nid = note["id"]
    base = {"workspaceUri": WS, "noteId": nid}
    ok(call_tool("notes_update", {**base, "body": "one\n2\nthree\n"}))
    ok(call_tool("notes_edit", {**base, "edits": [{"oldText": "three", "newText": "3"}]}))
    ok(call_tool("notes_update", {**base, "title": "Plan B"}))
    ok(call_tool("notes_move", {**base, "targetWorkspaceUri": WORK, "path": "b.md"}))
    moved = {"workspaceUri": WORK, "noteId": nid}
    flow_free_archive(nid)
    ok(call_tool("notes_restore", moved))
    ok(call_tool("notes_revert", {**moved, "version": 1}))

    assert versions(call_tool, nid, WORK) == [
        (8, "notes_revert", "Plan", 1, 2, True),
        (7, "notes_restore", "Plan B", 0, 0, False),
        (6, "notes_archive", "Plan B", 0, 0, False),
        (5, "notes_move", "Plan B", 0, 0, False),
        (4, "notes_update", "Plan B", 0, 0, False),
        (3, "notes_edit", "Plan", 1, 1, False),
        (2, "notes_update", "Plan", 2, 1, False),
        (1, "notes_create", "Plan", 2, 0, False),
    ]
    assert read_version(call_tool, nid, 2, WORK)["note"]["body"] == "one\n2\nthree\n"
    assert read_version(call_tool, nid, 4, WORK)["note"]["path"] == "plan.md"
    assert read_version(call_tool, nid, 5, WORK)["note"]["path"] == "b.md"
    assert read_version(call_tool, nid, 6, WORK)["note"]["archived"] is True


@pytest.fixture
def flow_free_archive(migrated_engine: Engine) -> Callable[[str], None]:
    """Archive a note as the confirmed notes_archive does, without its two rounds (they are
    tested in test_delete_flow): the same store call with the same author."""
    from notes_server.store import notes
    from notes_server.store.engine import write_tx

    def archive(note_id: str) -> None:
        with write_tx(migrated_engine) as conn:
            note = notes.get_note(conn, WORK, note_id)
            assert note is not None
            moment = datetime(2026, 8, 2, tzinfo=UTC)
            author = notes.Author("alice", "notes_archive")
            assert notes.update_fields(
                conn, note, now=moment, author=author, archived=True, archived_at=moment
            )

    return archive


def test_reading_a_past_version_shows_its_content_and_the_current_version(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)
    ok(
        call_tool(
            "notes_update", {"workspaceUri": WS, "noteId": note["id"], "body": "# New\nbody\n"}
        )
    )

    past = read_version(call_tool, note["id"], 1)
    current = read_version(call_tool, note["id"], 2)

    assert (past["note"]["body"], past["note"]["version"], past["currentVersion"]) == (
        "one\ntwo\n",
        1,
        2,
    )
    assert past["outline"] == []
    assert "currentVersion" not in current
    assert [h["text"] for h in current["outline"]] == ["New"]


def test_reading_a_version_that_does_not_exist_lists_the_kept_ones(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)
    ok(call_tool("notes_update", {"workspaceUri": WS, "noteId": note["id"], "body": "x"}))

    text = failed(call_tool("notes_read", {"workspaceUri": WS, "noteId": note["id"], "version": 9}))

    assert text == (
        f"Note {note['id']!r} has no version 9. Versions kept: 2, 1 (notes_history lists them)."
    )


def test_history_pages_newest_first_with_a_cursor(call_tool: Call, ws: str) -> None:
    note = make(call_tool)
    for i in range(6):
        ok(call_tool("notes_update", {"workspaceUri": WS, "noteId": note["id"], "body": f"{i}"}))

    pages, cursor = [], None
    while True:
        extra = {"limit": 3} if cursor is None else {"limit": 3, "cursor": cursor}
        page = history(call_tool, note["id"], **extra)
        pages.append([v["version"] for v in page["versions"]])
        cursor = page.get("nextCursor")
        if cursor is None:
            break

    assert pages == [[7, 6, 5], [4, 3, 2], [1]]


def test_a_cursor_that_was_not_returned_is_invalid_params(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    reply = call_tool("notes_history", {"workspaceUri": WS, "noteId": note["id"], "cursor": "x"})

    assert reply["error"]["code"] == -32602
    assert "arguments.cursor" in reply["error"]["message"]


def test_history_is_private_to_the_workspace_grant(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    reply = call_tool("notes_history", {"workspaceUri": WS, "noteId": note["id"]}, principal="eve")

    assert reply["error"]["code"] == -32602


def test_revert_makes_a_past_version_current_and_can_itself_be_reverted(
    call_tool: Call, ws: str, migrated_engine: Engine
) -> None:
    note = make(call_tool)
    base = {"workspaceUri": WS, "noteId": note["id"]}
    ok(call_tool("notes_update", {**base, "title": "Ruined", "body": ""}))

    reverted = ok(call_tool("notes_revert", {**base, "version": 1, "expectedVersion": 2}))
    assert reverted["revertedTo"] == 1
    assert (reverted["note"]["title"], reverted["note"]["body"]) == ("Plan", "one\ntwo\n")
    assert reverted["note"]["version"] == 3

    again = ok(call_tool("notes_revert", {**base, "version": 2}))
    assert (again["note"]["title"], again["note"]["body"], again["note"]["version"]) == (
        "Ruined",
        "",
        4,
    )
    from notes_server.store import audit

    with read_tx(migrated_engine) as conn:
        entries = audit.recent(conn, workspace=WS)
    assert [(e.tool, e.outcome, e.note_id, e.principal) for e in entries] == [
        ("notes_revert", "reverted to 2", note["id"], "alice"),
        ("notes_revert", "reverted to 1", note["id"], "alice"),
    ]


def test_revert_refuses_a_stale_expected_version_and_the_current_version(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)
    base = {"workspaceUri": WS, "noteId": note["id"]}
    ok(call_tool("notes_update", {**base, "body": "x"}))

    stale = failed(call_tool("notes_revert", {**base, "version": 1, "expectedVersion": 1}))
    current = failed(call_tool("notes_revert", {**base, "version": 2}))

    assert stale.startswith(f"Version conflict: note {note['id']!r} is at version 2, not 1.")
    assert current.startswith("Version 2 is not a past version of note")
    assert versions(call_tool, note["id"])[0][0] == 2


def test_revert_needs_write_access(call_tool: Call, ws: str, grant: Callable[..., str]) -> None:
    note = make(call_tool)
    ok(call_tool("notes_update", {"workspaceUri": WS, "noteId": note["id"], "body": "x"}))
    grant("bob", WS, "read")

    reply = call_tool(
        "notes_revert", {"workspaceUri": WS, "noteId": note["id"], "version": 1}, principal="bob"
    )
    listed = call_tool("notes_history", {"workspaceUri": WS, "noteId": note["id"]}, principal="bob")

    assert reply["error"]["code"] == -32602
    assert [v["version"] for v in ok(listed)["versions"]] == [2, 1]


def test_an_edit_that_changes_nothing_keeps_no_version(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    result = ok(
        call_tool(
            "notes_edit",
            {
                "workspaceUri": WS,
                "noteId": note["id"],
                "edits": [{"oldText": "one", "newText": "one"}],
            },
        )
    )

    assert (result["note"]["version"], result["diff"]) == (1, "")
    assert [v[0] for v in versions(call_tool, note["id"])] == [1]


def test_prune_removes_versions_replaced_before_the_cutoff_and_keeps_the_current(
    call_tool: Call, ws: str, clock: SteppingClock, settings: Settings, migrated_engine: Engine
) -> None:
    note = make(call_tool)
    other = ok(call_tool("notes_create", {"workspaceUri": WORK, "title": "Other", "body": "a"}))[
        "note"
    ]
    base = {"workspaceUri": WS, "noteId": note["id"]}
    clock.now = datetime.now(UTC) - timedelta(days=100)
    ok(call_tool("notes_update", {**base, "body": "old edit"}))
    ok(call_tool("notes_update", {"workspaceUri": WORK, "noteId": other["id"], "body": "b"}))
    clock.now = datetime.now(UTC) - timedelta(days=1)
    ok(call_tool("notes_update", {**base, "body": "recent edit"}))

    runner = CliRunner()
    dry = runner.invoke(
        main,
        [
            "history",
            "prune",
            "--older-than",
            "30",
            "--workspace",
            WS,
            "--dry-run",
            "--db",
            settings.db_url,
        ],
    )
    run = runner.invoke(
        main, ["history", "prune", "--older-than", "30", "--workspace", WS, "--db", settings.db_url]
    )

    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("would remove 1 past version(s) of 1 note(s) replaced before ")
    assert run.exit_code == 0, run.output
    assert run.output.startswith("removed 1 past version(s) of 1 note(s) replaced before ")
    assert run.output.rstrip().endswith(f"in {WS}")
    assert [v[0] for v in versions(call_tool, note["id"])] == [3, 2]
    assert revision_rows(migrated_engine, other["id"]) == 1  # another workspace: kept

    everything = runner.invoke(
        main, ["history", "prune", "--older-than", "0", "--db", settings.db_url]
    )
    assert everything.output.startswith("removed 2 past version(s) of 2 note(s)")
    assert [v[0] for v in versions(call_tool, note["id"])] == [3]


def test_prune_refuses_a_malformed_workspace(settings: Settings, migrated_engine: Engine) -> None:
    run = CliRunner().invoke(
        main,
        [
            "history",
            "prune",
            "--older-than",
            "1",
            "--workspace",
            "not a uri",
            "--db",
            settings.db_url,
        ],
    )

    assert run.exit_code == 2
    assert "--workspace" in run.output


# --- the confirmed tools (two rounds, through the Flow harness) ----------------------------


def test_a_confirmed_delete_removes_the_note_with_its_history(flow: Flow) -> None:
    note = flow.seed("TPS report", "tps.md", body="v1")
    _update(flow, note.id, "v2")
    assert revision_rows(flow.engine, note.id) == 1

    state, _ = flow.ask(DELETE, "TPS report")
    reply = flow.answer(DELETE, "TPS report", state, accept(note.id))

    assert reply["result"]["structuredContent"]["outcome"] == "deleted"
    assert revision_rows(flow.engine, note.id) == 0


def test_a_confirmed_delete_removes_the_kept_front_matter_too(flow: Flow) -> None:
    note = flow.seed("TPS report", "tps.md", body="v1")
    with write_tx(flow.engine) as conn:
        notes.set_front_matter(conn, note.id, "owner: alice\n")
    assert front_matter_rows(flow.engine, note.id) == 1

    state, _ = flow.ask(DELETE, "TPS report")
    reply = flow.answer(DELETE, "TPS report", state, accept(note.id))

    assert reply["result"]["structuredContent"]["outcome"] == "deleted"
    assert front_matter_rows(flow.engine, note.id) == 0


def test_a_confirmed_archive_keeps_the_history_and_is_itself_a_version(flow: Flow) -> None:
    note = flow.seed("TPS report", "tps.md", body="v1")
    _update(flow, note.id, "v2")

    state, _ = flow.ask(ARCHIVE, "TPS report")
    reply = flow.answer(ARCHIVE, "TPS report", state, accept(note.id))

    assert reply["result"]["structuredContent"]["outcome"] == "archived"
    with read_tx(flow.engine) as conn:
        query = select(revisions_table).order_by(revisions_table.c.version)
        rows = [dict(row._mapping) for row in conn.execute(query)]
    assert [(r["version"], r["body"], r["tool"]) for r in rows] == [
        (1, "v1", None),
        (2, "v2", "notes_update"),
    ]
    listed = flow.call_tool(
        "notes_history", {"workspaceUri": "file:///home/alice/notes", "noteId": note.id}
    )
    top = listed["result"]["structuredContent"]["versions"][0]
    assert (top["version"], top["tool"], top["principal"]) == (3, "notes_archive", "alice")


def _update(flow: Flow, note_id: str, body: str) -> None:
    reply = flow.call_tool(
        "notes_update",
        {"workspaceUri": "file:///home/alice/notes", "noteId": note_id, "body": body},
    )
    assert reply["result"]["isError"] is False, reply
