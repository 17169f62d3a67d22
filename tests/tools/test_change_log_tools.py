"""Each tool's mutation appends exactly its change-log rows, of the right kind, through the
server (the triggers see every write path): create, update, rename with a link rewrite, move,
archive and restore (confirmed), delete (confirmed), revert. Both implementations, both
backends."""

from __future__ import annotations

from typing import Any

from notes_server.store import changes
from notes_server.store.engine import read_tx
from tests.tools.confirm_support import ARCHIVE, DELETE, OTHER_WS, WS, Flow, accept


def position(flow: Flow) -> int:
    with read_tx(flow.engine) as conn:
        return changes.latest(conn)


def logged(flow: Flow, after: int) -> list[tuple[str, str]]:
    with read_tx(flow.engine) as conn:
        return [(c.note_id, c.kind) for c in changes.since(conn, after)]


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    assert reply["result"].get("isError") is False, reply
    structured: dict[str, Any] = reply["result"]["structuredContent"]
    return structured


def test_create_and_update_log_one_row_each(flow: Flow) -> None:
    start = position(flow)
    created = ok(flow.call_tool("notes_create", {"workspaceUri": WS, "title": "Plan"}))
    note_id = created["note"]["id"]
    middle = position(flow)
    ok(flow.call_tool("notes_update", {"workspaceUri": WS, "noteId": note_id, "body": "v2"}))

    assert logged(flow, start)[:1] == [(note_id, "created")]
    assert logged(flow, middle) == [(note_id, "updated")]


def test_a_rename_logs_the_note_and_each_rewritten_linking_note(flow: Flow) -> None:
    target = flow.seed("Plan", "plan.md")
    linker = flow.seed("Index", "index.md", body="See [[Plan]].")
    start = position(flow)

    result = ok(
        flow.call_tool(
            "notes_update", {"workspaceUri": WS, "noteId": target.id, "title": "Roadmap"}
        )
    )

    assert [n["id"] for n in result["rewritten"]] == [linker.id]
    assert logged(flow, start) == [(target.id, "updated"), (linker.id, "updated")]


def test_a_move_between_workspaces_logs_moved(flow: Flow) -> None:
    note = flow.seed("Plan", "plan.md")
    start = position(flow)

    ok(
        flow.call_tool(
            "notes_move", {"workspaceUri": WS, "noteId": note.id, "targetWorkspaceUri": OTHER_WS}
        )
    )

    with read_tx(flow.engine) as conn:
        (change,) = changes.since(conn, start)
    assert (change.kind, change.workspace, change.previous_workspace) == ("moved", OTHER_WS, WS)


def test_archive_restore_and_delete_log_their_kinds(flow: Flow) -> None:
    note = flow.seed("Plan", "plan.md")
    start = position(flow)

    state, _ = flow.ask(ARCHIVE, "Plan")
    assert "error" not in flow.answer(ARCHIVE, "Plan", state, accept(note.id))
    ok(flow.call_tool("notes_restore", {"workspaceUri": WS, "noteId": note.id}))
    state, _ = flow.ask(DELETE, "Plan")
    assert "error" not in flow.answer(DELETE, "Plan", state, accept(note.id))

    assert logged(flow, start) == [
        (note.id, "archived"),
        (note.id, "restored"),
        (note.id, "deleted"),
    ]


def test_a_revert_logs_updated(flow: Flow) -> None:
    note = flow.seed("Plan", "plan.md", body="v1")
    ok(flow.call_tool("notes_update", {"workspaceUri": WS, "noteId": note.id, "body": "v2"}))
    start = position(flow)

    ok(flow.call_tool("notes_revert", {"workspaceUri": WS, "noteId": note.id, "version": 1}))

    assert logged(flow, start) == [(note.id, "updated")]
