"""Paths and titles a client asks to write: refused before anything is written when they could
not be addressed (URI limits) or could be mistaken for another in a confirmation form."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from notes_server.store.engine import read_tx
from notes_server.store.models import notes_table

Call = Callable[..., dict[str, Any]]
Grant = Callable[..., str]

NOTES = "file:///home/alice/notes"
# 8 + 7 * 250 + 6 = 1764 characters: a valid, grantable workspace with little room below it.
LONG_WS = "file:///" + "/".join(["w" * 250] * 7)
# 60 segments: four more are allowed below it.
DEEP_WS = "file:///" + "/".join(f"d{i}" for i in range(60))
LONG_PATH = "b" * 250 + "/" + "c" * 50 + ".md"
DEEP_PATH = "a/b/c/d/e.md"


def rows(engine: Engine) -> list[tuple[Any, ...]]:
    with read_tx(engine) as conn:
        return [
            tuple(r)
            for r in conn.execute(
                select(notes_table.c.id, notes_table.c.workspace, notes_table.c.path)
            )
        ]


def note_count(engine: Engine) -> int:
    with read_tx(engine) as conn:
        return int(conn.execute(select(func.count()).select_from(notes_table)).scalar_one())


def error(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" not in reply, reply
    found: dict[str, Any] = reply["error"]
    return found


def created(call_tool: Call, ws: str, title: str, **extra: Any) -> dict[str, Any]:
    reply = call_tool("notes_create", {"workspaceUri": ws, "title": title, **extra})
    assert "error" not in reply and reply["result"]["isError"] is False, reply
    note: dict[str, Any] = reply["result"]["structuredContent"]["note"]
    return note


# -- URI limits: refused before the row is written -----------------------------------------


@pytest.mark.parametrize(
    ("ws", "path", "reason"),
    [(LONG_WS, LONG_PATH, "URI too long"), (DEEP_WS, DEEP_PATH, "too many path segments")],
    ids=["length", "segments"],
)
def test_create_refuses_a_path_whose_uri_breaks_the_limits_before_writing(
    call_tool: Call, grant: Grant, migrated_engine: Engine, ws: str, path: str, reason: str
) -> None:
    grant("alice", ws)

    reply = call_tool("notes_create", {"workspaceUri": ws, "title": "Report", "path": path})

    assert error(reply) == {
        "code": -32602,
        "message": f"Invalid arguments for notes_create: arguments.path is too long for this "
        f"workspace: {reason} (a note's URI, workspace included, may have at most 2048 "
        "characters and 64 segments)",
    }
    assert note_count(migrated_engine) == 0


@pytest.mark.parametrize(
    ("ws", "path"), [(LONG_WS, LONG_PATH), (DEEP_WS, DEEP_PATH)], ids=["length", "segments"]
)
@pytest.mark.parametrize("explicit", [True, False], ids=["new-path", "kept-path"])
def test_move_refuses_a_target_uri_that_breaks_the_limits_before_writing(
    call_tool: Call,
    grant: Grant,
    migrated_engine: Engine,
    ws: str,
    path: str,
    explicit: bool,
) -> None:
    grant("alice", NOTES)
    grant("alice", ws)
    note = created(call_tool, NOTES, "Report", path=path if not explicit else "r.md")
    before = rows(migrated_engine)
    arguments = {"workspaceUri": NOTES, "noteId": note["id"], "targetWorkspaceUri": ws}

    reply = call_tool("notes_move", {**arguments, **({"path": path} if explicit else {})})

    assert error(reply)["code"] == -32602
    assert error(reply)["message"].startswith(
        "Invalid arguments for notes_move: arguments.path is too long for this workspace: "
    )
    assert rows(migrated_engine) == before


def test_a_path_that_just_fits_the_limit_is_created(
    call_tool: Call, grant: Grant, migrated_engine: Engine
) -> None:
    grant("alice", LONG_WS)
    room = 2048 - len(LONG_WS) - 1  # characters left after the workspace and its slash
    path = "b" * 200 + "/" + "c" * (room - 201)

    note = created(call_tool, LONG_WS, "Report", path=path)

    assert len(note["uri"]) == 2048
    assert note_count(migrated_engine) == 1


# -- look-alike path segments --------------------------------------------------------------

LOOKALIKE_PATHS = {
    "trailing-nbsp": ("tps.md\u00a0", "path segment 'tps.md\\xa0' starts or ends with whitespace"),
    "trailing-space": ("tps.md ", "path segment 'tps.md ' starts or ends with whitespace"),
    "leading-space": ("q3/ tps.md", "path segment ' tps.md' starts or ends with whitespace"),
    "trailing-ideographic": (
        "q3\u3000/tps.md",
        "path segment 'q3\\u3000' starts or ends with whitespace",
    ),
    "inner-em-space": (
        "tps\u2003report.md",
        "path segment 'tps\\u2003report.md' contains the space U+2003",
    ),
    "inner-nbsp": (
        "tps\u00a0report.md",
        "path segment 'tps\\xa0report.md' contains the space U+00A0",
    ),
    "hangul-filler": ("tps\u3164.md", "path segment 'tps\\u3164.md' contains the blank U+3164"),
    "zero-width-space": ("tps\u200b.md", "control or invisible character not allowed"),
    "bidi-override": ("tps\u202e.md", "control or invisible character not allowed"),
    "tab": ("tps\t.md", "control or invisible character not allowed"),
}


@pytest.mark.parametrize("case", list(LOOKALIKE_PATHS))
def test_create_refuses_a_path_segment_that_could_look_like_another(
    call_tool: Call, grant: Grant, migrated_engine: Engine, case: str
) -> None:
    grant("alice", NOTES)
    path, reason = LOOKALIKE_PATHS[case]

    reply = call_tool("notes_create", {"workspaceUri": NOTES, "title": "TPS", "path": path})

    assert error(reply) == {
        "code": -32602,
        "message": "Invalid arguments for notes_create: arguments.path is not acceptable: "
        + reason,
    }
    assert note_count(migrated_engine) == 0


@pytest.mark.parametrize("case", ["trailing-nbsp", "inner-em-space", "hangul-filler"])
def test_move_refuses_a_path_segment_that_could_look_like_another(
    call_tool: Call, grant: Grant, migrated_engine: Engine, case: str
) -> None:
    grant("alice", NOTES)
    note = created(call_tool, NOTES, "TPS", path="tps.md")
    before = rows(migrated_engine)
    path, reason = LOOKALIKE_PATHS[case]
    arguments = {"workspaceUri": NOTES, "noteId": note["id"], "targetWorkspaceUri": NOTES}

    reply = call_tool("notes_move", {**arguments, "path": path})

    assert error(reply) == {
        "code": -32602,
        "message": "Invalid arguments for notes_move: arguments.path is not acceptable: " + reason,
    }
    assert rows(migrated_engine) == before


def test_inner_ascii_spaces_and_non_ascii_letters_stay_allowed_in_paths(
    call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)

    note = created(call_tool, NOTES, "Report", path="Jürgen/q3 report 2026.md")

    assert note["path"] == "Jürgen/q3 report 2026.md"


# -- titles --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("  TPS report\u00a0", "TPS report"),
        ("TPS \u2003\t report", "TPS report"),
        ("Re\u0301sume\u0301", "R\u00e9sum\u00e9"),
    ],
    ids=["trailing-nbsp", "inner-run", "decomposed"],
)
@pytest.mark.parametrize("tool", ["notes_create", "notes_update"])
def test_titles_are_stored_with_one_visible_spelling(
    call_tool: Call, grant: Grant, tool: str, raw: str, stored: str
) -> None:
    grant("alice", NOTES)
    if tool == "notes_create":
        note = created(call_tool, NOTES, raw, path="t.md")
    else:
        first = created(call_tool, NOTES, "Draft", path="t.md")
        reply = call_tool(
            "notes_update", {"workspaceUri": NOTES, "noteId": first["id"], "title": raw}
        )
        note = reply["result"]["structuredContent"]["note"]

    assert note["title"] == stored


@pytest.mark.parametrize("char", ["\u200b", "\u202e", "\u2066", "\x07", "\ufeff"])
@pytest.mark.parametrize("tool", ["notes_create", "notes_update", "notes_delete", "notes_archive"])
def test_titles_with_invisible_characters_are_invalid_params_naming_the_title(
    call_tool: Call, grant: Grant, migrated_engine: Engine, tool: str, char: str
) -> None:
    grant("alice", NOTES)
    note = created(call_tool, NOTES, "TPS report", path="t.md")
    before = rows(migrated_engine)
    title = f"TPS{char} report"
    arguments: dict[str, Any] = {"workspaceUri": NOTES, "title": title}
    if tool == "notes_update":
        arguments["noteId"] = note["id"]

    reply = call_tool(tool, arguments, caps={"elicitation": {"form": {}}})

    assert error(reply) == {
        "code": -32602,
        "message": f"Invalid arguments for {tool}: arguments.title must not contain control or "
        "invisible characters (such as zero-width spaces or bidi controls)",
    }
    assert rows(migrated_engine) == before
