"""The shipped prompts: listed once for everyone (cacheable), got with checked arguments (-32602
for an unknown prompt, a missing, unknown or non-string argument), scoped like the read-only
tools, and carrying the caller's own notes only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text, update

from notes_server.store.models import notes_table

Call = Callable[..., dict[str, Any]]
Grant = Callable[..., str]

NOTES = "file:///home/alice/notes"
BOBS = "file:///home/bob/notes"
WORKSPACE_ARG = {
    "name": "workspaceUri",
    "description": "The workspace (its file: URI), as the tools take it",
    "required": True,
}


def make_note(call_tool: Call, title: str, path: str, body: str = "", **kw: Any) -> dict[str, Any]:
    ws = kw.pop("ws", NOTES)
    arguments = {"workspaceUri": ws, "title": title, "path": path, "body": body}
    reply = call_tool("notes_create", arguments, **kw)
    note: dict[str, Any] = reply["result"]["structuredContent"]["note"]
    return note


def get(call: Call, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> Any:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return call("prompts/get", params, **kw)


def result_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def test_prompts_list_describes_the_three_notes_prompts(call: Call) -> None:
    result = result_of(call("prompts/list"))

    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "public"
    assert type(result["ttlMs"]) is int
    assert "nextCursor" not in result
    assert [p["name"] for p in result["prompts"]] == [
        "notes_weekly_review",
        "notes_summarize",
        "notes_related",
    ]
    review = result["prompts"][0]
    assert review["title"] == "Weekly review"
    assert review["arguments"] == [
        WORKSPACE_ARG,
        {
            "name": "since",
            "description": "Start date, YYYY-MM-DD (default: 7 days ago)",
            "required": False,
        },
    ]
    assert result["prompts"][1]["arguments"][1] == {
        "name": "path",
        "description": "The note's path in the workspace",
        "required": True,
    }


def test_a_cursor_on_prompts_list_is_invalid(call: Call) -> None:
    assert call("prompts/list", {"cursor": "x"})["error"] == {
        "code": -32602,
        "message": "Invalid cursor",
    }


def test_summarize_embeds_the_note_as_a_resource_then_asks(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = make_note(call_tool, "Q3 plan", "projects/q3.md", "# Q3\n- ship it\n")

    result = result_of(
        get(call, "notes_summarize", {"workspaceUri": NOTES, "path": "projects/q3.md"})
    )

    assert result == {
        "resultType": "complete",
        "description": "Summary of Q3 plan",
        "messages": [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {
                        "uri": note["uri"],
                        "mimeType": "text/markdown",
                        "text": "# Q3\n- ship it\n",
                    },
                },
            },
            {
                "role": "user",
                "content": {
                    "type": "text",
                    "text": "Summarize the note above, \u201cQ3 plan\u201d (projects/q3.md): its "
                    "main points, decisions and open items, in a few bullet points.",
                },
            },
        ],
        "_meta": result["_meta"],
    }


def test_weekly_review_lists_live_notes_updated_since_the_date(
    call: Call, call_tool: Call, grant: Grant, migrated_engine: Engine
) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Fresh", "fresh.md")
    stale = make_note(call_tool, "Stale", "stale.md")
    gone = make_note(call_tool, "Archived", "gone.md")
    long_ago = datetime.now(UTC) - timedelta(days=30)
    with migrated_engine.begin() as conn:
        conn.execute(
            update(notes_table).where(notes_table.c.id == stale["id"]).values(updated_at=long_ago)
        )
        conn.execute(text("UPDATE notes SET archived = TRUE WHERE id = :id"), {"id": gone["id"]})

    result = result_of(get(call, "notes_weekly_review", {"workspaceUri": NOTES}))

    [message] = result["messages"]
    said = message["content"]["text"]
    assert message["role"] == "user"
    assert said.startswith(f"Weekly review of the notes workspace {NOTES} since ")
    assert "- Fresh (fresh.md, updated " in said
    assert "Stale" not in said and "Archived" not in said


def test_weekly_review_since_an_explicit_date(call: Call, call_tool: Call, grant: Grant) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Fresh", "fresh.md")

    past = result_of(
        get(call, "notes_weekly_review", {"workspaceUri": NOTES, "since": "2000-01-03"})
    )
    future = result_of(
        get(call, "notes_weekly_review", {"workspaceUri": NOTES, "since": "2999-01-01"})
    )

    assert past["description"] == "Weekly review since 2000-01-03"
    assert "- Fresh (fresh.md" in past["messages"][0]["content"]["text"]
    assert "(no notes changed)" in future["messages"][0]["content"]["text"]


def test_related_finds_other_notes_matching_the_title(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    focus = make_note(call_tool, "Kafka migration", "kafka.md", "move the queues")
    other = make_note(call_tool, "Kafka consumers", "consumers.md", "kafka migration notes")
    make_note(call_tool, "Lunch", "lunch.md", "sandwiches")

    result = result_of(
        get(call, "notes_related", {"workspaceUri": NOTES, "title": "kafka MIGRATION"})
    )

    embedded, ask = result["messages"]
    assert embedded["content"]["resource"]["uri"] == focus["uri"]
    said = ask["content"]["text"]
    assert f"- Kafka consumers (consumers.md, {other['uri']}): " in said
    assert "Lunch" not in said
    assert f"(kafka.md, {focus['uri']})" not in said


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("nope", {}, "Unknown prompt: nope"),
        (
            "notes_summarize",
            {"workspaceUri": NOTES},
            "Invalid arguments for prompt notes_summarize: missing required argument path",
        ),
        (
            "notes_summarize",
            {"workspaceUri": NOTES, "path": "a.md", "extra": "x"},
            "Invalid arguments for prompt notes_summarize: unknown argument 'extra'",
        ),
        (
            "notes_summarize",
            {"workspaceUri": NOTES, "path": 3},
            "Invalid arguments for prompt notes_summarize: path must be a string of at most "
            "4096 characters",
        ),
        (
            "notes_summarize",
            {"workspaceUri": NOTES, "path": "nothing-here.md"},
            "Invalid arguments for prompt notes_summarize: no live note at this path in the "
            "workspace",
        ),
        (
            "notes_summarize",
            {"workspaceUri": NOTES, "path": "../escape.md"},
            None,
        ),
        (
            "notes_related",
            {"workspaceUri": NOTES, "title": "no such title"},
            "Invalid arguments for prompt notes_related: no live note with this title in the "
            "workspace",
        ),
        (
            "notes_weekly_review",
            {"workspaceUri": NOTES, "since": "last week"},
            "Invalid arguments for prompt notes_weekly_review: since must be a date (YYYY-MM-DD)",
        ),
    ],
)
def test_bad_prompt_requests_are_invalid_params(
    call: Call, grant: Grant, name: str, arguments: dict[str, Any], message: str | None
) -> None:
    grant("alice", NOTES)

    error = get(call, name, arguments)["error"]

    assert error["code"] == -32602
    if message is not None:
        assert error["message"] == message
    else:
        assert error["message"].startswith("Invalid arguments for prompt notes_summarize: path ")


def test_arguments_must_be_an_object(call: Call) -> None:
    error = call("prompts/get", {"name": "notes_summarize", "arguments": ["x"]})["error"]

    assert error == {"code": -32602, "message": "Invalid params: arguments must be an object"}


def test_another_principals_workspace_looks_like_any_unavailable_one(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("bob", BOBS)
    make_note(call_tool, "Secret", "secret.md", "bob's", ws=BOBS, principal="bob")

    for workspace, path in ((BOBS, "secret.md"), ("file:///nowhere", "secret.md")):
        error = get(call, "notes_summarize", {"workspaceUri": workspace, "path": path})["error"]
        # The refusal names only alice's own usable workspaces, the same for both.
        assert error == {
            "code": -32602,
            "message": "Workspace is not available to this principal; workspaces it can use: "
            + NOTES,
            "data": {"usableWorkspaces": [NOTES]},
        }
