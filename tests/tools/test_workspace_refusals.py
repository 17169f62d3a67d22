"""A workspace the caller cannot use is refused with one message whatever the reason (not
granted, not existing, malformed, another principal's), and the refusal says what to do: it
names the caller's own usable workspaces (for a write, those it may write to), nothing of
anyone else's. One trailing slash names the same workspace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from notes_server.errors import WORKSPACE_DENIED
from tests.helpers import workspace_refusal

Call = Callable[..., dict[str, Any]]
NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
ARCHIVE = "file:///home/alice/archive"
BOBS = "file:///home/bob/notes"


@pytest.fixture
def granted(grant: Callable[..., str]) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    grant("alice", ARCHIVE, "read")
    grant("bob", BOBS)


def error_for(call_tool: Call, name: str, workspace: object, **extra: Any) -> dict[str, Any]:
    reply = call_tool(name, {"workspaceUri": workspace, **extra})
    assert "result" not in reply, reply
    error: dict[str, Any] = reply["error"]
    assert workspace_refusal(error), error
    return error


@pytest.mark.usefixtures("granted")
@pytest.mark.parametrize(
    "workspace",
    [BOBS, "file:///nowhere", "file:///home/alice", f"{NOTES}/sub", "file:///a//", "file:///a b"],
    ids=["another-principals", "missing", "parent", "child", "empty-segment", "malformed"],
)
def test_every_refusal_of_a_read_is_the_same_and_lists_the_callers_workspaces(
    call_tool: Call, workspace: object
) -> None:
    error = error_for(call_tool, "notes_search", workspace)

    assert error == {
        "code": -32602,
        "message": f"{WORKSPACE_DENIED}; workspaces it can use: {ARCHIVE}, {NOTES}, {WORK}",
        "data": {"usableWorkspaces": [ARCHIVE, NOTES, WORK]},
    }


@pytest.mark.usefixtures("granted")
@pytest.mark.parametrize("workspace", [ARCHIVE, BOBS, "file:///nowhere"])
def test_a_refused_write_lists_only_the_workspaces_the_caller_may_write_to(
    call_tool: Call, workspace: str
) -> None:
    error = error_for(call_tool, "notes_create", workspace, title="t")

    assert error == {
        "code": -32602,
        "message": f"{WORKSPACE_DENIED}; workspaces it can write to: {NOTES}, {WORK}",
        "data": {"usableWorkspaces": [NOTES, WORK]},
    }


def test_a_principal_without_grants_is_told_how_to_get_one(
    call_tool: Call, grant: Callable[..., str]
) -> None:
    grant("bob", BOBS)

    error = error_for(call_tool, "notes_search", BOBS)

    assert error["data"] == {"usableWorkspaces": []}
    assert error["message"] == (
        f"{WORKSPACE_DENIED}; it has no workspace (an operator grants one with "
        "`notes-server workspace grant`)"
    )
    assert "bob" not in error["message"]


def test_a_long_list_is_bounded(call_tool: Call, grant: Callable[..., str]) -> None:
    for i in range(25):
        grant("alice", f"file:///home/alice/w{i:02d}")

    error = error_for(call_tool, "notes_search", "file:///nowhere")

    assert len(error["data"]["usableWorkspaces"]) == 20
    assert error["message"].endswith(" and 5 more")


@pytest.mark.usefixtures("granted")
def test_one_trailing_slash_names_the_same_workspace(call_tool: Call) -> None:
    made = call_tool("notes_create", {"workspaceUri": NOTES + "/", "title": "Slash"})
    note = made["result"]["structuredContent"]["note"]
    read = call_tool("notes_read", {"workspaceUri": NOTES + "/", "noteId": note["id"]})
    found = call_tool("notes_search", {"workspaceUri": NOTES + "/", "query": "Slash"})

    assert note["uri"].startswith(NOTES + "/") and "//" not in note["uri"][8:]
    assert read["result"]["structuredContent"]["note"]["id"] == note["id"]
    assert [hit["id"] for hit in found["result"]["structuredContent"]["notes"]] == [note["id"]]
