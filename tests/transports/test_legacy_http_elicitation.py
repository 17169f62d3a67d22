"""Server-initiated elicitation over 2025-era Streamable HTTP, across processes.

Two `serve --transport http` instances share one database. A legacy `tools/call notes_delete`
is POSTed to instance A, which answers with an SSE stream carrying `elicitation/create`; the
client POSTs its answer (or `notifications/cancelled`) to instance B. Only the database links
the two, so a passing accept proves the answer is routed across processes."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.transports.http_support import HttpServer, LegacyHttpHost, server_instances

NOTES = "file:///home/alice/notes"
TITLE = "TPS report"
LOG_WAIT_S = 30.0


@pytest.fixture
def instances(
    tmp_path: Path, migrated_engine: Engine, grant: Any
) -> Iterator[tuple[HttpServer, HttpServer, str]]:
    grant("alice", NOTES)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    url = str(migrated_engine.url)
    with server_instances(tmp_path, url, "--auth", "token", env=env) as (first, second):
        yield first, second, token


class Host(LegacyHttpHost):
    """A 2025-11-25 client whose POSTs go to whichever instance the test names."""

    def __init__(self, token: str) -> None:
        super().__init__(token, name="cross-instance-test", timeout=30)

    def tool(self, server: HttpServer, name: str, arguments: dict[str, Any]) -> Any:
        response = self.post(
            server, self.message("tools/call", {"name": name, "arguments": arguments})
        )
        assert response.status_code == 200, response.text
        return response.json()["result"]

    def titles(self, server: HttpServer) -> list[str]:
        found = self.tool(server, "notes_search", {"workspaceUri": NOTES})
        return [note["title"] for note in found["structuredContent"]["notes"]]


@pytest.fixture
def host(instances: tuple[HttpServer, HttpServer, str]) -> Iterator[Host]:
    client = Host(instances[2])
    yield client
    client.http.close()


def events(stream: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON messages of an SSE response, as they arrive."""
    data: list[str] = []
    for line in stream.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def wait_for_log(server: HttpServer, text: str) -> None:
    while True:
        try:
            line = server.lines.get(timeout=LOG_WAIT_S)
        except queue.Empty:
            raise AssertionError(f"server never logged {text!r}") from None
        if text in line:
            return


def accept(question: dict[str, Any]) -> dict[str, Any]:
    choices = question["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    content = {"note_id": choices[0]["const"], "confirm": True}
    return {
        "jsonrpc": "2.0",
        "id": question["id"],
        "result": {"action": "accept", "content": content},
    }


def decline(question: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}


def start_delete(host: Host, server: HttpServer) -> tuple[dict[str, Any], Any]:
    host.initialize(server)
    host.tool(server, "notes_create", {"workspaceUri": NOTES, "title": TITLE})
    call = host.message(
        "tools/call", {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": TITLE}}
    )
    stream = host.http.stream("POST", f"{server.url}/mcp", json=call, headers=host.headers())
    return call, stream


@pytest.mark.parametrize(("answer", "deleted"), [(accept, True), (decline, False)])
def test_the_answer_may_reach_another_instance_and_the_result_arrives_on_the_stream(
    instances: tuple[HttpServer, HttpServer, str], host: Host, answer: Any, deleted: bool
) -> None:
    first, second, _ = instances
    call, stream = start_delete(host, first)

    with stream as response:
        received = events(response)
        question = next(received)
        delivered = host.post(second, answer(question))
        final = next(received)
        rest = list(received)

    assert response.headers["content-type"] == "text/event-stream"
    assert question["method"] == "elicitation/create"
    assert TITLE in question["params"]["message"]
    assert delivered.status_code == 202
    assert final["id"] == call["id"]
    assert final["result"]["structuredContent"]["deleted"] is deleted
    assert rest == []
    assert host.titles(second) == ([] if deleted else [TITLE])


def test_notifications_cancelled_ends_the_stream_without_a_result_or_a_change(
    instances: tuple[HttpServer, HttpServer, str], host: Host
) -> None:
    first, second, _ = instances
    call, stream = start_delete(host, first)

    with stream as response:
        received = events(response)
        question = next(received)
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call["id"], "reason": "user closed the dialog"},
        }
        cancelled = host.post(second, notice)
        rest = list(received)
        late = host.post(second, accept(question))

    assert cancelled.status_code == 202
    assert rest == []
    assert late.status_code == 202
    assert host.titles(second) == [TITLE]


def test_a_client_disconnect_ends_the_wait_without_a_change(
    instances: tuple[HttpServer, HttpServer, str], host: Host
) -> None:
    first, second, _ = instances
    _, stream = start_delete(host, first)

    with stream as response:
        question = next(events(response))
    wait_for_log(first, "disconnected; its tools/call was abandoned")
    late = host.post(second, accept(question))

    assert late.status_code == 202
    assert host.titles(first) == [TITLE]
