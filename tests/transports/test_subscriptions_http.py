"""`subscriptions/listen` over HTTP, in process: the POST's response is an SSE stream that
starts with the acknowledgement and carries a change committed on another connection; a
revoked grant stops delivery; the client closing the response closes the listen; refusals
are plain JSON errors. The ASGI app is driven directly (a streamed response never ends by
itself, which a buffering test client would wait for)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.features.subscriptions.hub import MAX_URIS, SUBSCRIPTION_ID, hub_of
from notes_server.store import grants
from notes_server.store.engine import make_engine, write_tx
from notes_server.tools.services import Services
from tests.helpers import make_request
from tests.transports.subscription_support import insert, touch

Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
TIMEOUT_S = 10.0


class Exchange:
    """One POST to /mcp driven by hand: the messages the app sends, and a disconnect."""

    def __init__(self, app: Any, message: dict[str, Any]) -> None:
        self.app = app
        self.body = json.dumps(message).encode()
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.leave = asyncio.Event()
        self._body_read = False
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        headers = [
            (b"host", b"127.0.0.1:8765"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"mcp-protocol-version", b"2026-07-28"),
            (b"mcp-method", b"subscriptions/listen"),
            (b"content-length", str(len(self.body)).encode()),
        ]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8765),
        }
        self.task = asyncio.ensure_future(self.app(scope, self.receive, self.send))

    async def receive(self) -> dict[str, Any]:
        if not self._body_read:
            self._body_read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.leave.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        await self.sent.put(message)

    async def next(self) -> dict[str, Any]:
        return await asyncio.wait_for(self.sent.get(), TIMEOUT_S)

    async def event(self) -> dict[str, Any]:
        """The next SSE event's JSON-RPC message (keep-alive comments skipped)."""
        while True:
            chunk = await self.next()
            body = chunk["body"]
            if body.startswith(b"event: message\ndata: "):
                parsed: dict[str, Any] = json.loads(body.split(b"data: ", 1)[1])
                return parsed

    async def disconnect(self) -> None:
        self.leave.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, TIMEOUT_S)


def build_app(settings: Settings, engine: Engine) -> tuple[Any, Services]:
    services = Services(settings, engine=engine)
    return create_http_app(settings, HttpSettings(auth="none"), services), services


def listen_request(uris: list[str], id: Any = "l1") -> dict[str, Any]:
    return make_request(
        "subscriptions/listen",
        {"notifications": {"resourceSubscriptions": uris, "resourcesListChanged": True}},
        id=id,
    )


def test_a_listen_streams_the_ack_then_changes_then_ends_when_the_client_leaves(
    settings: Settings, migrated_engine: Engine, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = insert(migrated_engine, NOTES, "plan.md")
    uri = f"{NOTES}/plan.md"
    app, _ = build_app(settings, migrated_engine)
    other = make_engine(migrated_engine.url.render_as_string(hide_password=False))

    async def scenario() -> tuple[dict[str, Any], ...]:
        exchange = Exchange(app, listen_request([uri]))
        exchange.start()
        start = await exchange.next()
        ack = await exchange.event()
        await asyncio.to_thread(touch, other, note)
        changed = await exchange.event()
        await asyncio.to_thread(insert, other, NOTES, "new.md")
        listed = await exchange.event()
        await exchange.disconnect()
        return start, ack, changed, listed

    try:
        start, ack, changed, listed = asyncio.run(scenario())
    finally:
        other.dispose()

    assert start["status"] == 200
    assert dict(start["headers"])[b"content-type"] == b"text/event-stream"
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"] == {SUBSCRIPTION_ID: "l1"}
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": uri, "_meta": {SUBSCRIPTION_ID: "l1"}},
    }
    assert listed["method"] == "notifications/resources/list_changed"


def test_the_client_leaving_closes_the_listen(
    settings: Settings, migrated_engine: Engine, grant: Grant
) -> None:
    grant("alice", NOTES)
    app, services = build_app(settings, migrated_engine)

    async def scenario() -> tuple[int, int]:
        exchange = Exchange(app, listen_request([]))
        exchange.start()
        await exchange.next()
        await exchange.event()
        hub = hub_of(services)
        during = hub.open_count()
        await exchange.disconnect()
        return during, hub.open_count()

    assert asyncio.run(scenario()) == (1, 0)


def test_a_revoked_grant_stops_delivery_on_the_stream(
    settings: Settings, migrated_engine: Engine, grant: Grant
) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    note, marker = insert(migrated_engine, NOTES, "a.md"), insert(migrated_engine, WORK, "b.md")
    app, _ = build_app(settings, migrated_engine)

    def revoke() -> None:
        with write_tx(migrated_engine) as conn:
            grants.revoke(conn, "alice", NOTES)

    async def scenario() -> dict[str, Any]:
        exchange = Exchange(app, listen_request([f"{NOTES}/a.md", f"{WORK}/b.md"]))
        exchange.start()
        await exchange.next()
        await exchange.event()
        await asyncio.to_thread(revoke)
        await asyncio.to_thread(touch, migrated_engine, note)
        await asyncio.to_thread(touch, migrated_engine, marker)
        first = await exchange.event()
        await exchange.disconnect()
        return first

    assert asyncio.run(scenario())["params"]["uri"] == f"{WORK}/b.md"


def test_ten_thousand_uris_are_a_plain_json_error(
    settings: Settings, migrated_engine: Engine
) -> None:
    app, _ = build_app(settings, migrated_engine)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        exchange = Exchange(app, listen_request([f"{NOTES}/n{i}.md" for i in range(10_000)], 4))
        exchange.start()
        start, body = await exchange.next(), await exchange.next()
        return start, json.loads(body["body"])

    start, reply = asyncio.run(scenario())

    assert start["status"] == 200
    assert reply["id"] == 4
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"] == {"limit": MAX_URIS, "requested": 10_000}
