"""Links and history together: a link rewrite keeps a revision of every rewritten note (tool
"link rewrite", by the caller who renamed or moved), edits and reverts re-index links and tags,
and a revision keeps the tags and properties of its version so that a revert restores them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.config import Settings
from notes_server.tools.schema import validate
from notes_server.tools.services import Services

Call = Callable[..., dict[str, Any]]
WS = "file:///home/alice/notes"


@pytest.fixture
def services(settings: Settings, migrated_engine: Engine) -> Services:
    return Services(settings, engine=migrated_engine)


@pytest.fixture(autouse=True)
def workspace(grant: Callable[..., str]) -> None:
    grant("alice", WS)


class Alice:
    def __init__(self, call_tool: Call) -> None:
        self.call_tool = call_tool

    def __call__(self, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = self.call_tool(tool, {"workspaceUri": WS, **arguments}, principal="alice")
        assert "error" not in reply, reply
        assert reply["result"]["isError"] is False, reply
        structured: dict[str, Any] = reply["result"]["structuredContent"]
        return structured

    def create(self, title: str, body: str = "", **extra: Any) -> dict[str, Any]:
        note: dict[str, Any] = self("notes_create", title=title, body=body, **extra)["note"]
        return note

    def targets(self, note: dict[str, Any]) -> list[tuple[str, str | None]]:
        """(text, resolved note id or None) of each outgoing link."""
        return [
            (o["text"], o.get("id")) for o in self("notes_links", noteId=note["id"])["outgoing"]
        ]

    def versions(self, note: dict[str, Any]) -> list[tuple[int, str, str]]:
        listed = self("notes_history", noteId=note["id"])["versions"]
        return [(v["version"], v["principal"], v["tool"]) for v in listed]


@pytest.fixture
def alice(call_tool: Call) -> Alice:
    return Alice(call_tool)


def test_a_rename_keeps_a_revision_of_every_rewritten_note_by_the_caller(alice: Alice) -> None:
    target = alice.create("Old Name", path="old.md")
    sources = [alice.create(f"Source {i}", f"see [[Old Name]] ({i})") for i in range(3)]
    untouched = alice.create("Unrelated", "no links")

    result = alice("notes_update", noteId=target["id"], title="New Name")

    assert sorted(r["id"] for r in result["rewritten"]) == sorted(s["id"] for s in sources)
    for i, source in enumerate(sources):
        assert alice.versions(source) == [
            (2, "alice", "link rewrite"),
            (1, "alice", "notes_create"),
        ]
        past = alice("notes_read", noteId=source["id"], version=1)
        assert (past["note"]["body"], past["currentVersion"]) == (f"see [[Old Name]] ({i})", 2)
        now = alice("notes_read", noteId=source["id"])["note"]
        assert now["body"] == f"see [[New Name]] ({i})"
    assert alice.versions(untouched) == [(1, "alice", "notes_create")]
    assert alice.versions(target) == [(2, "alice", "notes_update"), (1, "alice", "notes_create")]


def test_a_move_keeps_a_revision_of_every_note_whose_links_it_rewrote(alice: Alice) -> None:
    mover = alice.create("Mover", path="first.md")
    source = alice.create("Source", "[[first.md]] and [m](first.md)")

    result = alice("notes_move", noteId=mover["id"], targetWorkspaceUri=WS, path="dir/moved.md")

    assert [r["id"] for r in result["rewritten"]] == [source["id"]]
    assert alice.versions(source) == [(2, "alice", "link rewrite"), (1, "alice", "notes_create")]
    past = alice("notes_read", noteId=source["id"], version=1)["note"]
    assert past["body"] == "[[first.md]] and [m](first.md)"
    now = alice("notes_read", noteId=source["id"])["note"]["body"]
    assert now == "[[dir/moved.md]] and [m](dir/moved.md)"


def test_an_edit_adding_a_link_shows_in_notes_links_and_a_revert_removes_it(
    alice: Alice,
) -> None:
    target = alice.create("Target")
    note = alice.create("Note", "# Plan\nfirst\n")

    edited = alice(
        "notes_edit",
        noteId=note["id"],
        edits=[{"section": "Plan", "action": "append", "text": "see [[Target]] #linked"}],
    )

    assert edited["note"]["version"] == 2
    assert alice.targets(note) == [("Target", target["id"])]
    incoming = alice("notes_links", noteId=target["id"])["incoming"]
    assert [i["id"] for i in incoming] == [note["id"]]
    assert [t["tag"] for t in alice("notes_tags")["tags"]] == ["linked"]

    reverted = alice("notes_revert", noteId=note["id"], version=1)

    assert reverted["note"]["body"] == "# Plan\nfirst\n"
    assert alice.targets(note) == []
    assert alice("notes_links", noteId=target["id"])["counts"] == {
        "outgoing": 0,
        "unresolved": 0,
        "incoming": 0,
    }
    assert alice("notes_tags")["tags"] == []
    assert alice("notes_read", noteId=note["id"])["note"]["links"]["outgoing"] == 0


def test_a_revision_keeps_tags_and_properties_and_a_revert_restores_them(
    alice: Alice, server: Any
) -> None:
    note = alice.create("Note", "body #inline")
    alice("notes_update", noteId=note["id"], tags=["alpha"], properties={"status": "draft"})
    changed = alice(
        "notes_update", noteId=note["id"], tags=["beta"], properties={"status": None, "due": 3}
    )["note"]
    assert (changed["version"], changed["tags"], changed["properties"]) == (
        3,
        ["beta", "inline"],
        {"due": 3},
    )

    past = alice("notes_read", noteId=note["id"], version=2)
    assert (past["note"]["tags"], past["note"]["properties"]) == (
        ["alpha", "inline"],
        {"status": "draft"},
    )
    assert validate(past, server.registry.get("notes_read").output_schema) is None
    first = alice("notes_read", noteId=note["id"], version=1)["note"]
    assert (first["tags"], first["properties"]) == (["inline"], {})

    reverted = alice("notes_revert", noteId=note["id"], version=2)["note"]

    assert (reverted["version"], reverted["tags"], reverted["properties"]) == (
        4,
        ["alpha", "inline"],
        {"status": "draft"},
    )
    assert alice("notes_read", noteId=note["id"])["note"]["properties"] == {"status": "draft"}
    assert [n["id"] for n in alice("notes_search", tags=["alpha"])["notes"]] == [note["id"]]
    assert alice("notes_search", tags=["beta"])["notes"] == []
    # The version the revert replaced is itself kept, with its own front matter.
    replaced = alice("notes_read", noteId=note["id"], version=3)["note"]
    assert (replaced["tags"], replaced["properties"]) == (["beta", "inline"], {"due": 3})
