"""`subscriptions/listen` over stdio, with real `notes-server serve` processes on one database:
a change committed by another process reaches the listener, tagged with its subscription id;
nothing about a note the principal cannot read (another principal's, outside its grants,
revoked mid-stream) is ever delivered; a cancelled listen ends silently; limits refuse
clearly. The later "marker" change of each attack test proves the earlier ones were skipped,
since the feed delivers in commit order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.features.subscriptions.hub import MAX_URIS, SUBSCRIPTION_ID
from notes_server.store import grants
from notes_server.store.engine import write_tx
from tests.helpers import ServerProcess, make_request
from tests.transports.subscription_support import insert, touch

Spawn = Callable[..., ServerProcess]
Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
BOBS = "file:///home/bob/notes"


def listen(
    process: ServerProcess, uris: list[str], *, listing: bool = False, id: Any = "listen-1"
) -> dict[str, Any]:
    """Open a listen; its first line, the acknowledgement."""
    wanted: dict[str, Any] = {"resourceSubscriptions": uris}
    if listing:
        wanted["resourcesListChanged"] = True
    process.send(make_request("subscriptions/listen", {"notifications": wanted}, id=id))
    return process.read()


def updated(uri: str, tag: Any = "listen-1") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri, "_meta": {SUBSCRIPTION_ID: tag}},
    }


def test_a_listen_hears_changes_made_by_another_server_process(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = insert(migrated_engine, NOTES, "plan.md")
    uri = f"{NOTES}/plan.md"
    listener, writer = spawn_server(), spawn_server()

    ack = listen(listener, [uri], listing=True, id=7)
    reply = writer.request(
        "tools/call",
        {
            "name": "notes_update",
            "arguments": {"workspaceUri": NOTES, "noteId": note.id, "body": "v2"},
        },
    )
    assert reply["result"]["isError"] is False, reply
    first = listener.read()
    created = writer.request(
        "tools/call",
        {
            "name": "notes_create",
            "arguments": {"workspaceUri": NOTES, "title": "New", "path": "new.md"},
        },
    )
    assert created["result"]["isError"] is False, created
    second = listener.read()

    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"resourcesListChanged": True, "resourceSubscriptions": [uri]},
            "_meta": {SUBSCRIPTION_ID: 7},
        },
    }
    assert first == updated(uri, 7)
    assert second == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/list_changed",
        "params": {"_meta": {SUBSCRIPTION_ID: 7}},
    }


def test_requests_are_answered_while_a_listen_is_open_and_a_cancel_ends_it_silently(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = insert(migrated_engine, NOTES, "plan.md")
    process = spawn_server()
    listen(process, [f"{NOTES}/plan.md"])

    answered = process.request("tools/list", id=2)
    process.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "listen-1"}}
    )
    touch(migrated_engine, note)
    after = process.request("tools/list", id=3)

    assert answered["id"] == 2 and "tools" in answered["result"]
    assert after["id"] == 3  # no closing result, no notification of the cancelled listen
    assert process.close() == 0


def test_another_principals_note_and_workspace_are_never_delivered(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("bob", BOBS)
    bobs = insert(migrated_engine, BOBS, "secret.md")
    mine = insert(migrated_engine, NOTES, "mine.md")
    process = spawn_server()
    ack = listen(process, [f"{BOBS}/secret.md", f"{NOTES}/mine.md"], listing=True)

    touch(migrated_engine, bobs)
    insert(migrated_engine, BOBS, "another.md")
    mine = touch(migrated_engine, mine)  # the marker
    first = process.read()
    touch(migrated_engine, mine)  # again: a leak coalesced with the first marker shows here
    second = process.read()

    assert ack["params"]["notifications"]["resourceSubscriptions"] == [
        f"{BOBS}/secret.md",
        f"{NOTES}/mine.md",
    ]
    assert first == updated(f"{NOTES}/mine.md")
    assert second == updated(f"{NOTES}/mine.md")


def test_a_grant_revoked_mid_stream_stops_delivery_at_once(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    note, other = insert(migrated_engine, NOTES, "a.md"), insert(migrated_engine, WORK, "b.md")
    process = spawn_server()
    listen(process, [f"{NOTES}/a.md", f"{WORK}/b.md"])

    note = touch(migrated_engine, note)
    before = process.read()
    with write_tx(migrated_engine) as conn:
        assert grants.revoke(conn, "alice", NOTES)
    touch(migrated_engine, note)
    touch(migrated_engine, other)  # the marker

    assert before == updated(f"{NOTES}/a.md")
    assert process.read() == updated(f"{WORK}/b.md")


def test_more_uris_than_the_limit_are_refused_clearly(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    process = spawn_server()
    uris = [f"{NOTES}/n{i}.md" for i in range(10_000)]

    refused = listen(process, uris, id=5)
    still = process.request("tools/list", id=6)

    assert refused["id"] == 5
    assert refused["error"]["code"] == -32602
    assert refused["error"]["message"] == (
        f"Too many resource subscriptions: at most {MAX_URIS} URIs per listen"
    )
    assert refused["error"]["data"] == {"limit": MAX_URIS, "requested": 10_000}
    assert still["id"] == 6


@pytest.mark.parametrize(
    ("notifications", "message"),
    [
        (None, "Invalid params: notifications must be an object"),
        (
            {"resourcesListChanged": "yes"},
            "Invalid params: notifications.resourcesListChanged must be a boolean",
        ),
        ({"resourceSubscriptions": ["https://example.com/x"]}, "Invalid params: not a note URI"),
    ],
)
def test_a_malformed_filter_is_invalid_params(
    spawn_server: Spawn, migrated_engine: Engine, notifications: Any, message: str
) -> None:
    process = spawn_server()
    params = {} if notifications is None else {"notifications": notifications}
    process.send(make_request("subscriptions/listen", params, id=1))

    reply = process.read()

    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == message
