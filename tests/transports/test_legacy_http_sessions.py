"""2025-era Streamable HTTP sessions, in-process through two ASGI apps on one database (two
"workers"): the handshake, the session header rules, principal binding, DELETE, and the
legacy requests translated through the adapter."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.compat_2025.session import LegacyHandler
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.sessions import SqlLegacySessions
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services, utc_now
from tests.transports.http_support import LOOPBACK_URL
from tests.transports.subscription_support import insert, touch

NOTES = "file:///home/alice/notes"
BASE = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
NOT_INITIALIZED = (
    "Invalid params: put params._meta with io.modelcontextprotocol/protocolVersion on every "
    "request (MCP 2026-07-28), or send initialize first (MCP 2025-11-25)"
)
SESSION_ID = re.compile(r"[\x21-\x7e]{40,}")


class Clock:
    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now


@dataclasses.dataclass
class Host:
    """A 2025-era client over HTTP: one token, at most one session."""

    client: TestClient
    token: str
    session: str | None = None
    version: str | None = None
    ids: int = 0

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {**BASE, "Authorization": f"Bearer {self.token}"}
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        if self.version is not None:
            headers["MCP-Protocol-Version"] = self.version
        return {**headers, **extra}

    def post(self, message: dict[str, Any], **extra: str) -> httpx.Response:
        return self.client.post("/mcp", content=json.dumps(message), headers=self.headers(**extra))

    def send(self, method: str, params: dict[str, Any] | None = None, **extra: str) -> Any:
        self.ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            message["params"] = params
        return self.post(message, **extra)

    def initialize(self, version: str = "2025-11-25", caps: Any = None) -> httpx.Response:
        params = {
            "protocolVersion": version,
            "capabilities": {"elicitation": {}} if caps is None else caps,
            "clientInfo": {"name": "legacy-http-test", "version": "1"},
        }
        response = self.send("initialize", params)
        self.session = response.headers.get("mcp-session-id")
        self.version = response.json()["result"]["protocolVersion"]
        return response

    def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        response = self.send(method, params)
        assert response.status_code == 200, response.text
        return response.json()["result"]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def workers(
    settings: Settings, migrated_engine: Engine, clock: Clock, grant: Any
) -> Iterator[tuple[TestClient, TestClient]]:
    """Two apps (as two worker processes would build them) on one database."""
    grant("alice", NOTES)
    # A short confirmation lifetime bounds how long a stream may wait for an answer here.
    settings = dataclasses.replace(
        settings, tools_modules=("tests.transports.http_support",), state_ttl=5.0
    )
    clients = []
    for _ in range(2):
        services = Services(settings, engine=migrated_engine, clock=clock)
        app = create_http_app(settings, HttpSettings(), services)
        clients.append(TestClient(app, base_url=LOOPBACK_URL))
    with clients[0] as first, clients[1] as second:
        yield first, second


@pytest.fixture
def tokens(migrated_engine: Engine) -> dict[str, str]:
    records = SqlTokenRecords(migrated_engine)
    return {name: create_token(records, name)[1] for name in ("alice", "bob")}


@pytest.fixture
def alice(workers: tuple[TestClient, TestClient], tokens: dict[str, str]) -> Host:
    return Host(workers[0], tokens["alice"])


def assert_error(response: httpx.Response, status: int, code: int, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"] == {"code": code, "message": message}


def test_initialize_without_meta_starts_a_session_with_a_random_id(
    alice: Host, migrated_engine: Engine
) -> None:
    first = alice.initialize()
    second_id = Host(alice.client, alice.token).initialize().headers["mcp-session-id"]

    assert first.status_code == 200
    result = first.json()["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "notes-server"
    assert "resultType" not in result
    assert alice.session is not None and SESSION_ID.fullmatch(alice.session)
    assert second_id != alice.session
    with migrated_engine.connect() as conn:
        stored = conn.execute(text("SELECT session_hash, principal FROM legacy_sessions")).all()
    assert (hashlib.sha256(alice.session.encode()).hexdigest(), "alice") in stored
    assert all(alice.session not in row[0] for row in stored)


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26")],
)
def test_every_2025_handshake_is_accepted(alice: Host, requested: str, negotiated: str) -> None:
    response = alice.initialize(requested)

    assert response.json()["result"]["protocolVersion"] == negotiated
    assert "tools" in alice.result("tools/list")


def test_a_session_opened_on_one_worker_is_served_by_another(
    workers: tuple[TestClient, TestClient], alice: Host
) -> None:
    alice.initialize()
    alice.client = workers[1]

    tools = alice.result("tools/list")["tools"]

    assert "notes_delete" in [tool["name"] for tool in tools]
    assert all("resultType" not in tool for tool in tools)


def test_a_request_without_meta_or_session_is_told_what_to_do(alice: Host) -> None:
    response = alice.send("tools/list")

    assert_error(response, 400, -32602, NOT_INITIALIZED)
    assert response.json()["id"] == 1


def test_an_unknown_session_is_404(alice: Host) -> None:
    alice.session, alice.version = "not-a-session", "2025-11-25"

    response = alice.send("tools/list")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32600
    assert "initialize" in response.json()["error"]["message"]


def test_another_principals_token_with_a_valid_session_id_gets_404(
    alice: Host, tokens: dict[str, str]
) -> None:
    alice.initialize()
    bob = Host(alice.client, tokens["bob"], alice.session, alice.version)

    assert bob.send("tools/list").status_code == 404
    assert bob.client.delete("/mcp", headers=bob.headers()).status_code == 404
    assert alice.send("tools/list").status_code == 200


def test_an_expired_session_is_404(alice: Host, clock: Clock) -> None:
    alice.initialize()
    clock.now += timedelta(hours=25)

    assert alice.send("tools/list").status_code == 404


def test_a_session_in_use_stays_alive_past_its_first_expiry(alice: Host, clock: Clock) -> None:
    alice.initialize()
    clock.now += timedelta(hours=23)
    assert alice.send("tools/list").status_code == 200
    clock.now += timedelta(hours=23)

    assert alice.send("tools/list").status_code == 200


def test_a_repeated_session_header_is_400(alice: Host) -> None:
    alice.initialize()
    message = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
    headers = [*alice.headers().items(), ("Mcp-Session-Id", "other")]

    response = alice.client.post("/mcp", content=json.dumps(message), headers=headers)

    assert response.status_code == 400
    assert "more than once" in response.json()["error"]["message"]


def test_delete_ends_the_session(alice: Host) -> None:
    alice.initialize()

    ended = alice.client.delete("/mcp", headers=alice.headers())
    after = alice.send("tools/list")
    again = alice.client.delete("/mcp", headers=alice.headers())

    assert ended.status_code == 204
    assert after.status_code == 404
    assert again.status_code == 404


def test_a_protocol_version_header_other_than_the_negotiated_one_is_400(alice: Host) -> None:
    alice.initialize("2025-06-18")

    response = alice.send("tools/list", **{"MCP-Protocol-Version": "2025-11-25"})

    assert response.status_code == 400
    assert "2025-06-18" in response.json()["error"]["message"]


def test_a_2025_03_26_client_may_omit_the_protocol_version_header(alice: Host) -> None:
    alice.initialize("2025-03-26")
    alice.version = None

    assert "tools" in alice.result("tools/list")


def test_notifications_in_a_session_are_accepted(alice: Host) -> None:
    alice.initialize()

    response = alice.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    assert response.status_code == 202 and response.content == b""


def test_tools_and_resources_work_in_a_legacy_session(alice: Host) -> None:
    alice.initialize()
    args = {"workspaceUri": NOTES, "title": "Plan"}

    created = alice.result("tools/call", {"name": "notes_create", "arguments": args})
    found = alice.result(
        "tools/call", {"name": "notes_search", "arguments": {"workspaceUri": NOTES}}
    )
    listed = alice.result("resources/list")
    missing = alice.send("resources/read", {"uri": f"{NOTES}/nope.md"})
    pinged = alice.result("ping")

    assert created["isError"] is False and "resultType" not in created
    assert [note["title"] for note in found["structuredContent"]["notes"]] == ["Plan"]
    assert "resources" in listed
    assert missing.json()["error"]["code"] == -32002
    assert pinged == {}


def test_a_destructive_tool_without_elicitation_gets_a_tool_error_not_a_stream(alice: Host) -> None:
    alice.initialize(caps={})
    alice.result(
        "tools/call",
        {"name": "notes_create", "arguments": {"workspaceUri": NOTES, "title": "Keep"}},
    )

    response = alice.send(
        "tools/call",
        {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": "Keep"}},
    )

    assert response.headers["content-type"] == "application/json"
    result = response.json()["result"]
    assert result["isError"] is True
    assert "elicitation" in result["content"][0]["text"]


def test_a_modern_request_ignores_a_session_header(alice: Host) -> None:
    alice.initialize()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    response = alice.send(
        "server/discover",
        {"_meta": meta},
        **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
    )

    assert response.status_code == 200
    assert response.json()["result"]["resultType"] == "complete"
    assert "mcp-session-id" not in response.headers


def test_a_get_naming_2026_07_28_stays_405(alice: Host) -> None:
    alice.initialize()

    response = alice.client.get(
        "/mcp", headers=alice.headers(**{"MCP-Protocol-Version": "2026-07-28"})
    )

    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_a_get_without_a_session_id_is_400(alice: Host) -> None:
    response = alice.client.get("/mcp", headers=alice.headers())

    assert_error(
        response,
        400,
        -32600,
        "Bad Request: GET /mcp opens a 2025-11-25 session's stream and needs one "
        "Mcp-Session-Id header",
    )


def test_a_get_of_an_unknown_session_is_404(alice: Host) -> None:
    alice.initialize()
    alice.session = "no-such-session"

    response = alice.client.get("/mcp", headers=alice.headers())

    assert_error(
        response,
        404,
        -32600,
        "Session not found: it ended or expired; send initialize to start a new one",
    )


def test_a_get_that_does_not_accept_an_event_stream_is_406(alice: Host) -> None:
    alice.initialize()

    response = alice.client.get("/mcp", headers=alice.headers(Accept="application/json"))

    assert_error(response, 406, -32600, "Not Acceptable: GET /mcp needs Accept: text/event-stream")


@pytest.mark.parametrize(
    "last_event_id",
    ["garbage", "g0000000z-1-0", "g12345678-1-0-0", "g12345678-" + "9" * 40, "FOREIGN", "AHEAD"],
)
def test_a_last_event_id_not_of_this_sessions_stream_is_400(
    alice: Host,
    workers: tuple[TestClient, TestClient],
    tokens: dict[str, str],
    migrated_engine: Engine,
    last_event_id: str,
) -> None:
    from notes_server.compat_2025.http_sessions import session_hash
    from notes_server.compat_2025.session_events import stream_tag

    alice.initialize()
    own = stream_tag(session_hash(alice.session or ""))
    if last_event_id == "FOREIGN":  # a well-formed id of another session's stream
        other = Host(workers[1], tokens["alice"])
        other.initialize()
        last_event_id = f"g{stream_tag(session_hash(other.session or ''))}-0"
    if last_event_id == "AHEAD":  # this stream's shape, a change the log never had
        insert(migrated_engine, NOTES, "plan.md")
        last_event_id = f"g{own}-{10**12}-0"

    response = alice.client.get("/mcp", headers=alice.headers(**{"Last-Event-ID": last_event_id}))

    assert_error(
        response,
        400,
        -32600,
        "Bad Request: Last-Event-ID is not an event id of this session's GET stream; "
        "reconnect without it (and read the subscribed resources again)",
    )


def test_a_last_event_id_older_than_the_change_log_keeps_is_410(
    alice: Host, migrated_engine: Engine
) -> None:
    from notes_server.compat_2025.http_sessions import session_hash
    from notes_server.compat_2025.session_events import stream_tag

    alice.initialize()
    for name in ("a", "b", "c"):
        insert(migrated_engine, NOTES, f"{name}.md")
    with migrated_engine.begin() as conn:  # what the log's pruning trigger does to old rows
        conn.execute(
            text("DELETE FROM note_changes WHERE seq < (SELECT max(seq) FROM note_changes)")
        )
    last_event_id = f"g{stream_tag(session_hash(alice.session or ''))}-0-0"

    response = alice.client.get("/mcp", headers=alice.headers(**{"Last-Event-ID": last_event_id}))

    assert_error(
        response,
        410,
        -32600,
        "Gone: the change log no longer keeps the changes after this Last-Event-ID (it keeps "
        "24 hours, at most 100000 changes); reconnect without it and read the subscribed "
        "resources again",
    )


def test_subscribe_and_unsubscribe_answer_empty_results(alice: Host) -> None:
    alice.initialize()

    assert alice.result("resources/subscribe", {"uri": f"{NOTES}/plan.md"}) == {}
    assert alice.result("resources/subscribe", {"uri": f"{NOTES}/plan.md"}) == {}
    assert alice.result("resources/unsubscribe", {"uri": f"{NOTES}/plan.md"}) == {}
    assert alice.result("resources/unsubscribe", {"uri": f"{NOTES}/never.md"}) == {}


def test_a_subscription_to_no_note_uri_is_invalid_params(alice: Host) -> None:
    alice.initialize()

    response = alice.send("resources/subscribe", {"uri": "https://example.com/x"})

    assert response.status_code == 200
    assert response.json()["error"] == {
        "code": -32602,
        "message": "Invalid params: not a note URI",
        "data": {"uri": "https://example.com/x"},
    }


def test_past_the_per_session_cap_a_subscribe_is_refused(
    alice: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    from notes_server.compat_2025 import http_subscriptions

    monkeypatch.setattr(http_subscriptions, "MAX_URIS", 3)
    alice.initialize()
    for name in ("a", "b", "c"):
        assert alice.result("resources/subscribe", {"uri": f"{NOTES}/{name}.md"}) == {}

    refused = alice.send("resources/subscribe", {"uri": f"{NOTES}/d.md"})
    again = alice.send("resources/subscribe", {"uri": f"{NOTES}/a.md"})  # already counted

    assert refused.json()["error"] == {
        "code": -32602,
        "message": "Too many resource subscriptions: at most 3 URIs per session",
        "data": {"limit": 3},
    }
    assert again.json()["result"] == {}


def test_a_reader_that_stops_reading_is_dropped(
    alice: Host, migrated_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's send waits at most SEND_TIMEOUT_S for its reader (here one that never
    takes the first change's event); then the stream ends and its hold on the feed goes."""
    import asyncio

    from notes_server.compat_2025 import http_get_stream
    from notes_server.store.changes import feed

    monkeypatch.setattr(http_get_stream, "SEND_TIMEOUT_S", 0.5)
    note = insert(migrated_engine, NOTES, "plan.md")
    alice.initialize()
    assert alice.result("resources/subscribe", {"uri": f"{NOTES}/plan.md"}) == {}
    headers = [(k.lower().encode(), v.encode()) for k, v in alice.headers().items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8765"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }

    async def drive() -> list[bytes]:
        sent: list[bytes] = []
        primed = asyncio.Event()
        stuck = asyncio.Event()  # never set: the reader stopped reading

        async def receive() -> dict[str, Any]:
            await stuck.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            body = message.get("body", b"")
            if b"notifications/" in body:
                sent.append(body)
                await stuck.wait()
            if body.startswith(b"id: "):
                primed.set()

        task = asyncio.ensure_future(alice.client.app(scope, receive, send))
        await asyncio.wait_for(primed.wait(), 10)
        await asyncio.to_thread(touch, migrated_engine, note)
        await asyncio.wait_for(task, 20)  # the app returned: the stream was dropped
        return sent

    attempted = asyncio.run(drive())

    assert len(attempted) == 1 and b"notifications/resources/updated" in attempted[0]
    assert feed(migrated_engine).listeners() == 0


def test_a_cancel_that_overtakes_the_first_round_means_no_question_and_no_change(
    alice: Host,
) -> None:
    alice.initialize()
    args = {"workspaceUri": NOTES, "title": "Keep"}
    alice.result("tools/call", {"name": "notes_create", "arguments": args})
    cancel = {"requestId": alice.ids + 1, "reason": "changed my mind"}
    notice = alice.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})

    response = alice.send("tools/call", {"name": "notes_delete", "arguments": args})
    found = alice.result(
        "tools/call", {"name": "notes_search", "arguments": {"workspaceUri": NOTES}}
    )

    assert notice.status_code == 202
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content == b""
    assert [note["title"] for note in found["structuredContent"]["notes"]] == ["Keep"]


