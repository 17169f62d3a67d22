"""Blocking work runs in a bounded set of threads: requests stuck in a handler cannot make the
server start more threads (each holding a pooled connection), later requests wait for a free
one within their own timeout (503), and the server recovers once the stuck calls finish."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from starlette.testclient import TestClient

from notes_server.app import create_server
from notes_server.config import HttpSettings, Settings
from notes_server.tools.services import Services
from notes_server.transports.http.app import build_http_app
from notes_server.transports.http.middleware.auth import FixedPrincipal
from notes_server.transports.http.threads import THREAD_NAME_PREFIX
from tests.transports.http_support import LOOPBACK_URL, BlockingTool, rpc

BOUND = 2
TIMEOUT_S = 2.0
BLOCK = rpc("tools/call", {"name": "test_block", "arguments": {}})
READ_ARGS = {"workspaceUri": "file:///home/alice/notes", "noteId": "note_0000000000000000000"}


@pytest.fixture
def client(settings: Settings, services: Services) -> Iterator[TestClient]:
    BlockingTool.reset()
    settings = dataclasses.replace(settings, tools_modules=("tests.transports.http_support",))
    server = create_server(settings, Services(settings, engine=services.engine))
    http = HttpSettings(auth="none", request_timeout=TIMEOUT_S)
    app = build_http_app(server, FixedPrincipal("alice"), http, threads=BOUND)
    try:
        with TestClient(app, base_url=LOOPBACK_URL) as test_client:
            yield test_client
    finally:
        BlockingTool.release.set()


def block(client: TestClient) -> httpx.Response:
    body, headers = BLOCK
    return client.post("/mcp", content=body, headers=headers)


def worker_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if t not in before and t.name.startswith(THREAD_NAME_PREFIX)
    ]


def assert_503(response: httpx.Response, message: str) -> None:
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": message},
    }


def test_stuck_requests_occupy_at_most_the_bound_of_threads_and_the_server_recovers(
    client: TestClient,
) -> None:
    before = set(threading.enumerate())
    with ThreadPoolExecutor(BOUND + 3) as requests:
        stuck = [requests.submit(block, client) for _ in range(BOUND)]
        for _ in range(BOUND):
            assert BlockingTool.entered.acquire(timeout=TIMEOUT_S * 5)
        for future in stuck:  # their threads are abandoned, still blocked
            assert_503(future.result(), "Request timed out")

        waiting = [requests.submit(block, client) for _ in range(3)]
        for future in waiting:
            assert_503(future.result(), "Server busy")
        assert BlockingTool.calls == BOUND
        assert len(worker_threads(before)) == BOUND

        BlockingTool.release.set()
        recovered = [requests.submit(block, client) for _ in range(BOUND + 1)]
        for future in recovered:
            response = future.result()
            assert response.status_code == 200
            assert response.json()["result"]["structuredContent"] == {"done": True}

    assert BlockingTool.calls == 2 * BOUND + 1
    assert len(worker_threads(before)) <= BOUND


@pytest.mark.sqlite_only("notes_read is quick on a local file; on a server it is a round trip")
def test_quick_requests_are_answered_while_every_worker_thread_is_stuck(
    client: TestClient,
) -> None:
    read = rpc("tools/call", {"name": "notes_read", "arguments": READ_ARGS})
    with ThreadPoolExecutor(BOUND) as requests:
        stuck = [requests.submit(block, client) for _ in range(BOUND)]
        for _ in range(BOUND):
            assert BlockingTool.entered.acquire(timeout=TIMEOUT_S * 5)

        listed = client.post("/mcp", content=rpc("tools/list")[0], headers=rpc("tools/list")[1])
        denied = client.post("/mcp", content=read[0], headers=read[1])

        BlockingTool.release.set()
        for future in stuck:
            future.result()

    assert listed.status_code == 200
    assert "notes_read" in {tool["name"] for tool in listed.json()["result"]["tools"]}
    assert denied.status_code == 200  # answered by the tool (no grant), not 503 "Server busy"
    assert denied.json()["error"]["code"] == -32602


def test_headers_naming_a_quick_tool_cannot_run_another_tool_on_the_event_loop(
    client: TestClient,
) -> None:
    body, headers = BLOCK
    headers = {**headers, "Mcp-Name": "notes_read"}

    response = client.post("/mcp", content=body, headers=headers)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020
    assert BlockingTool.calls == 0
