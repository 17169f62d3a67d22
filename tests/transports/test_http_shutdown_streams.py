"""SIGTERM or SIGINT ends the open long-lived responses of a `serve --transport http` process
at once, each cleanly, and the process exits: a 2026-07-28 `subscriptions/listen` gets its
closing result (`{"resultType": "complete", "_meta": {subscriptionId}}`, the spec's graceful
end) as its last event, a 2025-11-25 session's GET stream ends its response (the client
resumes with `Last-Event-ID`). Both responses complete (the chunked body's end arrives), which
a cut connection would not.

Without this the process waited for each stream's next keep-alive (15 s) before it could exit:
the deadline given to the exit here is half of that, so a server that waits fails.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.features.subscriptions.hub import SUBSCRIPTION_ID
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.transports.http.listen import KEEPALIVE_S
from tests.helpers import make_request
from tests.transports.http_support import (
    CLEAN,
    HttpServer,
    LegacyHttpHost,
    SseReader,
    mcp_headers,
    start_http_server,
)

NOTES = "file:///home/alice/notes"
EXIT_DEADLINE_S = KEEPALIVE_S / 2
EXIT_STATUS = {signal.SIGTERM: -signal.SIGTERM, signal.SIGINT: 1}


@pytest.fixture
def token(migrated_engine: Engine, grant: Any) -> str:
    grant("alice", NOTES)
    return create_token(SqlTokenRecords(migrated_engine), "alice")[1]


@pytest.fixture
def server(tmp_path: Path, migrated_engine: Engine, token: str) -> Iterator[HttpServer]:
    started = start_http_server(tmp_path, str(migrated_engine.url), "--auth", "token")
    yield started
    started.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=httpx.Timeout(60, read=None)) as http:
        yield http


def stop_with(server: HttpServer, signum: int) -> int:
    """Send `signum`; the exit status, which must come within EXIT_DEADLINE_S."""
    server.proc.send_signal(signum)
    try:
        return server.proc.wait(timeout=EXIT_DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server had not exited {EXIT_DEADLINE_S} s after signal {signum}")


def assert_graceful_exit(server: HttpServer, status: int, signum: int) -> None:
    """uvicorn finished its graceful shutdown without cancelling anything; then it re-raises
    SIGTERM (the status says the signal ended the process) and click reports SIGINT's
    KeyboardInterrupt as "Aborted!" (status 1)."""
    log = server.stderr_text()
    assert status == EXIT_STATUS[signum], log
    assert "Finished server process" in log
    assert "timeout graceful shutdown exceeded" not in log
    assert "Traceback" not in log


def open_listen(server: HttpServer, client: httpx.Client, token: str) -> SseReader:
    message = make_request(
        "subscriptions/listen",
        {"notifications": {"resourcesListChanged": True}},
        id="listen-1",
    )
    headers = {**mcp_headers(message), "Authorization": f"Bearer {token}"}
    request = client.build_request("POST", f"{server.url}/mcp", json=message, headers=headers)
    return SseReader(client, request)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_ends_an_open_listen_with_its_closing_result_and_exits(
    server: HttpServer, client: httpx.Client, token: str, signum: int
) -> None:
    listen = open_listen(server, client, token)
    acknowledged = listen.message()

    status = stop_with(server, signum)

    assert listen.response.status_code == 200
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert listen.message() == {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: "listen-1"}},
    }
    assert listen.next() == CLEAN
    assert_graceful_exit(server, status, signum)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_ends_an_open_get_stream_cleanly_and_exits(
    server: HttpServer, client: httpx.Client, token: str, signum: int
) -> None:
    host = LegacyHttpHost(token, capabilities={})
    host.initialize(server)
    headers = {**host.headers(), "Accept": "text/event-stream"}
    stream = SseReader(client, client.build_request("GET", f"{server.url}/mcp", headers=headers))
    priming = stream.next()

    status = stop_with(server, signum)

    assert stream.response.status_code == 200
    assert isinstance(priming, dict) and priming["id"] and not priming.get("data"), priming
    assert stream.next() == CLEAN
    assert_graceful_exit(server, status, signum)
    host.close()


def test_shutdown_ends_a_listen_and_a_get_stream_open_together(
    server: HttpServer, client: httpx.Client, token: str
) -> None:
    listen = open_listen(server, client, token)
    listen.message()
    host = LegacyHttpHost(token, capabilities={})
    host.initialize(server)
    headers = {**host.headers(), "Accept": "text/event-stream"}
    stream = SseReader(client, client.build_request("GET", f"{server.url}/mcp", headers=headers))
    stream.next()

    status = stop_with(server, signal.SIGTERM)

    assert listen.message()["result"]["resultType"] == "complete"
    assert listen.next() == CLEAN
    assert stream.next() == CLEAN
    assert_graceful_exit(server, status, signal.SIGTERM)
    host.close()
