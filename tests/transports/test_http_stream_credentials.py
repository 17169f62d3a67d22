"""An open stream is no longer than its credential: a real `serve --transport http --auth
token` checks the bearer token of an open 2025-11-25 GET stream or 2026-07-28
`subscriptions/listen` again before each delivery. A token revoked by another process, or
one whose expiry has passed, ends the stream with the next change, which it is not sent, or
at its next keep-alive when nothing changes: the GET stream's response completes, the listen
gets its closing result. Another open stream of the same principal with another token is
unaffected and is sent the change.

The change that triggers the delivery is written by this test process (not the server), so
the server learns it through the database, as it would from any other process.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.features.subscriptions.hub import SUBSCRIPTION_ID
from notes_server.security.tokens import create_token, utc_now
from notes_server.store import tokens
from notes_server.store.engine import write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.transports.http.listen import KEEPALIVE_S
from tests.helpers import make_request
from tests.transports.http_support import (
    CLEAN,
    HttpServer,
    LegacyHttpHost,
    SseReader,
    mcp_headers,
    rpc,
    token_server,
)
from tests.transports.subscription_support import insert, touch

NOTES = "file:///home/alice/notes"
PLAN = f"{NOTES}/plan.md"
EXPIRES_IN = timedelta(seconds=5)
REFUSAL_WAIT_S = 60.0
KEEPALIVE_WAIT_S = KEEPALIVE_S + 20.0


@pytest.fixture
def server(tmp_path: Path, migrated_engine: Engine, grant: Any) -> Iterator[HttpServer]:
    grant("alice", NOTES)
    with token_server(tmp_path, str(migrated_engine.url)) as started:
        yield started


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(60, read=None)) as http:
        yield http


def revoke(engine: Engine, token_id: int) -> None:
    with write_tx(engine) as conn:
        assert tokens.revoke(conn, token_id, utc_now())


def status_of(server: HttpServer, token: str) -> int:
    body, headers = rpc("server/discover")
    headers["Authorization"] = f"Bearer {token}"
    return httpx.post(f"{server.url}/mcp", content=body, headers=headers, timeout=30).status_code


def wait_until_refused(server: HttpServer, token: str) -> None:
    """Until a plain request with `token` is 401 (its expiry has passed by the server's clock)."""
    deadline = time.monotonic() + REFUSAL_WAIT_S
    while status_of(server, token) != 401:
        assert time.monotonic() < deadline, "the token was never refused"


def get_stream(server: HttpServer, client: httpx.Client, token: str) -> SseReader:
    host = LegacyHttpHost(token, capabilities={})
    host.initialize(server)
    reply = host.post(server, host.message("resources/subscribe", {"uri": PLAN}))
    assert reply.json()["result"] == {}
    headers = {**host.headers(), "Accept": "text/event-stream"}
    host.close()
    stream = SseReader(client, client.build_request("GET", f"{server.url}/mcp", headers=headers))
    priming = stream.next()
    assert isinstance(priming, dict) and not priming.get("data"), priming
    return stream


def listen(server: HttpServer, client: httpx.Client, token: str, tag: str) -> SseReader:
    message = make_request(
        "subscriptions/listen", {"notifications": {"resourceSubscriptions": [PLAN]}}, id=tag
    )
    headers = {**mcp_headers(message), "Authorization": f"Bearer {token}"}
    request = client.build_request("POST", f"{server.url}/mcp", json=message, headers=headers)
    stream = SseReader(client, request)
    assert stream.message()["method"] == "notifications/subscriptions/acknowledged"
    return stream


def closing_result(tag: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": tag,
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: tag}},
    }


def updated_2025() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": PLAN}}


def test_a_token_revoked_while_its_get_stream_is_open_ends_it_before_the_next_delivery(
    server: HttpServer, client: httpx.Client, migrated_engine: Engine
) -> None:
    note = insert(migrated_engine, NOTES, "plan.md")
    revoked_id, revoked = create_token(SqlTokenRecords(migrated_engine), "alice")
    _, kept = create_token(SqlTokenRecords(migrated_engine), "alice")
    ending, staying = get_stream(server, client, revoked), get_stream(server, client, kept)

    revoke(migrated_engine, revoked_id)
    touch(migrated_engine, note)

    assert ending.next() == CLEAN  # the response completed, no event before it
    assert staying.message() == updated_2025()


def test_a_token_expired_while_its_get_stream_is_open_ends_it_before_the_next_delivery(
    server: HttpServer, client: httpx.Client, migrated_engine: Engine
) -> None:
    note = insert(migrated_engine, NOTES, "plan.md")
    _, expiring = create_token(SqlTokenRecords(migrated_engine), "alice", expires_in=EXPIRES_IN)
    stream = get_stream(server, client, expiring)

    wait_until_refused(server, expiring)
    touch(migrated_engine, note)

    assert stream.next() == CLEAN


def test_a_token_revoked_while_its_listen_is_open_ends_it_with_the_closing_result(
    server: HttpServer, client: httpx.Client, migrated_engine: Engine
) -> None:
    note = insert(migrated_engine, NOTES, "plan.md")
    revoked_id, revoked = create_token(SqlTokenRecords(migrated_engine), "alice")
    _, kept = create_token(SqlTokenRecords(migrated_engine), "alice")
    ending = listen(server, client, revoked, "listen-revoked")
    staying = listen(server, client, kept, "listen-kept")

    revoke(migrated_engine, revoked_id)
    touch(migrated_engine, note)

    assert ending.message() == closing_result("listen-revoked")
    assert ending.next() == CLEAN
    updated = staying.message()
    assert updated["method"] == "notifications/resources/updated"
    assert updated["params"] == {"uri": PLAN, "_meta": {SUBSCRIPTION_ID: "listen-kept"}}


def test_a_token_expired_while_its_listen_is_open_ends_it_with_the_closing_result(
    server: HttpServer, client: httpx.Client, migrated_engine: Engine
) -> None:
    note = insert(migrated_engine, NOTES, "plan.md")
    _, expiring = create_token(SqlTokenRecords(migrated_engine), "alice", expires_in=EXPIRES_IN)
    stream = listen(server, client, expiring, "listen-1")

    wait_until_refused(server, expiring)
    touch(migrated_engine, note)

    assert stream.message() == closing_result("listen-1")
    assert stream.next() == CLEAN


def test_streams_of_a_revoked_token_end_at_their_next_keep_alive_without_any_change(
    server: HttpServer, client: httpx.Client, migrated_engine: Engine
) -> None:
    """Slow: the keep-alive comes after 15 s of silence (both streams wait together)."""
    insert(migrated_engine, NOTES, "plan.md")
    revoked_id, revoked = create_token(SqlTokenRecords(migrated_engine), "alice")
    stream = get_stream(server, client, revoked)
    listening = listen(server, client, revoked, "listen-1")

    revoke(migrated_engine, revoked_id)

    assert stream.next(KEEPALIVE_WAIT_S) == CLEAN
    assert listening.message(KEEPALIVE_WAIT_S) == closing_result("listen-1")
    assert listening.next() == CLEAN
