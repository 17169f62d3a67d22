"""notes_read's bounded and section reads, and notes_edit's precise edits: exact codes,
shapes, and that a refused call changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from notes_server.protocol.server import McpServer
from notes_server.tools.schema import validate

Call = Callable[..., dict[str, Any]]
WS = "file:///home/alice/notes"
BODY = "# Plan\nintro\n## Risks\nr1\n\n## Risks\nr2\n```\n## fenced\n```\n# Done\nbye\n"


@pytest.fixture
def ws(grant: Callable[..., str]) -> str:
    return grant("alice", WS)


def result_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    result = result_of(reply)
    assert result["isError"] is False, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def failed(reply: dict[str, Any]) -> str:
    result = result_of(reply)
    assert result["isError"] is True, result
    text: str = result["content"][0]["text"]
    return text


def make(call_tool: Call, body: str = BODY, title: str = "Doc") -> dict[str, Any]:
    note: dict[str, Any] = ok(
        call_tool("notes_create", {"workspaceUri": WS, "title": title, "body": body})
    )["note"]
    return note


def read(call_tool: Call, note: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return call_tool("notes_read", {"workspaceUri": WS, "noteId": note["id"], **extra})


def edit(call_tool: Call, note: dict[str, Any], *edits: dict[str, Any], **extra: Any) -> Any:
    arguments = {"workspaceUri": WS, "noteId": note["id"], "edits": list(edits), **extra}
    return call_tool("notes_edit", arguments)


def body_of(call_tool: Call, note: dict[str, Any]) -> str:
    text: str = ok(read(call_tool, note, limit=1_000_000))["note"]["body"]
    return text


def schema_of(server: McpServer, name: str) -> dict[str, Any]:
    tool = server.registry.get(name)
    assert tool is not None and tool.output_schema is not None
    return tool.output_schema


# --- notes_read ----------------------------------------------------------------------------


def test_read_returns_the_outline_and_the_whole_short_body(
    call_tool: Call, ws: str, server: McpServer
) -> None:
    note = make(call_tool)

    result = ok(read(call_tool, note))

    assert result["note"]["body"] == BODY
    assert [(h["level"], h["text"], h["address"]) for h in result["outline"]] == [
        (1, "Plan", "Plan"),
        (2, "Risks", "Plan/Risks"),
        (2, "Risks", "Plan/Risks#2"),
        (1, "Done", "Done"),
    ]
    assert result["outline"][1]["offset"] == BODY.index("## Risks")
    assert (result["bodyLength"], result["offset"], result["truncated"]) == (len(BODY), 0, False)
    assert "nextOffset" not in result
    assert validate(result, schema_of(server, "notes_read")) is None


def test_a_long_body_is_read_in_bounded_parts_that_join_to_the_whole(
    call_tool: Call, ws: str
) -> None:
    body = "".join(f"line {i:05d}\n" for i in range(3000))  # 33,000 characters
    note = make(call_tool, body)

    first = ok(read(call_tool, note))
    assert len(first["note"]["body"]) == 20_000
    assert (first["truncated"], first["nextOffset"]) == (True, 20_000)

    parts, offset = [], 0
    while True:
        part = ok(read(call_tool, note, offset=offset, limit=7_000))
        parts.append(part["note"]["body"])
        if not part["truncated"]:
            break
        offset = part["nextOffset"]
    assert "".join(parts) == body
    assert len(parts) == 5


def test_an_offset_past_the_end_reads_nothing(call_tool: Call, ws: str) -> None:
    note = make(call_tool, "short")

    result = ok(read(call_tool, note, offset=99))

    assert (result["note"]["body"], result["truncated"]) == ("", False)


def test_a_section_read_returns_that_section_alone(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    second = ok(read(call_tool, note, section="Plan/Risks#2"))
    first = ok(read(call_tool, note, section="Plan/Risks"))
    plan = ok(read(call_tool, note, section="Plan", limit=10))

    assert second["note"]["body"] == "## Risks\nr2\n```\n## fenced\n```\n"
    assert second["section"] == "Plan/Risks#2"
    assert first["note"]["body"] == "## Risks\nr1\n\n"
    assert plan["note"]["body"] == "# Plan\nint"
    assert (plan["truncated"], plan["nextOffset"]) == (True, 10)


def test_a_missing_section_is_a_tool_error_listing_the_headings(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    reply = read(call_tool, note, section="Plan/Budget")

    assert failed(reply) == (
        "No section 'Plan/Budget' in this note. Its headings: 'Plan', 'Plan/Risks', "
        "'Plan/Risks#2', 'Done'."
    )
    headings = reply["result"]["structuredContent"]["headings"]
    assert [h["address"] for h in headings] == ["Plan", "Plan/Risks", "Plan/Risks#2", "Done"]


def test_an_unreadable_section_address_is_invalid_params(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    reply = read(call_tool, note, section="Plan//Risks")

    assert reply["error"]["code"] == -32602
    assert "arguments.section" in reply["error"]["message"]


# --- notes_edit ----------------------------------------------------------------------------


def test_a_text_edit_replaces_the_one_occurrence_and_answers_a_unified_diff(
    call_tool: Call, ws: str, server: McpServer
) -> None:
    note = make(call_tool)

    result = ok(edit(call_tool, note, {"oldText": "intro", "newText": "introduction"}))

    assert result["note"]["version"] == 2
    assert "body" not in result["note"]
    assert result["diff"] == (
        "--- a/doc.md@1\n+++ b/doc.md@2\n@@ -1,5 +1,5 @@\n # Plan\n-intro\n+introduction\n"
        " ## Risks\n r1\n \n"
    )
    assert body_of(call_tool, note) == BODY.replace("intro", "introduction")
    assert validate(result, schema_of(server, "notes_edit")) is None


def test_an_old_text_found_several_times_is_refused_with_its_line_numbers(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)

    reply = edit(call_tool, note, {"oldText": "## Risks\n", "newText": "## Threats\n"})

    assert failed(reply) == (
        "Edit 1: oldText occurs 2 times (lines 3, 6); it must occur exactly once. Nothing was "
        "changed: include more of the surrounding text to make it unique."
    )
    assert reply["result"]["structuredContent"] == {"edit": 1, "occurrences": 2, "lines": [3, 6]}
    assert body_of(call_tool, note) == BODY


def test_an_old_text_not_found_is_refused(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    text = failed(edit(call_tool, note, {"oldText": "absent", "newText": "x"}))

    assert text.startswith("Edit 1: oldText occurs 0 times; it must occur exactly once.")


def test_overlapping_occurrences_count_as_several(call_tool: Call, ws: str) -> None:
    note = make(call_tool, "aaa")

    assert "occurs 2 times" in failed(edit(call_tool, note, {"oldText": "aa", "newText": "b"}))


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("replace", "# Plan\nintro\n## Risks\nnew\n## Risks\n"),
        ("append", "# Plan\nintro\n## Risks\nr1\nnew\n\n## Risks\n"),
        ("prepend", "# Plan\nintro\n## Risks\nnew\nr1\n\n## Risks\n"),
    ],
)
def test_a_section_edit_replaces_appends_or_prepends_under_the_heading(
    call_tool: Call, ws: str, action: str, expected: str
) -> None:
    note = make(call_tool)

    ok(edit(call_tool, note, {"section": "Plan/Risks", "action": action, "text": "new"}))

    body = body_of(call_tool, note)
    assert body.startswith(expected)
    assert body.endswith("## Risks\nr2\n```\n## fenced\n```\n# Done\nbye\n")


def test_appending_to_the_last_section_without_a_final_newline_starts_a_new_line(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool, "# A\ntext")

    ok(edit(call_tool, note, {"section": "A", "action": "append", "text": "more"}))

    assert body_of(call_tool, note) == "# A\ntext\nmore"


def test_the_edits_of_one_call_apply_in_order_together(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    result = ok(
        edit(
            call_tool,
            note,
            {"oldText": "intro", "newText": "hello"},
            {"oldText": "hello", "newText": "hello again"},
            {"section": "Done", "action": "append", "text": "- signed"},
        )
    )

    assert result["note"]["version"] == 2
    body = body_of(call_tool, note)
    assert "hello again\n" in body
    assert body.endswith("# Done\nbye\n- signed\n")


def test_one_failing_edit_leaves_the_note_unchanged(call_tool: Call, ws: str) -> None:
    note = make(call_tool)

    reply = edit(
        call_tool,
        note,
        {"oldText": "intro", "newText": "hello"},
        {"section": "Nowhere", "action": "append", "text": "x"},
    )

    assert failed(reply).startswith("No section 'Nowhere' in this note.")
    after = ok(read(call_tool, note))
    assert (after["note"]["body"], after["note"]["version"]) == (BODY, 1)


def test_edits_of_other_sections_made_since_expected_version_are_kept(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)
    ok(edit(call_tool, note, {"section": "Done", "action": "append", "text": "first"}))

    result = ok(
        edit(
            call_tool,
            note,
            {"section": "Plan/Risks", "action": "append", "text": "second"},
            expectedVersion=1,
        )
    )

    assert (result["note"]["version"], result["rebasedFrom"]) == (3, 1)
    body = body_of(call_tool, note)
    assert "r1\nsecond\n" in body
    assert body.endswith("bye\nfirst\n")


def test_an_edit_of_a_section_changed_since_expected_version_is_a_conflict(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)
    ok(edit(call_tool, note, {"section": "Plan/Risks", "action": "append", "text": "first"}))

    reply = edit(
        call_tool,
        note,
        {"section": "Plan/Risks", "action": "append", "text": "second"},
        expectedVersion=1,
    )

    assert failed(reply) == (
        "Edit conflict: section 'Plan/Risks' changed after version 1 (the note is at version "
        "2). Nothing was changed: read it again and retry with expectedVersion 2."
    )
    body = body_of(call_tool, note)
    assert "first" in body and "second" not in body


def test_an_expected_version_ahead_of_the_note_is_a_version_conflict(
    call_tool: Call, ws: str
) -> None:
    note = make(call_tool)

    text = failed(edit(call_tool, note, {"oldText": "intro", "newText": "x"}, expectedVersion=7))

    assert text.startswith("Version conflict: note ")
    assert body_of(call_tool, note) == BODY


@pytest.mark.parametrize(
    ("edits", "problem"),
    [
        ([], "arguments.edits must be a list of 1 to 100 edits"),
        ([{"oldText": "a"}], "arguments.edits[0].newText is required"),
        (
            [{"text": "a"}],
            "arguments.edits[0] must be {oldText, newText} or {section, action, text}",
        ),
        (
            [{"section": "A", "action": "delete", "text": ""}],
            "arguments.edits[0].action must be one of the allowed values",
        ),
        ([{"oldText": "", "newText": "x"}], "arguments.edits[0].oldText must be at least 1"),
    ],
)
def test_malformed_edits_are_invalid_params_naming_the_edit(
    call_tool: Call, ws: str, edits: list[Any], problem: str
) -> None:
    note = make(call_tool)

    reply = call_tool("notes_edit", {"workspaceUri": WS, "noteId": note["id"], "edits": edits})

    assert reply["error"]["code"] == -32602
    assert problem in reply["error"]["message"]


def test_edit_needs_write_access(call_tool: Call, grant: Callable[..., str]) -> None:
    grant("alice", WS)
    note = make(call_tool)
    grant("bob", WS, "read")

    reply = call_tool(
        "notes_edit",
        {"workspaceUri": WS, "noteId": note["id"], "edits": [{"oldText": "intro", "newText": ""}]},
        principal="bob",
    )

    assert reply["error"]["code"] == -32602
    assert body_of(call_tool, note) == BODY
