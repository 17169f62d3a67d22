"""`completion/complete`: workspaces, note paths and titles complete from what the caller could
use (grants, roots, live notes), bounded to 100 values, for prompt arguments and the note
resource template; malformed requests are -32602 and never reveal another principal's data."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, text

from notes_server.protocol.envelope import Request
from notes_server.protocol.server import McpServer
from notes_server.security.uri import parse_workspace_uri
from tests.helpers import make_request

Call = Callable[..., dict[str, Any]]
Grant = Callable[..., str]

NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
BOBS = "file:///home/bob/notes"
TEMPLATE = "{+workspaceUri}/{+path}"


def make_note(call_tool: Call, title: str, path: str, ws: str = NOTES, **kw: Any) -> dict[str, Any]:
    reply = call_tool("notes_create", {"workspaceUri": ws, "title": title, "path": path}, **kw)
    note: dict[str, Any] = reply["result"]["structuredContent"]["note"]
    return note


def complete(
    call: Call,
    ref: dict[str, Any],
    name: str,
    value: str,
    chosen: dict[str, str] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
    if chosen is not None:
        params["context"] = {"arguments": chosen}
    return call("completion/complete", params, **kw)


def prompt(name: str) -> dict[str, str]:
    return {"type": "ref/prompt", "name": name}


NOTE_TEMPLATE = {"type": "ref/resource", "uri": TEMPLATE}


def completion_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    assert reply["result"]["resultType"] == "complete"
    completion: dict[str, Any] = reply["result"]["completion"]
    return completion


def test_workspace_arguments_complete_to_the_callers_granted_workspaces_by_prefix(
    call: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    grant("bob", BOBS)

    everything = completion_of(complete(call, prompt("notes_summarize"), "workspaceUri", ""))
    narrowed = completion_of(
        complete(call, prompt("notes_weekly_review"), "workspaceUri", "file:///home/alice/w")
    )
    foreign = completion_of(
        complete(call, prompt("notes_summarize"), "workspaceUri", "file:///home/bob")
    )

    assert everything == {"values": [NOTES, WORK], "total": 2, "hasMore": False}
    assert narrowed == {"values": [WORK], "total": 1, "hasMore": False}
    assert foreign == {"values": [], "total": 0, "hasMore": False}


def test_paths_complete_from_the_named_workspaces_live_notes_only(
    call: Call, call_tool: Call, grant: Grant, migrated_engine: Engine
) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    make_note(call_tool, "Plan", "projects/plan.md")
    make_note(call_tool, "Pricing", "projects/pricing.md")
    old = make_note(call_tool, "Old", "projects/old.md")
    make_note(call_tool, "Elsewhere", "projects/elsewhere.md", ws=WORK)
    make_note(call_tool, "Personal", "personal.md")
    with migrated_engine.begin() as conn:
        conn.execute(text("UPDATE notes SET archived = TRUE WHERE id = :id"), {"id": old["id"]})

    reply = complete(call, prompt("notes_summarize"), "path", "projects/p", {"workspaceUri": NOTES})

    assert completion_of(reply) == {
        "values": ["projects/plan.md", "projects/pricing.md"],
        "total": 2,
        "hasMore": False,
    }


def test_paths_of_another_principals_workspace_complete_to_nothing(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("bob", BOBS)
    make_note(call_tool, "Secret", "secret.md", ws=BOBS, principal="bob")

    for workspace in (BOBS, "not a uri", "file:///home/bob/notes/../notes"):
        reply = complete(call, prompt("notes_summarize"), "path", "", {"workspaceUri": workspace})
        assert completion_of(reply) == {"values": [], "total": 0, "hasMore": False}


def test_without_a_chosen_workspace_paths_come_from_the_only_usable_one(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Alpha", "alpha.md")

    single = completion_of(complete(call, prompt("notes_summarize"), "path", "a"))
    grant("alice", WORK)
    ambiguous = completion_of(complete(call, prompt("notes_summarize"), "path", "a"))

    assert single["values"] == ["alpha.md"]
    assert ambiguous == {"values": [], "total": 0, "hasMore": False}


def test_completion_is_bounded_to_100_values_with_has_more(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    for n in range(101):
        make_note(call_tool, f"Daily {n:03}", f"daily/{n:03}.md")

    reply = complete(call, prompt("notes_summarize"), "path", "daily/", {"workspaceUri": NOTES})

    completion = completion_of(reply)
    assert completion["values"] == [f"daily/{n:03}.md" for n in range(100)]
    assert completion["hasMore"] is True
    assert "total" not in completion


def test_titles_complete_ignoring_case_and_each_title_once(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Meeting notes", "a.md")
    make_note(call_tool, "Meeting notes", "b.md")
    make_note(call_tool, "MEETUP ideas", "c.md")
    make_note(call_tool, "Agenda", "d.md")

    reply = complete(call, prompt("notes_related"), "title", "meet", {"workspaceUri": NOTES})

    assert completion_of(reply) == {
        "values": ["Meeting notes", "MEETUP ideas"],
        "total": 2,
        "hasMore": False,
    }


def test_the_note_template_completes_workspaces_and_paths(
    call: Call, call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)
    make_note(call_tool, "Plan", "plan.md")

    workspaces = completion_of(complete(call, NOTE_TEMPLATE, "workspaceUri", "file:"))
    paths = completion_of(complete(call, NOTE_TEMPLATE, "path", "pl", {"workspaceUri": NOTES}))

    assert workspaces["values"] == [NOTES]
    assert paths["values"] == ["plan.md"]


def test_resource_templates_list_shows_the_note_template(call: Call) -> None:
    result = call("resources/templates/list")["result"]

    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "public"
    assert result["resourceTemplates"] == [
        {
            "uriTemplate": TEMPLATE,
            "name": "note",
            "title": "Note",
            "description": "A note, by its workspace's file: URI and its path in the workspace",
            "mimeType": "text/markdown",
        }
    ]


def test_since_completes_to_the_starts_of_recent_weeks(call: Call, grant: Grant) -> None:
    completion = completion_of(complete(call, prompt("notes_weekly_review"), "since", ""))

    assert len(completion["values"]) == 8
    assert completion["values"] == sorted(completion["values"], reverse=True)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
            "Unknown prompt: nope",
        ),
        (
            {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}},
            "Invalid params: ref.type must be ref/prompt or ref/resource",
        ),
        (
            {
                "ref": {"type": "ref/resource", "uri": "x://{id}"},
                "argument": {"name": "id", "value": ""},
            },
            "Unknown resource template: x://{id}",
        ),
        (
            {
                "ref": {"type": "ref/prompt", "name": "notes_summarize"},
                "argument": {"name": "zzz", "value": ""},
            },
            "Invalid params: prompt notes_summarize has no argument 'zzz'",
        ),
        (
            {"ref": NOTE_TEMPLATE, "argument": {"name": "zzz", "value": ""}},
            "Invalid params: the note template has no variable 'zzz'",
        ),
        (
            {"ref": NOTE_TEMPLATE, "argument": {"name": "path", "value": 3}},
            "Invalid params: argument needs name and value as strings",
        ),
        (
            {"ref": NOTE_TEMPLATE, "argument": {"name": "path", "value": "x" * 2049}},
            "Invalid params: argument.value may have at most 2048 characters",
        ),
        (
            {
                "ref": NOTE_TEMPLATE,
                "argument": {"name": "path", "value": ""},
                "context": {"arguments": {"workspaceUri": 5}},
            },
            "Invalid params: context.arguments must be an object of strings",
        ),
        ({"argument": {"name": "path", "value": ""}}, "Invalid params: ref must be an object"),
        ({"ref": NOTE_TEMPLATE}, "Invalid params: argument must be an object"),
    ],
)
def test_malformed_completion_requests_are_invalid_params(
    call: Call, params: dict[str, Any], message: str
) -> None:
    reply = call("completion/complete", params)

    assert reply["error"] == {"code": -32602, "message": message}


def test_a_2025_sessions_roots_narrow_workspace_completion(server: McpServer, grant: Grant) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    params = make_request(
        "completion/complete",
        {"ref": prompt("notes_summarize"), "argument": {"name": "workspaceUri", "value": ""}},
    )["params"]
    request = Request(1, "completion/complete", params)

    result, error = server.handle_request(request, "alice", roots=(parse_workspace_uri(WORK),))

    assert error is None and result is not None
    assert json.loads(json.dumps(result["completion"]))["values"] == [WORK]
