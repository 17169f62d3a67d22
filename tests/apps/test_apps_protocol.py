"""MCP Apps through the real server (in process): the extension in discover, the view linked
from notes_timeline only for requests that declare Apps, the timeline and open tools, and the
`ui://` resource behind the capability."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.apps.apps_support import APP_MIME, APPS, NOTES, UI, VIEW, seed_notes
from tests.helpers import workspace_refusal

Call = Callable[..., dict[str, Any]]
ELICITING: dict[str, Any] = {**APPS, "elicitation": {"form": {}}}
UI_META = {"ui": {"resourceUri": VIEW}}


@pytest.fixture
def ids(migrated_engine: Engine) -> dict[str, str]:
    return seed_notes(migrated_engine)


def _tools(call: Call, caps: Any) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in call("tools/list", caps=caps)["result"]["tools"]}


def _timeline(call_tool: Call, **arguments: Any) -> dict[str, Any]:
    reply = call_tool("notes_timeline", {"workspaceUri": NOTES, **arguments})
    result: dict[str, Any] = reply["result"]
    return result


def test_discover_lists_the_apps_extension(call: Call) -> None:
    capabilities = call("server/discover")["result"]["capabilities"]

    assert capabilities["extensions"][UI] == {}  # the whole set: tests/protocol/test_extensions.py


@pytest.mark.parametrize(
    "entry",
    [{"mimeTypes": [APP_MIME]}, {"mimeTypes": ["text/html", APP_MIME]}, {}],
    ids=["mime-types", "mime-types-among-others", "bare-object"],
)
def test_the_timeline_links_its_view_for_a_request_declaring_apps(call: Call, entry: Any) -> None:
    tools = _tools(call, {"extensions": {UI: entry}})

    assert tools["notes_timeline"]["_meta"] == UI_META
    assert [name for name, tool in tools.items() if "_meta" in tool] == ["notes_timeline"]


@pytest.mark.parametrize(
    "caps",
    [
        None,
        {"extensions": {}},
        {"extensions": {UI: True}},
        {"extensions": {UI: None}},
        {"extensions": {UI: [APP_MIME]}},
        {"extensions": {UI: {"mimeTypes": APP_MIME}}},
        {"extensions": {UI: {"mimeTypes": ["text/html"]}}},
        {"extensions": [UI]},
        {"experimental": {UI: {}}},
    ],
    ids=[
        "none",
        "empty-extensions",
        "true",
        "null",
        "list",
        "mime-types-not-a-list",
        "other-mime-type",
        "extensions-a-list",
        "experimental",
    ],
)
def test_without_a_valid_apps_declaration_the_timeline_is_a_plain_text_tool(
    call: Call, call_tool: Call, ids: dict[str, str], caps: Any
) -> None:
    tools = _tools(call, caps)
    result = call_tool("notes_timeline", {"workspaceUri": NOTES}, caps=caps)["result"]

    assert "_meta" not in tools["notes_timeline"]
    assert result["isError"] is False
    assert "2026-03-02:" in result["content"][0]["text"]


def test_the_varying_tool_list_is_private_and_one_request_never_sees_anothers_variant(
    call: Call,
) -> None:
    capable = call("tools/list", caps=APPS)["result"]
    plain = call("tools/list")["result"]

    assert (capable["cacheScope"], capable["ttlMs"]) == ("private", 300_000)
    assert (plain["cacheScope"], plain["ttlMs"]) == ("private", 300_000)
    assert all("_meta" not in tool for tool in plain["tools"])
    assert [t["name"] for t in capable["tools"]] == [t["name"] for t in plain["tools"]]


def test_the_timeline_text_is_a_dated_outline_newest_day_first(
    call_tool: Call, ids: dict[str, str]
) -> None:
    result = _timeline(call_tool)

    assert result["content"][0]["text"] == "\n".join(
        [
            f"Timeline of {NOTES}: 3 notes on 2 days, by last update (UTC).",
            "2026-03-02:",
            f"- 16:05 Standup (id {ids['Standup']}, journal/mar-2.md)",
            f"- 09:30 Q1 plans (id {ids['Q1 plans']}, plans/q1.md)",
            "2026-03-01:",
            f"- 08:00 Garden (id {ids['Garden']}, journal/mar-1.md)",
        ]
    )


def test_the_timeline_structured_content_carries_notes_and_day_counts(
    call_tool: Call, ids: dict[str, str]
) -> None:
    data = _timeline(call_tool)["structuredContent"]

    assert data["workspaceUri"] == NOTES
    assert data["days"] == [{"date": "2026-03-02", "count": 2}, {"date": "2026-03-01", "count": 1}]
    assert data["truncated"] is False
    garden = data["notes"][2]
    assert garden == {
        "id": ids["Garden"],
        "title": "Garden",
        "path": "journal/mar-1.md",
        "uri": f"{NOTES}/journal/mar-1.md",
        "version": 1,
        "createdAt": "2026-03-01T08:00:00Z",
        "updatedAt": "2026-03-01T08:00:00Z",
        "archived": False,
        "tags": [],
        "snippet": "Planted tomatoes",
    }


def test_the_timeline_shows_each_notes_tags(
    call_tool: Call, ids: dict[str, str], migrated_engine: Engine
) -> None:
    from datetime import UTC, datetime

    from notes_server.store import notes
    from notes_server.store.engine import write_tx

    with write_tx(migrated_engine) as conn:
        tagged = notes.insert_note(
            conn,
            workspace=NOTES,
            path="journal/tagged.md",
            title="Tagged",
            body="#garden and #Plans/Q1 `#code`",
            now=datetime(2026, 3, 1, 7, 0, tzinfo=UTC),
        )

    shown = {n["id"]: n["tags"] for n in _timeline(call_tool)["structuredContent"]["notes"]}

    assert shown[tagged.id] == ["garden", "Plans/Q1"]
    assert shown[ids["Garden"]] == []


@pytest.mark.parametrize(
    ("arguments", "titles"),
    [
        ({"from": "2026-03-02"}, ["Standup", "Q1 plans"]),
        ({"to": "2026-03-01"}, ["Garden"]),
        ({"from": "2026-03-01", "to": "2026-03-01"}, ["Garden"]),
        ({"query": "tomatoes"}, ["Garden"]),
        ({"includeArchived": True}, ["Standup", "Q1 plans", "Garden", "Old idea"]),
        ({"includeArchived": True, "to": "2026-02-28"}, ["Old idea"]),
        ({"from": "2027-01-01"}, []),
    ],
    ids=["from", "to", "one-day", "query", "archived", "archived-before", "nothing"],
)
def test_the_timeline_keeps_only_the_asked_days_words_and_archived_state(
    call_tool: Call, ids: dict[str, str], arguments: dict[str, Any], titles: list[str]
) -> None:
    result = _timeline(call_tool, **arguments)

    assert [n["title"] for n in result["structuredContent"]["notes"]] == titles
    assert result["isError"] is False


def test_an_empty_timeline_says_so(call_tool: Call, ids: dict[str, str]) -> None:
    result = _timeline(call_tool, **{"from": "2027-01-01"})

    assert result["content"][0]["text"] == f"No notes in {NOTES} for these days."
    assert result["structuredContent"]["days"] == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"from": "2026-3-1xy"}, "arguments.from must be a day as YYYY-MM-DD"),
        ({"from": "2026/03/01"}, "arguments.from must be a day as YYYY-MM-DD"),
        ({"from": "2026-W09-1"}, "arguments.from must be a day as YYYY-MM-DD"),
        ({"to": "2026-02-30"}, "arguments.to must be a day as YYYY-MM-DD"),
        ({"from": "20260301"}, "arguments.from must be at least 10 characters"),
        ({"from": "2026-03-02", "to": "2026-03-01"}, "arguments.from must not be after `to`"),
    ],
    ids=["malformed", "slashes", "iso-week", "no-such-day", "too-short", "reversed"],
)
def test_a_bad_day_is_invalid_params_naming_the_argument(
    call_tool: Call, ids: dict[str, str], arguments: dict[str, Any], message: str
) -> None:
    reply = call_tool("notes_timeline", {"workspaceUri": NOTES, **arguments})

    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == f"Invalid arguments for notes_timeline: {message}"


def test_the_timeline_of_an_ungranted_workspace_is_refused(
    call_tool: Call, ids: dict[str, str]
) -> None:
    reply = call_tool("notes_timeline", {"workspaceUri": NOTES}, principal="mallory")

    assert workspace_refusal(reply["error"])
    assert reply["error"]["data"] == {"usableWorkspaces": []}  # nothing of alice's


def test_notes_open_returns_the_note_for_the_host_to_show(
    call_tool: Call, ids: dict[str, str]
) -> None:
    result = call_tool("notes_open", {"workspaceUri": NOTES, "noteId": ids["Garden"]})["result"]

    assert result["isError"] is False
    assert result["structuredContent"]["note"]["body"] == "Planted tomatoes"
    assert result["content"][0]["text"] == (
        "# Garden\n(journal/mar-1.md, updated 2026-03-01T08:00:00Z)\n\nPlanted tomatoes"
    )


def test_notes_open_of_an_unknown_id_is_a_tool_error(call_tool: Call, ids: dict[str, str]) -> None:
    result = call_tool("notes_open", {"workspaceUri": NOTES, "noteId": "note_nope"})["result"]

    assert result["isError"] is True
    assert "No note with id 'note_nope'" in result["content"][0]["text"]


def test_notes_open_of_another_principals_workspace_is_refused(
    call_tool: Call, ids: dict[str, str]
) -> None:
    arguments = {"workspaceUri": NOTES, "noteId": ids["Garden"]}
    reply = call_tool("notes_open", arguments, principal="mallory")

    assert reply["error"]["code"] == -32602


def test_archive_asked_from_the_view_still_needs_the_users_confirmation(
    call_tool: Call, ids: dict[str, str]
) -> None:
    arguments = {"workspaceUri": NOTES, "title": "Garden"}
    result = call_tool("notes_archive", arguments, caps=ELICITING)["result"]
    after = _timeline(call_tool)["structuredContent"]

    assert result["resultType"] == "input_required"
    assert isinstance(result["requestState"], str)
    assert "Garden" in [n["title"] for n in after["notes"]]  # nothing archived yet


def test_resources_list_offers_the_view_to_an_apps_request(call: Call, ids: dict[str, str]) -> None:
    listed = call("resources/list", caps=APPS)["result"]["resources"]

    (view,) = [r for r in listed if r["uri"].startswith("ui:")]
    assert {k: view[k] for k in ("uri", "name", "mimeType")} == {
        "uri": VIEW,
        "name": "notes_timeline",
        "mimeType": APP_MIME,
    }
    assert view["description"]
    assert len([r for r in listed if r["uri"].startswith("file:")]) == 3


def test_resources_list_without_apps_is_the_notes_alone(call: Call, ids: dict[str, str]) -> None:
    listed = call("resources/list")["result"]["resources"]

    assert sorted(r["uri"] for r in listed) == [
        f"{NOTES}/journal/mar-1.md",
        f"{NOTES}/journal/mar-2.md",
        f"{NOTES}/plans/q1.md",
    ]


def test_reading_the_view_returns_html_with_an_empty_csp_and_its_digest(call: Call) -> None:
    result = call("resources/read", {"uri": VIEW}, caps=APPS)["result"]

    (content,) = result["contents"]
    assert (content["uri"], content["mimeType"]) == (VIEW, APP_MIME)
    assert content["text"].startswith("<!doctype html>")
    assert content["_meta"]["ui"]["csp"] == {
        "connectDomains": [],
        "resourceDomains": [],
        "frameDomains": [],
        "baseUriDomains": [],
    }
    assert content["_meta"]["ui"]["permissions"] == {}
    digest = hashlib.sha256(content["text"].encode()).hexdigest()
    assert content["_meta"]["dev.notes-server/sha256"] == digest
    assert result["resultType"] == "complete"


def test_the_view_loads_nothing_from_anywhere(call: Call) -> None:
    text = call("resources/read", {"uri": VIEW}, caps=APPS)["result"]["contents"][0]["text"]

    lowered = text.lower()
    for needle in ("<script src", "<link", "@import", "url(", "http://", "https://", "fetch("):
        assert needle not in lowered, needle
    assert "xmlhttprequest" not in lowered and "websocket" not in lowered


@pytest.mark.parametrize(
    "caps",
    [None, {"extensions": {UI: True}}, {"extensions": {}}],
    ids=["none", "malformed", "empty"],
)
def test_reading_the_view_without_apps_names_the_missing_capability(call: Call, caps: Any) -> None:
    error = call("resources/read", {"uri": VIEW}, caps=caps)["error"]

    assert error["code"] == -32021
    assert error["data"] == {
        "requiredCapabilities": {"extensions": {UI: {"mimeTypes": [APP_MIME]}}}
    }
    assert UI in error["message"]


def test_an_unknown_ui_uri_is_not_found_with_the_uri(call: Call) -> None:
    error = call("resources/read", {"uri": "ui://notes/other.html"}, caps=APPS)["error"]

    assert error == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "ui://notes/other.html"},
    }


@pytest.fixture
def many(migrated_engine: Engine) -> int:
    """505 notes, one an hour from 2026-01-01 00:00 UTC (so 24 a day, the last on Jan 22)."""
    from datetime import UTC, datetime, timedelta

    from notes_server.store import grants, notes
    from notes_server.store.engine import write_tx

    start = datetime(2026, 1, 1, tzinfo=UTC)
    with write_tx(migrated_engine) as conn:
        grants.upsert(conn, "alice", NOTES, "write", start)
        for i in range(505):
            notes.insert_note(
                conn, workspace=NOTES, path=f"n{i:03}.md", title=f"n{i}", body="x",
                now=start + timedelta(hours=i),
            )  # fmt: skip
    return 505


def test_a_timeline_past_its_bound_says_it_was_cut_short(call_tool: Call, many: int) -> None:
    result = _timeline(call_tool)
    data = result["structuredContent"]

    assert len(data["notes"]) == 500
    assert data["truncated"] is True
    assert data["notes"][0]["title"] == "n504"
    assert result["content"][0]["text"].endswith(
        "More notes match: narrow the days or the query to see the rest."
    )


def test_a_day_range_over_many_pages_finds_every_note_of_its_days(
    call_tool: Call, many: int
) -> None:
    data = _timeline(call_tool, **{"from": "2026-01-02", "to": "2026-01-03"})["structuredContent"]

    assert len(data["notes"]) == 48
    assert data["truncated"] is False
    assert data["days"] == [
        {"date": "2026-01-03", "count": 24},
        {"date": "2026-01-02", "count": 24},
    ]
