"""Notes as MCP resources: listing is private per principal, reading is by canonical URI."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, text

Call = Callable[..., dict[str, Any]]
Grant = Callable[..., str]

NOTES = "file:///home/alice/notes"
OTHER = "file:///home/alice/other"


def make_note(call_tool: Call, title: str, path: str, body: str, ws: str = NOTES) -> dict[str, Any]:
    reply = call_tool(
        "notes_create", {"workspaceUri": ws, "title": title, "path": path, "body": body}
    )
    note: dict[str, Any] = reply["result"]["structuredContent"]["note"]
    return note


def result_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def test_resources_list_shows_the_principals_notes_privately(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("alice", OTHER)
    grant("bob", "file:///home/bob/notes")
    b = make_note(call_tool, "Bravo", "b.md", "two")
    a = make_note(call_tool, "Alpha", "dir/a.md", "one")
    o = make_note(call_tool, "Other", "o.md", "three", ws=OTHER)

    result = result_of(call("resources/list"))

    # Ordered by workspace, then path; bob's workspace never appears.
    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "private"
    assert type(result["ttlMs"]) is int
    assert "nextCursor" not in result
    assert result["resources"] == [
        {"uri": b["uri"], "name": b["id"], "title": "Bravo", "mimeType": "text/markdown"},
        {"uri": a["uri"], "name": a["id"], "title": "Alpha", "mimeType": "text/markdown"},
        {"uri": o["uri"], "name": o["id"], "title": "Other", "mimeType": "text/markdown"},
    ]


def test_resources_list_is_empty_for_a_principal_without_grants(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Mine", "m.md", "x")

    assert result_of(call("resources/list", principal="bob"))["resources"] == []


def test_resources_list_leaves_out_archived_notes(
    call: Call, call_tool: Call, grant: Grant, migrated_engine: Engine
) -> None:
    grant("alice", NOTES)
    note = make_note(call_tool, "Old", "old.md", "x")
    with migrated_engine.begin() as conn:
        conn.execute(text("UPDATE notes SET archived = TRUE WHERE id = :id"), {"id": note["id"]})

    assert result_of(call("resources/list"))["resources"] == []


@pytest.mark.parametrize("cursor", ["abc", "-1", "0", 5])
def test_resources_list_refuses_a_cursor_it_did_not_issue(call: Call, cursor: Any) -> None:
    assert call("resources/list", {"cursor": cursor})["error"]["code"] == -32602


def test_resources_read_returns_the_markdown_body(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = make_note(call_tool, "Readme", "docs/read me.md", "# Hello\n\nworld")

    result = result_of(call("resources/read", {"uri": note["uri"]}))

    assert note["uri"] == f"{NOTES}/docs/read%20me.md"
    assert result["contents"] == [
        {"uri": note["uri"], "mimeType": "text/markdown", "text": "# Hello\n\nworld"}
    ]
    assert result["cacheScope"] == "private"
    assert type(result["ttlMs"]) is int


def test_resources_read_accepts_a_non_canonical_spelling_and_answers_canonically(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Readme", "readme.md", "body")

    result = result_of(call("resources/read", {"uri": "FILE:///home/alice/notes/%72eadme.md"}))

    assert result["contents"][0]["uri"] == f"{NOTES}/readme.md"


@pytest.mark.parametrize(
    "uri",
    [
        f"{NOTES}/missing.md",
        f"{NOTES}/%2e%2e/notes/secret.md",
        f"{NOTES}/../notes/secret.md",
        f"{NOTES}/sub/..%2fsecret.md",
        "file:///home/bob/notes/bobs.md",
        "file://host/home/alice/notes/secret.md",
        "https://example.com/secret.md",
        NOTES,
        "",
    ],
)
def test_resources_read_of_an_unreachable_uri_is_resource_not_found(
    call: Call, call_tool: Call, grant: Grant, uri: str
) -> None:
    grant("alice", NOTES)
    grant("bob", "file:///home/bob/notes")
    make_note(call_tool, "Secret", "secret.md", "s")
    call_tool(
        "notes_create",
        {"workspaceUri": "file:///home/bob/notes", "title": "Bob", "path": "bobs.md"},
        principal="bob",
    )

    reply = call("resources/read", {"uri": uri})

    assert reply["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": uri}}


def test_another_principal_cannot_read_alices_note_as_a_resource(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = make_note(call_tool, "Private", "p.md", "secret")

    reply = call("resources/read", {"uri": note["uri"]}, principal="bob")

    assert reply["error"] == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": note["uri"]},
    }


def test_an_archived_note_is_not_readable_as_a_resource(
    call: Call, call_tool: Call, grant: Grant, migrated_engine: Engine
) -> None:
    grant("alice", NOTES)
    note = make_note(call_tool, "Old", "old.md", "x")
    with migrated_engine.begin() as conn:
        conn.execute(text("UPDATE notes SET archived = TRUE WHERE id = :id"), {"id": note["id"]})

    assert call("resources/read", {"uri": note["uri"]})["error"]["code"] == -32602


def test_resources_read_without_a_string_uri_is_invalid_params(call: Call) -> None:
    assert call("resources/read", {"uri": 5})["error"]["code"] == -32602


def test_resources_list_pages_through_every_note_exactly_once(
    call: Call, grant: Grant, migrated_engine: Engine
) -> None:
    from datetime import UTC, datetime

    from notes_server.store import notes
    from notes_server.store.engine import write_tx

    workspace = grant("alice", NOTES)
    with write_tx(migrated_engine) as conn:
        for i in range(150):
            notes.insert_note(
                conn,
                workspace=workspace,
                path=f"n{i:03}.md",
                title=f"N{i}",
                body="",
                now=datetime(2026, 1, 1, tzinfo=UTC),
            )
    seen: list[str] = []
    params: dict[str, Any] = {}

    while True:
        result = result_of(call("resources/list", params))
        seen += [r["uri"] for r in result["resources"]]
        if "nextCursor" not in result:
            break
        params = {"cursor": result["nextCursor"]}

    assert seen == [f"{NOTES}/n{i:03}.md" for i in range(150)]
