"""A 2025-11-25 HTTP session's GET stream, through real `serve --transport http` processes on
one database (SQLite file, or PostgreSQL with NOTES_SERVER_TEST_DB=postgresql): subscriptions
made at one instance are served by the stream at another, changes made by other processes
arrive as `notifications/resources/updated`, a reconnect with `Last-Event-ID` (at either
instance) gets exactly what it missed, a revoked grant stops delivery, DELETE and a newer GET
end the stream.

"Nothing else arrived" is shown without waiting for silence: after the changes a test expects,
it changes a marker note the session also subscribed to, and the marker's event must be the
very next one.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.security.tokens import create_token
from notes_server.store import grants
from notes_server.store.engine import write_tx
from notes_server.store.tokens import SqlTokenRecords
from tests.transports.http_support import (
    SHARED_STATE_KEYS,
    HttpServer,
    LegacyHttpHost,
    server_instances,
    sse_events,
)
from tests.transports.subscription_support import insert, touch

NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
BOBS = "file:///home/bob/notes"
EVENT_WAIT_S = 20.0
EVENT_ID = re.compile(r"g[0-9a-f]{8}-[0-9]+(-[0-9]+)?")


class Event(NamedTuple):
    id: str | None
    message: dict[str, Any] | None  # None: the priming event (an id, no data)


class Stream:
    """One open GET stream, read by a thread into a queue (None at its end)."""

    def __init__(self, host: LegacyHttpHost, server: HttpServer, last: str | None = None):
        headers = {**host.headers(), "Accept": "text/event-stream"}
        if last is not None:
            headers["Last-Event-ID"] = last
        self.client = httpx.Client(timeout=httpx.Timeout(60, read=None))
        self.context = self.client.stream("GET", f"{server.url}/mcp", headers=headers)
        self.response = self.context.__enter__()
        self.events: queue.Queue[Event | None] = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        if self.response.status_code == 200:
            self.thread.start()

    def _read(self) -> None:
        try:
            for fields in sse_events(self.response.iter_lines()):
                data = fields.get("data", "")
                self.events.put(Event(fields.get("id"), json.loads(data) if data else None))
        except httpx.HTTPError:
            pass
        finally:
            self.events.put(None)

    def next(self) -> Event | None:
        return self.events.get(timeout=EVENT_WAIT_S)

    def next_message(self) -> tuple[str, dict[str, Any]]:
        event = self.next()
        assert event is not None and event.message is not None, event
        assert event.id is not None and EVENT_ID.fullmatch(event.id), event
        return event.id, event.message

    def priming(self) -> str:
        event = self.next()
        assert event is not None and event.message is None and event.id is not None
        assert EVENT_ID.fullmatch(event.id)
        return event.id

    def close(self) -> None:
        self.context.__exit__(None, None, None)
        self.client.close()


def updated(uri: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}


LIST_CHANGED = {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}


class Host(LegacyHttpHost):
    def result(self, server: HttpServer, method: str, params: dict[str, Any]) -> Any:
        response = self.post(server, self.message(method, params))
        assert response.status_code == 200, response.text
        return response.json()

    def subscribe(self, server: HttpServer, uri: str) -> None:
        assert self.result(server, "resources/subscribe", {"uri": uri})["result"] == {}


@pytest.fixture
def instances(tmp_path: Path, migrated_engine: Engine, grant: Any) -> Iterator[list[HttpServer]]:
    grant("alice", NOTES)
    grant("alice", WORK)
    grant("bob", BOBS)
    url = migrated_engine.url.render_as_string(hide_password=False)
    env = {"NOTES_SERVER_STATE_KEYS": SHARED_STATE_KEYS}
    with server_instances(tmp_path, url, "--auth", "token", env=env) as servers:
        yield servers
        for server in servers:
            assert "Traceback" not in server.stderr_text()


@pytest.fixture
def alice(migrated_engine: Engine, instances: list[HttpServer]) -> Iterator[Host]:
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    host = Host(token, capabilities={})
    host.initialize(instances[0])
    yield host
    host.close()


def uri(workspace: str, path: str) -> str:
    return f"{workspace}/{path}"


def test_initialize_over_http_declares_subscribe_and_list_changed(
    migrated_engine: Engine, instances: list[HttpServer]
) -> None:
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    host = Host(token, capabilities={})

    reply = host.initialize(instances[0]).json()

    resources = reply["result"]["capabilities"]["resources"]
    assert resources["subscribe"] is True
    assert resources["listChanged"] is True
    host.close()


def test_a_change_by_another_process_reaches_the_get_stream_at_another_instance(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    note = insert(migrated_engine, NOTES, "plan.md")
    alice.subscribe(a, uri(NOTES, "plan.md"))
    stream = Stream(alice, b)
    assert stream.response.headers["content-type"] == "text/event-stream"
    stream.priming()

    touch(migrated_engine, note)  # this test process: neither instance

    event_id, message = stream.next_message()
    assert message == updated(uri(NOTES, "plan.md"))
    assert event_id.endswith("-0")
    stream.close()


def test_a_tool_call_at_one_instance_reaches_a_subscriber_at_the_other(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    note = insert(migrated_engine, NOTES, "plan.md")
    alice.subscribe(b, uri(NOTES, "plan.md"))
    stream = Stream(alice, b)
    stream.priming()
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    writer = Host(token, capabilities={})
    writer.initialize(a)

    arguments = {"workspaceUri": NOTES, "noteId": note.id, "body": "changed at A"}
    reply = writer.result(a, "tools/call", {"name": "notes_update", "arguments": arguments})

    assert "result" in reply and reply["result"].get("isError") is not True, reply
    assert stream.next_message()[1] == updated(uri(NOTES, "plan.md"))
    stream.close()
    writer.close()


def test_a_reconnect_with_last_event_id_at_another_instance_gets_exactly_what_it_missed(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    plan = insert(migrated_engine, NOTES, "plan.md")
    marker = insert(migrated_engine, WORK, "marker.md")
    alice.subscribe(a, uri(NOTES, "plan.md"))
    alice.subscribe(a, uri(WORK, "marker.md"))
    first = Stream(alice, a)
    first.priming()
    plan = touch(migrated_engine, plan)
    last_seen, message = first.next_message()
    assert message == updated(uri(NOTES, "plan.md"))
    first.close()

    # While nobody listens: two more changes of the note and a new note (a listing change).
    plan = touch(migrated_engine, plan)
    touch(migrated_engine, plan)
    insert(migrated_engine, NOTES, "new.md")
    again = Stream(alice, b, last=last_seen)
    again.priming()
    touch(migrated_engine, marker)

    received = [again.next_message() for _ in range(4)]
    assert [m for _, m in received] == [
        updated(uri(NOTES, "plan.md")),
        updated(uri(NOTES, "plan.md")),
        LIST_CHANGED,
        updated(uri(WORK, "marker.md")),
    ]
    ids = [last_seen, *(i for i, _ in received)]
    assert len(set(ids)) == len(ids)
    again.close()


def test_a_reconnect_from_the_priming_event_gets_the_changes_made_since(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    plan = insert(migrated_engine, NOTES, "plan.md")
    alice.subscribe(a, uri(NOTES, "plan.md"))
    first = Stream(alice, a)
    primed = first.priming()
    first.close()

    touch(migrated_engine, plan)
    again = Stream(alice, b, last=primed)
    again.priming()

    assert again.next_message()[1] == updated(uri(NOTES, "plan.md"))
    again.close()


def test_a_revoked_grant_stops_delivery_about_its_workspace(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    plan = insert(migrated_engine, NOTES, "plan.md")
    marker = insert(migrated_engine, WORK, "marker.md")
    alice.subscribe(a, uri(NOTES, "plan.md"))
    alice.subscribe(a, uri(WORK, "marker.md"))
    stream = Stream(alice, b)
    stream.priming()
    plan = touch(migrated_engine, plan)
    assert stream.next_message()[1] == updated(uri(NOTES, "plan.md"))

    with write_tx(migrated_engine) as conn:
        grants.revoke(conn, "alice", NOTES)
    touch(migrated_engine, plan)
    touch(migrated_engine, marker)

    assert stream.next_message()[1] == updated(uri(WORK, "marker.md"))
    stream.close()


def test_another_principals_note_is_accepted_and_never_delivered(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    bobs = insert(migrated_engine, BOBS, "secret.md")
    marker = insert(migrated_engine, WORK, "marker.md")
    alice.subscribe(a, uri(BOBS, "secret.md"))  # `{}` as on stdio: it tells nothing
    alice.subscribe(a, uri(WORK, "marker.md"))
    stream = Stream(alice, b)
    stream.priming()

    touch(migrated_engine, bobs)
    touch(migrated_engine, marker)

    assert stream.next_message()[1] == updated(uri(WORK, "marker.md"))
    stream.close()


def test_delete_of_the_session_ends_its_stream(alice: Host, instances: list[HttpServer]) -> None:
    a, _ = instances
    stream = Stream(alice, a)
    stream.priming()

    response = alice.http.delete(f"{a.url}/mcp", headers=alice.headers())

    assert response.status_code == 204
    assert stream.next() is None
    stream.close()


def test_a_newer_get_replaces_the_older_stream(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, _ = instances
    plan = insert(migrated_engine, NOTES, "plan.md")
    alice.subscribe(a, uri(NOTES, "plan.md"))
    older = Stream(alice, a)
    older.priming()

    newer = Stream(alice, a)
    newer.priming()
    assert older.next() is None  # ended, nothing sent on it

    touch(migrated_engine, plan)
    assert newer.next_message()[1] == updated(uri(NOTES, "plan.md"))
    older.close()
    newer.close()


def test_unsubscribe_stops_a_notes_updates(
    alice: Host, instances: list[HttpServer], migrated_engine: Engine
) -> None:
    a, b = instances
    plan = insert(migrated_engine, NOTES, "plan.md")
    marker = insert(migrated_engine, WORK, "marker.md")
    alice.subscribe(a, uri(NOTES, "plan.md"))
    alice.subscribe(a, uri(WORK, "marker.md"))
    stream = Stream(alice, b)
    stream.priming()

    reply = alice.result(b, "resources/unsubscribe", {"uri": uri(NOTES, "plan.md")})
    touch(migrated_engine, plan)
    touch(migrated_engine, marker)

    assert reply["result"] == {}
    assert stream.next_message()[1] == updated(uri(WORK, "marker.md"))
    stream.close()
