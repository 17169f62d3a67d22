"""The note tools end to end through the in-process server: create, read, search, update,
move, and the authorization rules every one of them applies."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.security.uri import parse_note_path
from notes_server.tools.create import slug_path
from notes_server.tools.schema import validate
from notes_server.tools.services import Services
from tests.helpers import workspace_refusal

Call = Callable[..., dict[str, Any]]
Grant = Callable[..., str]

NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"


class TickingClock:
    """Every reading is one second after the previous one: recency order is deterministic."""

    def __init__(self) -> None:
        self.now = datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def services(settings: Settings, migrated_engine: Engine) -> Services:
    return Services(settings, engine=migrated_engine, clock=TickingClock())


@pytest.fixture
def notes_ws(grant: Grant) -> str:
    return grant("alice", NOTES)


def tool_result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    assert result["resultType"] == "complete"
    return result


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    result = tool_result(reply)
    assert result["isError"] is False, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def tool_error_text(reply: dict[str, Any]) -> str:
    result = tool_result(reply)
    assert result["isError"] is True, result
    text: str = result["content"][0]["text"]
    return text


def denied(reply: dict[str, Any]) -> None:
    assert "result" not in reply, reply
    assert workspace_refusal(reply["error"]), reply


def create(
    call_tool: Call,
    title: str,
    body: str = "",
    ws: str = NOTES,
    principal: str = "alice",
    **extra: Any,
) -> Any:
    arguments = {"workspaceUri": ws, "title": title, "body": body, **extra}
    return call_tool("notes_create", arguments, principal=principal)


def created(call_tool: Call, title: str, body: str = "", ws: str = NOTES, **extra: Any) -> Any:
    return ok(create(call_tool, title, body, ws, **extra))["note"]


def output_schema(server: McpServer, name: str) -> dict[str, Any]:
    tool = server.registry.get(name)
    assert tool is not None and tool.output_schema is not None
    return tool.output_schema


# --- create ------------------------------------------------------------------------------


def test_create_defaults_the_path_to_a_slug_of_the_title(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Quarterly Plan: Q3!", "draft")

    assert note["path"] == "quarterly-plan-q3.md"
    assert note["uri"] == f"{NOTES}/quarterly-plan-q3.md"
    assert note["title"] == "Quarterly Plan: Q3!"
    assert note["body"] == "draft"
    assert note["version"] == 1
    assert note["archived"] is False
    assert note["id"].startswith("note_")


@hypothesis_settings(max_examples=300)
@given(st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200))
def test_the_default_path_of_any_title_is_an_acceptable_note_path(title: str) -> None:
    path = slug_path(title)

    assert "/".join(parse_note_path(path)) == path
    assert path.endswith(".md")


def test_create_accepts_an_explicit_nested_path(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Report", path="projects/2026/q3 report.md")

    assert note["path"] == "projects/2026/q3 report.md"
    assert note["uri"] == f"{NOTES}/projects/2026/q3%20report.md"


def test_create_at_a_taken_path_is_a_tool_error_naming_the_path(
    call_tool: Call, notes_ws: str
) -> None:
    created(call_tool, "First", path="a/b.md")

    text = tool_error_text(create(call_tool, "Second", path="a/b.md"))

    assert "'a/b.md'" in text


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../x.md", "dot segment not allowed"),
        ("a/../../x.md", "dot segment not allowed"),
        ("/etc/passwd", "note path must be relative"),
        ("a//b.md", "empty path segment"),
        ("a%2fb", "percent sign not allowed in note path"),
    ],
)
def test_create_with_an_unacceptable_path_is_invalid_params_naming_the_path(
    call_tool: Call, notes_ws: str, path: str, reason: str
) -> None:
    reply = create(call_tool, "Bad", path=path)

    assert reply["error"] == {
        "code": -32602,
        "message": "Invalid arguments for notes_create: arguments.path is not acceptable: "
        + reason,
    }


def test_create_with_a_blank_title_is_invalid_params_naming_the_title(
    call_tool: Call, notes_ws: str
) -> None:
    assert create(call_tool, " \u00a0\t ")["error"] == {
        "code": -32602,
        "message": "Invalid arguments for notes_create: arguments.title must contain visible "
        "characters",
    }


def test_created_notes_match_the_output_schema_and_mirror_it_as_text(
    call_tool: Call, server: McpServer, notes_ws: str
) -> None:
    result = tool_result(create(call_tool, "Schema check", "body"))

    assert validate(result["structuredContent"], output_schema(server, "notes_create")) is None
    assert result["content"][0]["type"] == "text"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


# --- read --------------------------------------------------------------------------------


def test_read_returns_the_note(call_tool: Call, server: McpServer, notes_ws: str) -> None:
    note = created(call_tool, "Read me", "the body")

    result = tool_result(call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]}))

    no_links = {"outgoing": 0, "unresolved": 0, "incoming": 0}
    assert result["structuredContent"] == {
        "note": {**note, "links": no_links},
        "outline": [],
        "bodyLength": 8,
        "offset": 0,
        "truncated": False,
    }
    assert validate(result["structuredContent"], output_schema(server, "notes_read")) is None
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_read_of_an_unknown_id_is_a_tool_error(call_tool: Call, notes_ws: str) -> None:
    reply = call_tool("notes_read", {"workspaceUri": NOTES, "noteId": "note_missing"})

    assert "note_missing" in tool_error_text(reply)


def test_a_note_is_not_readable_through_another_workspace(
    call_tool: Call, grant: Grant, notes_ws: str
) -> None:
    grant("alice", WORK)
    note = created(call_tool, "Work only", ws=WORK)

    reply = call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]})

    assert note["id"] in tool_error_text(reply)


# --- search ------------------------------------------------------------------------------


def search(call_tool: Call, **arguments: Any) -> dict[str, Any]:
    return ok(call_tool("notes_search", {"workspaceUri": NOTES, **arguments}))


def test_search_ranks_a_title_match_first(call_tool: Call, notes_ws: str) -> None:
    body_hit = created(call_tool, "Animals", "the zebra is striped and the zebra runs")
    title_hit = created(call_tool, "Zebra", "nothing else")
    created(call_tool, "Unrelated", "no match here")

    hits = search(call_tool, query="zebra")["notes"]

    assert [h["id"] for h in hits] == [title_hit["id"], body_hit["id"]]


def test_search_hits_carry_a_highlighted_snippet(call_tool: Call, notes_ws: str) -> None:
    created(call_tool, "Animals", "Facts: the okapi is related to the giraffe.")

    (hit,) = search(call_tool, query="okapi")["notes"]

    assert "**okapi**" in hit["snippet"]


def test_search_matches_word_prefixes_and_ranks_notes_with_every_word_first(
    call_tool: Call, notes_ws: str
) -> None:
    both = created(call_tool, "Trip", "planning the budget for the trip")
    one = created(call_tool, "Budget", "only money")
    created(call_tool, "Lunch", "soup")

    hits = search(call_tool, query="plan budg", mode="keyword")["notes"]

    assert [h["id"] for h in hits] == [both["id"], one["id"]]
    assert [h["matchedBy"] for h in hits] == [["keyword"], ["keyword"]]
    assert hits[0]["score"] > hits[1]["score"]


def test_search_treats_query_syntax_as_plain_words(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Ops", 'quote " and NEAR( OR * stars')

    hits = search(call_tool, query='"NEAR( OR *')["notes"]

    assert [h["id"] for h in hits] == [note["id"]]


def test_search_without_query_lists_most_recently_updated_first(
    call_tool: Call, notes_ws: str
) -> None:
    first = created(call_tool, "One")
    second = created(call_tool, "Two")
    third = created(call_tool, "Three")
    ok(call_tool("notes_update", {"workspaceUri": NOTES, "noteId": first["id"], "body": "x"}))

    hits = search(call_tool)["notes"]

    assert [h["id"] for h in hits] == [first["id"], third["id"], second["id"]]


def test_search_leaves_archived_notes_out_unless_asked(
    call_tool: Call, notes_ws: str, migrated_engine: Engine
) -> None:
    from sqlalchemy import text

    live = created(call_tool, "Live", "kiwi")
    gone = created(call_tool, "Gone", "kiwi")
    with migrated_engine.begin() as conn:
        conn.execute(text("UPDATE notes SET archived = TRUE WHERE id = :id"), {"id": gone["id"]})

    default = {h["id"] for h in search(call_tool, query="kiwi")["notes"]}
    everything = search(call_tool, query="kiwi", includeArchived=True)["notes"]

    assert default == {live["id"]}
    assert {h["id"] for h in everything} == {live["id"], gone["id"]}
    assert {h["id"]: h["archived"] for h in everything} == {live["id"]: False, gone["id"]: True}


@pytest.mark.parametrize("query", [None, "common"])
def test_pagination_visits_every_note_exactly_once(
    call_tool: Call, server: McpServer, notes_ws: str, query: str | None
) -> None:
    ids = {created(call_tool, f"Note {i}", f"common text {i}")["id"] for i in range(25)}
    arguments: dict[str, Any] = {"limit": 10}
    if query is not None:
        arguments["query"] = query
    seen: list[str] = []
    pages = 0
    schema = output_schema(server, "notes_search")

    while True:
        page = search(call_tool, **arguments)
        assert validate(page, schema) is None
        pages += 1
        seen += [h["id"] for h in page["notes"]]
        if "nextCursor" not in page:
            break
        arguments["cursor"] = page["nextCursor"]

    assert pages == 3
    assert len(seen) == 25
    assert set(seen) == ids


def test_a_full_last_page_has_no_next_cursor(call_tool: Call, notes_ws: str) -> None:
    for i in range(10):
        created(call_tool, f"N{i}")

    page = search(call_tool, limit=10)

    assert len(page["notes"]) == 10
    assert "nextCursor" not in page


def first_cursor(call_tool: Call, query: str) -> str:
    for i in range(3):
        created(call_tool, f"{query} {i}", query)
    page = search(call_tool, query=query, limit=1)
    cursor: str = page["nextCursor"]
    return cursor


def test_a_cursor_from_another_query_is_invalid_params(call_tool: Call, notes_ws: str) -> None:
    cursor = first_cursor(call_tool, "alpha")
    created(call_tool, "beta", "beta")

    reply = call_tool("notes_search", {"workspaceUri": NOTES, "query": "beta", "cursor": cursor})

    assert reply["error"]["code"] == -32602


def test_a_cursor_from_another_workspace_is_invalid_params(
    call_tool: Call, grant: Grant, notes_ws: str
) -> None:
    cursor = first_cursor(call_tool, "alpha")
    grant("alice", WORK)

    reply = call_tool("notes_search", {"workspaceUri": WORK, "query": "alpha", "cursor": cursor})

    assert reply["error"]["code"] == -32602


def forged(cursor: str, **changes: Any) -> str:
    data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    data.update(changes)
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: c[:-2],
        lambda c: "!" + c,
        lambda c: "",
        lambda c: forged(c, q="0" * 16),
        lambda c: forged(c, o=-1),
        lambda c: forged(c, o="1"),
        lambda c: forged(c, o=10**9),
        lambda c: base64.urlsafe_b64encode(b"[1,2]").decode(),
    ],
    ids=["truncated", "junk", "empty", "digest", "negative", "string", "huge", "not-object"],
)
def test_a_tampered_cursor_is_invalid_params(
    call_tool: Call, notes_ws: str, tamper: Callable[[str], str]
) -> None:
    cursor = first_cursor(call_tool, "alpha")

    reply = call_tool(
        "notes_search", {"workspaceUri": NOTES, "query": "alpha", "cursor": tamper(cursor)}
    )

    assert "result" not in reply, reply
    assert reply["error"]["code"] == -32602


# --- update ------------------------------------------------------------------------------


def update(
    call_tool: Call, note_id: str, principal: str = "alice", **arguments: Any
) -> dict[str, Any]:
    arguments = {"workspaceUri": NOTES, "noteId": note_id, **arguments}
    return call_tool("notes_update", arguments, principal=principal)


def test_update_changes_the_body_and_increments_the_version(
    call_tool: Call, server: McpServer, notes_ws: str
) -> None:
    note = created(call_tool, "Draft", "v1")

    changed = ok(update(call_tool, note["id"], body="v2", expectedVersion=1))

    assert validate(changed, output_schema(server, "notes_update")) is None
    assert changed["note"]["body"] == "v2"
    assert changed["note"]["version"] == 2
    assert changed["note"]["updatedAt"] > note["updatedAt"]
    assert changed["note"]["createdAt"] == note["createdAt"]
    assert ok(update(call_tool, note["id"], body="v3"))["note"]["version"] == 3


def test_a_stale_expected_version_is_a_tool_error_naming_the_current_version(
    call_tool: Call, notes_ws: str
) -> None:
    note = created(call_tool, "Draft", "v1")
    ok(update(call_tool, note["id"], body="v2"))

    text = tool_error_text(update(call_tool, note["id"], body="mine", expectedVersion=1))

    assert "version 2" in text
    read = ok(call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]}))
    assert read["note"]["body"] == "v2"


def test_a_title_only_update_keeps_the_body_and_path(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Old title", "keep me")

    changed = ok(update(call_tool, note["id"], title="New title"))["note"]

    assert changed["title"] == "New title"
    assert changed["body"] == "keep me"
    assert changed["path"] == note["path"]
    assert [h["id"] for h in search(call_tool, query="new")["notes"]] == [note["id"]]
    assert search(call_tool, query="old")["notes"] == []


def test_an_update_with_nothing_to_change_is_a_tool_error(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Draft")

    assert "Nothing to update" in tool_error_text(update(call_tool, note["id"]))


def test_update_of_an_unknown_note_is_a_tool_error(call_tool: Call, notes_ws: str) -> None:
    assert "note_nope" in tool_error_text(update(call_tool, "note_nope", body="x"))


# --- move --------------------------------------------------------------------------------


def move(
    call_tool: Call, note_id: str, target: str, principal: str = "alice", **arguments: Any
) -> dict[str, Any]:
    arguments = {
        "workspaceUri": NOTES,
        "noteId": note_id,
        "targetWorkspaceUri": target,
        **arguments,
    }
    return call_tool("notes_move", arguments, principal=principal)


def test_move_to_another_granted_workspace(
    call_tool: Call, server: McpServer, grant: Grant, notes_ws: str
) -> None:
    grant("alice", WORK)
    note = created(call_tool, "Travels", "body", path="t.md")

    moved = ok(move(call_tool, note["id"], WORK, path="archive/t.md"))

    assert validate(moved, output_schema(server, "notes_move")) is None
    assert moved["note"]["uri"] == f"{WORK}/archive/t.md"
    assert moved["note"]["version"] == 2
    gone = call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]})
    assert note["id"] in tool_error_text(gone)
    there = ok(call_tool("notes_read", {"workspaceUri": WORK, "noteId": note["id"]}))
    assert there["note"]["body"] == "body"


def test_move_within_a_workspace_changes_the_path(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Here", path="a.md")

    moved = ok(move(call_tool, note["id"], NOTES, path="b/a.md"))

    assert moved["note"]["path"] == "b/a.md"


def test_move_onto_a_taken_path_is_a_tool_error(
    call_tool: Call, grant: Grant, notes_ws: str
) -> None:
    grant("alice", WORK)
    note = created(call_tool, "Mine", path="same.md")
    created(call_tool, "Theirs", path="same.md", ws=WORK)

    assert "'same.md'" in tool_error_text(move(call_tool, note["id"], WORK))


def test_move_to_an_ungranted_workspace_is_denied(call_tool: Call, notes_ws: str) -> None:
    note = created(call_tool, "Stay")

    denied(move(call_tool, note["id"], "file:///home/bob/notes"))
    assert ok(call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]}))


def test_move_to_a_read_only_workspace_is_denied(
    call_tool: Call, grant: Grant, notes_ws: str
) -> None:
    grant("alice", WORK, role="read")
    note = created(call_tool, "Stay")

    denied(move(call_tool, note["id"], WORK))


# --- authorization -----------------------------------------------------------------------

REFUSED_WORKSPACES = [
    "file:///home/alice/other",
    "file:///home/alice/notes-evil",
    "file:///home/alice/notes/%2e%2e",
    "file:///home/alice/notes/../notes",
    "file:///home/alice/notes/sub",
    "file:///home/alice",
    "file://host/home/alice/notes",
    "http://example.com/notes",
    "file:///home/alice/notes?x=1",
    "file:///home/alice/notes//",
    "file:///home/alice/notes/sub/",
    "not a uri at all",
]


@pytest.mark.parametrize("workspace", REFUSED_WORKSPACES)
@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("notes_search", {}),
        ("notes_read", {"noteId": "note_x"}),
        ("notes_create", {"title": "t"}),
        ("notes_update", {"noteId": "note_x", "body": "b"}),
        ("notes_move", {"noteId": "note_x", "targetWorkspaceUri": NOTES}),
    ],
)
def test_unauthorized_workspace_is_refused_with_the_fixed_message(
    call_tool: Call, notes_ws: str, workspace: str, tool: str, extra: dict[str, Any]
) -> None:
    denied(call_tool(tool, {"workspaceUri": workspace, **extra}))


def test_a_non_canonical_spelling_of_a_granted_workspace_is_accepted(
    call_tool: Call, notes_ws: str
) -> None:
    note = created(call_tool, "Spelling")

    reply = call_tool(
        "notes_read", {"workspaceUri": "FILE:///home/alice/notes", "noteId": note["id"]}
    )

    assert ok(reply)["note"]["uri"] == note["uri"]


def test_another_principal_cannot_reach_alices_notes(
    call_tool: Call, grant: Grant, notes_ws: str
) -> None:
    note = created(call_tool, "Private", "secret")
    grant("bob", "file:///home/bob/notes")

    denied(call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]}, principal="bob"))
    denied(call_tool("notes_search", {"workspaceUri": NOTES}, principal="bob"))
    bobs = call_tool(
        "notes_read",
        {"workspaceUri": "file:///home/bob/notes", "noteId": note["id"]},
        principal="bob",
    )
    assert note["id"] in tool_error_text(bobs)


def test_a_read_role_can_read_and_search_but_not_write(
    call_tool: Call, grant: Grant, notes_ws: str
) -> None:
    note = created(call_tool, "Shared", "shared words")
    grant("carol", NOTES, role="read")

    read = call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]}, principal="carol")
    hits = call_tool("notes_search", {"workspaceUri": NOTES, "query": "shared"}, principal="carol")

    assert ok(read)["note"]["id"] == note["id"]
    assert [h["id"] for h in ok(hits)["notes"]] == [note["id"]]
    denied(create(call_tool, "Nope", principal="carol"))
    denied(update(call_tool, note["id"], body="x", principal="carol"))
    denied(move(call_tool, note["id"], NOTES, principal="carol"))


def test_a_denied_write_changes_nothing(call_tool: Call, grant: Grant, notes_ws: str) -> None:
    grant("carol", NOTES, role="read")

    denied(create(call_tool, "Sneaky", principal="carol"))

    assert search(call_tool)["notes"] == []


@pytest.mark.parametrize(
    "query",
    [
        "!!! ??? ...",
        "the of and to",
        "plan\x00budget",
        "🎉 plan 🎉",
        "预算",
        "' <-> :* & |",
        "x" * 500,
    ],
    ids=[
        "punctuation",
        "stop-words",
        "nul",
        "emoji",
        "cjk",
        "tsquery-syntax",
        "at-the-length-limit",
    ],
)
@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic", None])
def test_hostile_queries_answer_a_result_in_every_offered_mode(
    call_tool: Call, notes_ws: str, services: Services, query: str, mode: str | None
) -> None:
    created(call_tool, "预算 plan", "the budget plan of the team")
    arguments: dict[str, Any] = {"query": query}
    if mode is not None:
        arguments["mode"] = mode
    reply = call_tool("notes_search", {"workspaceUri": NOTES, **arguments})
    offered = services.semantic_available() or mode in (None, "keyword")
    if offered:
        hits = ok(reply)["notes"]
        assert all(set(h["matchedBy"]) <= {"keyword", "semantic"} for h in hits)
    else:
        assert reply["error"]["code"] == -32602
        assert "not offered" in reply["error"]["message"]


@pytest.mark.parametrize("query", ["\ud800 plan \udfff", "\udfff"], ids=["in-words", "alone"])
@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic", None])
def test_a_query_with_a_lone_surrogate_is_invalid_params_in_every_mode(
    call_tool: Call, notes_ws: str, query: str, mode: str | None
) -> None:
    arguments = {"workspaceUri": NOTES, "query": query}
    if mode is not None:
        arguments["mode"] = mode
    reply = call_tool("notes_search", arguments)
    assert reply["error"] == {
        "code": -32602,
        "message": "Invalid params: arguments.query contains an unpaired surrogate",
    }


@pytest.mark.parametrize("mode", ["keyword", "hybrid", "semantic", None])
def test_a_query_over_the_length_limit_is_invalid_params(
    call_tool: Call, notes_ws: str, mode: str | None
) -> None:
    arguments = {"workspaceUri": NOTES, "query": "budget " * 1_500}  # 10,500 characters
    if mode is not None:
        arguments["mode"] = mode
    reply = call_tool("notes_search", arguments)
    assert reply["error"]["code"] == -32602
    assert "query" in reply["error"]["message"]


def test_search_hits_carry_section_score_and_signals(call_tool: Call, notes_ws: str) -> None:
    created(call_tool, "Plan", "# Goals\n\nhire two engineers\n\n## Money\n\nthe budget is tight")
    (hit,) = search(call_tool, query="budget tight", mode="keyword")["notes"]
    assert hit["section"] == "Money"
    assert hit["snippet"] == "the **budget** is **tight**"
    assert hit["matchedBy"] == ["keyword"]
    assert hit["score"] > 0
