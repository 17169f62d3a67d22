"""Links, backlinks and tags end to end through the in-process server (both store
implementations; PostgreSQL with NOTES_SERVER_TEST_DB=postgresql)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.config import Settings
from notes_server.errors import WORKSPACE_DENIED
from notes_server.tools.schema import validate
from notes_server.tools.services import Services

Call = Callable[..., dict[str, Any]]

NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
EVIL = "file:///home/mallory/notes"


@pytest.fixture
def services(settings: Settings, migrated_engine: Engine) -> Services:
    return Services(settings, engine=migrated_engine)


@pytest.fixture(autouse=True)
def workspaces(grant: Callable[..., str]) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    grant("mallory", EVIL)


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result = reply["result"]
    assert result["isError"] is False, result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def error_text(reply: dict[str, Any]) -> str:
    assert "error" not in reply, reply
    assert reply["result"]["isError"] is True
    return str(reply["result"]["content"][0]["text"])


class Client:
    def __init__(self, call_tool: Call, principal: str = "alice", ws: str = NOTES) -> None:
        self.call_tool, self.principal, self.ws = call_tool, principal, ws

    def raw(self, tool: str, **arguments: Any) -> dict[str, Any]:
        arguments.setdefault("workspaceUri", self.ws)
        return self.call_tool(tool, arguments, principal=self.principal)

    def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return ok(self.raw(tool, **arguments))

    def create(self, title: str, body: str = "", **extra: Any) -> dict[str, Any]:
        note: dict[str, Any] = self("notes_create", title=title, body=body, **extra)["note"]
        return note

    def links(self, note: dict[str, Any]) -> dict[str, Any]:
        return self("notes_links", noteId=note["id"])

    def read(self, note: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = self("notes_read", noteId=note["id"])["note"]
        return found


@pytest.fixture
def alice(call_tool: Call) -> Client:
    return Client(call_tool)


@pytest.fixture
def mallory(call_tool: Call) -> Client:
    return Client(call_tool, "mallory", EVIL)


# --- links ------------------------------------------------------------------------------


def test_every_link_form_resolves_and_shows_as_a_backlink(alice: Client, server: Any) -> None:
    plan = alice.create("Project Plan", "goals", path="plans/plan.md")
    source = alice.create(
        "Source",
        "See [[project plan]], [[plans/plan.md#Goals|the goals]], [it](plans/plan.md#Risks)"
        " and [[Missing note]].\n```\n[[Project Plan]] in code\n```\n`[[Project Plan]]`",
    )

    links = alice.links(source)

    assert links["outgoing"] == [
        {"text": "project plan", "kind": "wiki", "resolved": True, **ref(plan)},
        {
            "text": "plans/plan.md",
            "kind": "wiki",
            "resolved": True,
            "heading": "Goals",
            **ref(plan),
        },
        {
            "text": "plans/plan.md",
            "kind": "markdown",
            "resolved": True,
            "heading": "Risks",
            **ref(plan),
        },
        {"text": "Missing note", "kind": "wiki", "resolved": False},
    ]
    assert links["counts"] == {"outgoing": 4, "unresolved": 1, "incoming": 0}
    back = alice.links(plan)
    assert back["incoming"] == [
        {**ref(source), "context": back["incoming"][0]["context"], "links": 3}
    ]
    assert "[[project plan]]" in back["incoming"][0]["context"]
    assert back["counts"] == {"outgoing": 0, "unresolved": 0, "incoming": 1}
    assert alice.read(plan)["links"] == {"outgoing": 0, "unresolved": 0, "incoming": 1}
    assert alice.read(source)["links"] == {"outgoing": 4, "unresolved": 1, "incoming": 0}
    tool = server.registry.get("notes_links")
    assert validate(links, tool.output_schema) is None


def ref(note: dict[str, Any], *, archived: bool = False) -> dict[str, Any]:
    return {"id": note["id"], "title": note["title"], "path": note["path"], "archived": archived}


def test_a_dangling_link_resolves_when_its_note_is_created_renamed_or_moved(
    alice: Client,
) -> None:
    source = alice.create("Source", "[[Later]] [[Renamed]] [[dir/moved.md]] [m](dir/moved.md)")
    assert alice.links(source)["counts"]["unresolved"] == 4

    later = alice.create("Later")
    other = alice.create("Something", path="other.md")
    alice("notes_update", noteId=other["id"], title="Renamed")
    mover = alice.create("Mover", path="first.md")
    alice("notes_move", noteId=mover["id"], targetWorkspaceUri=NOTES, path="dir/moved.md")

    targets = [o.get("id") for o in alice.links(source)["outgoing"]]
    assert targets == [later["id"], other["id"], mover["id"], mover["id"]]


def test_an_ambiguous_title_stays_unresolved_until_one_candidate_is_left(alice: Client) -> None:
    first = alice.create("Twin", path="one.md")
    second = alice.create("twin", path="two.md")
    source = alice.create("Source", "[[TWIN]]")

    assert alice.links(source)["outgoing"][0]["resolved"] is False

    alice("notes_update", noteId=second["id"], title="Not a twin", updateLinks=False)
    assert alice.links(source)["outgoing"][0]["id"] == first["id"]
    # A path match wins over titles.
    alice.create("one.md", path="x.md")
    assert alice.links(alice.create("By path", "[[one.md]]"))["outgoing"][0]["id"] == first["id"]


def archive(engine: Engine, note: dict[str, Any]) -> None:
    """What notes_archive applies once the user confirmed (its form is tested elsewhere)."""
    from notes_server.store import notes
    from notes_server.store.engine import write_tx

    with write_tx(engine) as conn:
        record = notes.get_note(conn, NOTES, note["id"])
        assert record is not None
        now = record.updated_at
        assert notes.update_fields(conn, record, now=now, archived=True, archived_at=now)


def test_a_link_to_an_archived_note_stays_resolved_and_shows_it_archived_both_ways(
    alice: Client, migrated_engine: Engine
) -> None:
    # An archived note can still be read by id: links to and from it hold, marked archived.
    target = alice.create("Archived Plan", "[[Source]] #kept")
    source = alice.create("Source", "see [[Archived Plan]] and [[archived-plan.md]]")

    archive(migrated_engine, target)

    assert alice.links(source)["outgoing"] == [
        {"text": "Archived Plan", "kind": "wiki", "resolved": True, **ref(target, archived=True)},
        {
            "text": "archived-plan.md",
            "kind": "wiki",
            "resolved": True,
            **ref(target, archived=True),
        },
    ]
    links = alice.links(target)
    assert links["counts"] == {"outgoing": 1, "unresolved": 0, "incoming": 1}
    assert links["outgoing"] == [
        {"text": "Source", "kind": "wiki", "resolved": True, **ref(source)}
    ]
    assert [(back["id"], back["archived"]) for back in links["incoming"]] == [(source["id"], False)]
    assert [(back["id"], back["archived"]) for back in alice.links(source)["incoming"]] == [
        (target["id"], True)
    ]

    assert alice("notes_restore", noteId=target["id"])["note"]["archived"] is False

    assert alice.read(target)["links"] == {"outgoing": 1, "unresolved": 0, "incoming": 1}
    assert [o.get("archived") for o in alice.links(source)["outgoing"]] == [False, False]


def test_a_title_names_the_live_note_before_an_archived_one_through_archive_and_restore(
    alice: Client, migrated_engine: Engine
) -> None:
    old = alice.create("Plan", path="2025/plan.md")
    new = alice.create("Plan", path="2026/plan.md")
    source = alice.create("Source", "[[Plan]] [[2025/plan.md]]")

    def targets() -> list[tuple[bool, str | None]]:
        return [(o["resolved"], o.get("id")) for o in alice.links(source)["outgoing"]]

    assert targets() == [(False, None), (True, old["id"])]  # two live notes: ambiguous

    archive(migrated_engine, old)  # the live one takes the title; a path still names the old
    assert targets() == [(True, new["id"]), (True, old["id"])]
    assert alice.links(old)["counts"]["incoming"] == 1
    assert alice.links(new)["counts"]["incoming"] == 1

    archive(migrated_engine, new)  # two archived notes, none live: ambiguous again
    assert targets() == [(False, None), (True, old["id"])]

    alice("notes_restore", noteId=new["id"])  # the dangling link resolves to the restored one
    assert targets() == [(True, new["id"]), (True, old["id"])]

    alice("notes_restore", noteId=old["id"])  # two live notes again
    assert targets() == [(False, None), (True, old["id"])]


def test_a_dangling_link_resolves_to_an_archived_note_when_no_live_one_has_the_title(
    alice: Client, migrated_engine: Engine
) -> None:
    source = alice.create("Source", "[[Someday]]")
    someday = alice.create("Someday")
    archive(migrated_engine, someday)
    assert alice.links(source)["outgoing"][0]["id"] == someday["id"]

    later = alice.create("Later", "[[Someday]]")  # written while it is archived
    assert alice.links(later)["outgoing"][0] == {
        "text": "Someday",
        "kind": "wiki",
        "resolved": True,
        **ref(someday, archived=True),
    }
    fresh = alice.create("someday", path="fresh.md")  # a live note takes the title
    assert [alice.links(n)["outgoing"][0]["id"] for n in (source, later)] == [fresh["id"]] * 2


def test_a_rename_rewrites_the_links_of_every_linking_note_in_one_call(alice: Client) -> None:
    target = alice.create("Old Name", path="old.md")
    sources = [
        alice.create(
            f"Source {i}", "a [[Old Name]] b [[old name|shown]] c [[Old Name#Part]] `[[Old Name]]`"
        )
        for i in range(25)
    ]
    by_path = alice.create("By path", "[[old.md]] stays")

    result = alice("notes_update", noteId=target["id"], title="New Name")

    assert sorted(r["id"] for r in result["rewritten"]) == sorted(s["id"] for s in sources)
    assert all(r["version"] == 2 for r in result["rewritten"])
    for source in sources:
        body = alice.read(source)["body"]
        assert body == "a [[New Name]] b [[New Name|shown]] c [[New Name#Part]] `[[Old Name]]`"
        assert alice.links(source)["counts"] == {"outgoing": 3, "unresolved": 0, "incoming": 0}
    assert alice.read(by_path)["body"] == "[[old.md]] stays"
    assert alice.links(target)["counts"]["incoming"] == 26


def test_update_links_false_leaves_bodies_and_the_old_links_dangle(alice: Client) -> None:
    target = alice.create("Old")
    source = alice.create("Source", "[[Old]]")

    result = alice("notes_update", noteId=target["id"], title="New", updateLinks=False)

    assert result["rewritten"] == []
    assert alice.read(source)["body"] == "[[Old]]"
    assert alice.read(source)["version"] == 1
    assert alice.links(source)["outgoing"] == [{"text": "Old", "kind": "wiki", "resolved": False}]


def test_a_title_a_wiki_link_cannot_hold_is_written_as_the_path(alice: Client) -> None:
    target = alice.create("Old", path="notes/old.md")
    source = alice.create("Source", "[[Old|x]]")

    alice("notes_update", noteId=target["id"], title="A | B")

    assert alice.read(source)["body"] == "[[notes/old.md|x]]"
    assert alice.links(source)["outgoing"][0]["id"] == target["id"]


def test_a_move_rewrites_path_links_and_keeps_the_moved_notes_own_links(alice: Client) -> None:
    target = alice.create("Target", "[sib](sibling.md) [self](x.md) [[Sibling]]", path="a/x.md")
    sibling = alice.create("Sibling", path="a/sibling.md")
    source = alice.create(
        "Source",
        "[t](../a/x.md#Top) [[a/x.md|t]] [[Target]] [web](https://e.com/a/x.md)",
        path="b/y.md",
    )

    result = alice("notes_move", noteId=target["id"], targetWorkspaceUri=NOTES, path="c/d/z.md")

    assert [r["id"] for r in result["rewritten"]] == [source["id"]]
    assert alice.read(source)["body"] == (
        "[t](../c/d/z.md#Top) [[c/d/z.md|t]] [[Target]] [web](https://e.com/a/x.md)"
    )
    moved = result["note"]
    assert moved["body"] == "[sib](../../a/sibling.md) [self](z.md) [[Sibling]]"
    targets = [o["id"] for o in alice.links(moved)["outgoing"]]
    assert targets == [sibling["id"], target["id"], sibling["id"]]
    assert alice.links(source)["counts"] == {"outgoing": 3, "unresolved": 0, "incoming": 0}


def test_moving_to_another_workspace_takes_no_link_along(alice: Client) -> None:
    target = alice.create("Target")
    source = alice.create("Source", "[[Target]]")

    result = alice("notes_move", noteId=target["id"], targetWorkspaceUri=WORK)

    assert result["rewritten"] == []
    assert alice.links(source)["outgoing"][0]["resolved"] is False
    work = Client(alice.call_tool, ws=WORK)
    assert work.links(result["note"])["counts"]["incoming"] == 0


def test_an_attacker_workspace_linking_to_victim_titles_learns_nothing(
    alice: Client, mallory: Client
) -> None:
    secret = alice.create("Secret Plan", "#confidential", path="secret.md")
    probe = mallory.create("Probe", "[[Secret Plan]] [[secret.md]] [x](secret.md) #confidential")

    probed = mallory.links(probe)
    assert [o["resolved"] for o in probed["outgoing"]] == [False, False, False]
    assert all("id" not in o for o in probed["outgoing"])
    assert alice.links(secret)["incoming"] == []
    assert alice.read(secret)["links"]["incoming"] == 0
    assert mallory("notes_tags")["tags"] == [{"tag": "confidential", "notes": 1}]
    assert alice("notes_tags")["tags"] == [{"tag": "confidential", "notes": 1}]
    # Naming the victim's workspace or note from the attacker's grant is refused alike.
    # The victim's note id in the attacker's workspace reads as any unknown id.
    assert error_text(mallory.raw("notes_links", noteId=secret["id"])) == error_text(
        mallory.raw("notes_links", noteId="note_0000")
    ).replace("note_0000", secret["id"])
    for reply in (
        mallory.raw("notes_links", workspaceUri=NOTES, noteId=secret["id"]),
        mallory.raw("notes_tags", workspaceUri=NOTES),
        mallory.raw("notes_search", workspaceUri=NOTES, tags=["confidential"]),
    ):
        # The refusal lists only mallory's own workspace: nothing of alice's.
        assert reply["error"]["code"] == -32602
        assert reply["error"]["data"] == {"usableWorkspaces": [EVIL]}
        assert reply["error"]["message"].startswith(WORKSPACE_DENIED)


def test_notes_links_of_an_unknown_note_is_a_tool_error(alice: Client) -> None:
    assert "No note with id" in error_text(alice.raw("notes_links", noteId="note_nope"))


# --- tags -------------------------------------------------------------------------------


def test_search_by_tags_needs_every_tag_and_results_carry_tags(alice: Client) -> None:
    both = alice.create("Both", "#Project/Q3 and #urgent")
    one = alice.create("One", "#project/q3 only")
    alice.create("None", "no tags `#code`")

    found = alice("notes_search", tags=["project/Q3", "#URGENT"])["notes"]
    assert [n["id"] for n in found] == [both["id"]]
    assert found[0]["tags"] == ["Project/Q3", "urgent"]
    assert "links" not in found[0]  # search results stay small: no link data
    hits = alice("notes_search", query="only", tags=["project/q3"])["notes"]
    assert [n["id"] for n in hits] == [one["id"]]
    assert alice("notes_search", query="only", tags=["urgent"])["notes"] == []
    assert len(alice("notes_search", tags=["PROJECT/Q3"])["notes"]) == 2


def test_a_tags_cursor_belongs_to_its_tags(alice: Client) -> None:
    for i in range(3):
        alice.create(f"N{i}", "#t")
    page = alice("notes_search", tags=["t"], limit=2)
    assert len(page["notes"]) == 2
    rest = alice("notes_search", tags=["T"], limit=2, cursor=page["nextCursor"])
    assert len(rest["notes"]) == 1
    refused = alice.raw("notes_search", tags=["other"], cursor=page["nextCursor"])
    assert refused["error"]["code"] == -32602


def test_notes_tags_counts_notes_lists_first_spelling_and_filters_by_prefix(
    alice: Client,
) -> None:
    alice.create("A", "#Project/Q3 #project")
    alice.create("B", "#PROJECT/q3 #other")
    alice.create("C", "#project/old")

    assert alice("notes_tags") == {
        "tags": [
            {"tag": "other", "notes": 1},
            {"tag": "project", "notes": 1},
            {"tag": "project/old", "notes": 1},
            {"tag": "Project/Q3", "notes": 2},
        ],
        "total": 4,
    }
    assert alice("notes_tags", prefix="#PROJECT/", limit=1) == {
        "tags": [{"tag": "project/old", "notes": 1}],
        "total": 2,
    }
    assert alice("notes_tags", prefix="nothing") == {"tags": [], "total": 0}


def test_bad_tag_arguments_are_refused_with_the_field_named(alice: Client) -> None:
    note = alice.create("N")
    for bad, field in (([" "], "tags[0]"), (["12"], "tags[0]"), (["ok", "a b"], "tags[1]")):
        reply = alice.raw("notes_search", tags=bad)
        assert reply["error"]["code"] == -32602
        assert f"arguments.{field}" in reply["error"]["message"]
        reply = alice.raw("notes_update", noteId=note["id"], tags=bad)
        assert f"arguments.{field}" in reply["error"]["message"]


def test_update_sets_changes_and_removes_tags_and_properties(alice: Client) -> None:
    note = alice.create("N", "body #inline")

    first = alice(
        "notes_update",
        noteId=note["id"],
        tags=["alpha", "#Beta"],
        properties={"status": "draft", "priority": 2, "aliases": ["x", "y"], "ok": True},
    )["note"]
    assert first["version"] == 2
    assert first["tags"] == ["alpha", "Beta", "inline"]
    assert first["properties"] == {
        "status": "draft",
        "priority": 2,
        "aliases": ["x", "y"],
        "ok": True,
    }

    second = alice(
        "notes_update", noteId=note["id"], tags=[], properties={"status": "final", "priority": None}
    )["note"]
    assert second["tags"] == ["inline"]
    assert second["properties"] == {"status": "final", "aliases": ["x", "y"], "ok": True}
    assert alice.read(note)["properties"] == second["properties"]
    assert [n["id"] for n in alice("notes_search", tags=["alpha"])["notes"]] == []


def test_reserved_and_malformed_properties_are_refused(alice: Client) -> None:
    note = alice.create("N")
    for properties in ({"title": "x"}, {"tags": "x"}, {"bad key": 1}, {"k": {"nested": 1}}):
        reply = alice.raw("notes_update", noteId=note["id"], properties=properties)
        assert reply["error"]["code"] == -32602, properties
    assert alice.read(note)["version"] == 1