def test_on_embedded_sqlite_session_lookups_skip_the_worker_threads(
    alice: Host, migrated_engine: Engine, store_impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One indexed read on the thread's held connection: run where the request is, as quick
    modern reads are; on a database server (or Core-only) it stays in a worker thread."""
    threads: list[str] = []
    lookup = SqlLegacySessions.lookup

    def watched(self: SqlLegacySessions, *args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return lookup(self, *args)

    monkeypatch.setattr(SqlLegacySessions, "lookup", watched)
    alice.initialize()
    assert alice.send("tools/list").status_code == 200
    answer = {"jsonrpc": "2.0", "id": "s-0123456789abcdef", "result": {"action": "decline"}}
    assert alice.post(answer).status_code == 202

    embedded = migrated_engine.dialect.name == "sqlite" and store_impl == "auto"
    in_workers = [name.startswith("notes-http") for name in threads]
    assert len(threads) == 2
    assert in_workers == [not embedded, not embedded]


def test_on_embedded_sqlite_quick_requests_in_a_session_skip_the_worker_threads(
    alice: Host, migrated_engine: Engine, store_impl: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tools/list` and `notes_read` (the requests the server marks as quick) run where the
    request is; a write, or a call whose workspace must first be looked up, in a worker."""
    threads: dict[str, str] = {}
    start = LegacyHandler.start  # a request's first round: prepared, then through the core

    def watched(self: LegacyHandler, request: Any, *args: Any) -> Any:
        name = request.params.get("name", request.method)
        threads[name] = threading.current_thread().name
        return start(self, request, *args)

    monkeypatch.setattr(LegacyHandler, "start", watched)
    alice.initialize()
    alice.result("tools/list")
    created = alice.result(
        "tools/call",
        {"name": "notes_create", "arguments": {"workspaceUri": NOTES, "title": "Quick"}},
    )
    note_id = created["structuredContent"]["note"]["id"]
    read = {"workspaceUri": NOTES, "noteId": note_id}
    assert not alice.result("tools/call", {"name": "notes_read", "arguments": read})["isError"]
    alice.result("tools/call", {"name": "notes_search", "arguments": {}})

    # notes_read runs on the loop where the store's reads do (store.engine.runs_on_loop)
    embedded = migrated_engine.dialect.name == "sqlite" and store_impl == "auto"
    asked = ("tools/list", "notes_create", "notes_read", "notes_search")
    in_workers = {name: threads[name].startswith("notes-http") for name in asked}
    assert in_workers == {
        "tools/list": False,
        "notes_create": True,
        "notes_read": not embedded,
        "notes_search": True,
    }


def test_expired_sessions_and_cancellations_are_swept_on_a_timer_without_new_sessions(
    settings: Settings,
    migrated_engine: Engine,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from notes_server.compat_2025 import http_sessions

    swept = threading.Event()
    real_sweep = SqlLegacySessions.sweep

    def observed(self: SqlLegacySessions, now: datetime) -> int:
        count = real_sweep(self, now)
        swept.set()
        return count

    monkeypatch.setattr(http_sessions, "SWEEP_EVERY_S", 0.05)
    monkeypatch.setattr(SqlLegacySessions, "sweep", observed)
    repo = SqlLegacySessions(migrated_engine, timedelta(hours=24))
    old = clock.now - timedelta(days=2)
    repo.create("old", http_sessions.SessionRecord("alice", "2025-11-25", "{}", None, old), old)
    for i in range(20):
        repo.cancel("old", f"never-asked-{i}", old + timedelta(minutes=1))
    services = Services(settings, engine=migrated_engine, clock=clock)

    with TestClient(create_http_app(settings, HttpSettings(), services), base_url=LOOPBACK_URL):
        assert swept.wait(timeout=30)  # no request at all: the timer alone

    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM legacy_sessions")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM legacy_questions")).scalar() == 0


def test_past_the_per_principal_cap_the_least_recently_used_session_ends(
    workers: tuple[TestClient, TestClient], tokens: dict[str, str], clock: Clock
) -> None:
    from notes_server.store.sessions import MAX_SESSIONS_PER_PRINCIPAL

    hosts = [Host(workers[i % 2], tokens["alice"]) for i in range(MAX_SESSIONS_PER_PRINCIPAL + 1)]
    for host in hosts:
        clock.now += timedelta(seconds=1)  # each session opened (and so used) later
        assert host.initialize().status_code == 200

    evicted = hosts[0].send("tools/list")
    kept = hosts[1].send("tools/list")

    assert evicted.status_code == 404
    assert kept.status_code == 200
