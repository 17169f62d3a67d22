"""Three `notes-server serve` processes on one PostgreSQL database (issue 24's proof): a
listen on each, all on the same note, and one real `tools/call notes_update` made through the
first instance. Each listener, the writer's own included, hears it exactly once: a later
marker change (committed after it, so delivered after it: the feed delivers in commit order)
is the next and last thing each listener is sent. PostgreSQL only: the subject is the
`LISTEN`/`NOTIFY` feed shared by separate server processes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.features.subscriptions.hub import SUBSCRIPTION_ID
from notes_server.store import notes
from notes_server.store.engine import write_tx
from tests.helpers import ServerProcess, make_request
from tests.pg_support import on_postgresql

pytestmark = pytest.mark.skipif(not on_postgresql(), reason="the PostgreSQL run of the suite")

Spawn = Callable[..., ServerProcess]
Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"
NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
WRITER = notes.Author("writer", "test")
INSTANCES = 3


def insert(engine: Engine, path: str) -> notes.NoteRecord:
    with write_tx(engine) as conn:
        return notes.insert_note(
            conn, workspace=NOTES, path=path, title=path, body="v1", now=NOW, author=WRITER
        )


def updated(uri: str, tag: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri, "_meta": {SUBSCRIPTION_ID: tag}},
    }


def notifications_until(
    process: ServerProcess, last: dict[str, Any], replies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every notification the process sends up to and including `last`; replies, which
    interleave with them on the writer's stdout, go to `replies`."""
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1] != last:
        message = process.read()
        (replies if "id" in message else seen).append(message)
    return seen


def test_a_change_through_one_instance_reaches_a_listener_on_each_of_three_exactly_once(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    note, marker = insert(migrated_engine, "plan.md"), insert(migrated_engine, "marker.md")
    uri, marker_uri = f"{NOTES}/plan.md", f"{NOTES}/marker.md"
    instances = [spawn_server() for _ in range(INSTANCES)]
    acks = []
    for number, process in enumerate(instances):
        process.send(
            make_request(
                "subscriptions/listen",
                {"notifications": {"resourceSubscriptions": [uri, marker_uri]}},
                id=f"listen-{number}",
            )
        )
        acks.append(process.read())

    writer = instances[0]
    writer.send(
        make_request(
            "tools/call",
            {
                "name": "notes_update",
                "arguments": {"workspaceUri": NOTES, "noteId": note.id, "body": "v2"},
            },
            id="update",
        )
    )
    replies: list[dict[str, Any]] = []
    first = [
        notifications_until(p, updated(uri, f"listen-{n}"), replies)
        for n, p in enumerate(instances)
    ]
    if not replies:
        replies.append(writer.read())
    with write_tx(migrated_engine) as conn:
        assert notes.update_fields(conn, marker, now=NOW, author=WRITER, body="v2") is not None
    rest = [
        notifications_until(p, updated(marker_uri, f"listen-{n}"), replies)
        for n, p in enumerate(instances)
    ]

    assert [ack["method"] for ack in acks] == ["notifications/subscriptions/acknowledged"] * 3
    assert [ack["params"]["_meta"][SUBSCRIPTION_ID] for ack in acks] == [
        f"listen-{n}" for n in range(INSTANCES)
    ]
    assert [(r["id"], r["result"]["isError"]) for r in replies] == [("update", False)]
    assert first == [[updated(uri, f"listen-{n}")] for n in range(INSTANCES)]
    assert rest == [[updated(marker_uri, f"listen-{n}")] for n in range(INSTANCES)]
