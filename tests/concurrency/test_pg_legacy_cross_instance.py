"""A 2025-11-25 HTTP session across separate `serve --transport http` processes on one
PostgreSQL database: no session affinity is needed.

Three instances (separate processes, separate ports, one worker each) share a throw-away
PostgreSQL database and the state keys. The session is opened on one instance; `notes_delete`
is called on another, whose POST answers with an SSE stream carrying `elicitation/create`; the
answer is POSTed to a third. Only the database links them. The note is deleted exactly once,
and the session's later requests work at every instance. Runs in every run of the suite when a
PostgreSQL server is reachable (skipped otherwise), whatever NOTES_SERVER_TEST_DB says.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants
from notes_server.store.engine import write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import utc_now
from tests.transports.http_support import HttpServer, LegacyHttpHost, start_http_server

INSTANCES = 3
WS = "file:///home/alice/notes"
TOOL_NAMES = {"notes_create", "notes_delete", "notes_read", "notes_search"}


class Session(LegacyHttpHost):
    """One 2025-11-25 client whose POSTs go to whichever instance the test names."""

    def __init__(self, token: str) -> None:
        super().__init__(token, name="pg-cross-instance")

    def request(self, server: HttpServer, method: str, params: dict[str, Any]) -> Any:
        response = self.post(server, self.message(method, params))
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/json")
        return response.json()["result"]

    def tool(self, server: HttpServer, name: str, arguments: dict[str, Any]) -> Any:
        return self.request(server, "tools/call", {"name": name, "arguments": arguments})

    def titles(self, server: HttpServer) -> list[str]:
        found = self.tool(server, "notes_search", {"workspaceUri": WS})
        return sorted(note["title"] for note in found["structuredContent"]["notes"])

    def start_delete(self, server: HttpServer, title: str) -> tuple[Any, Iterator[Any], Any]:
        """POST notes_delete to `server`; (the open stream, its events, the question)."""
        arguments = {"workspaceUri": WS, "title": title}
        call = self.message("tools/call", {"name": "notes_delete", "arguments": arguments})
        stream = self.http.stream("POST", f"{server.url}/mcp", json=call, headers=self.headers())
        response = stream.__enter__()
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        received = events(response)
        question = next(received)
        assert question["method"] == "elicitation/create"
        assert title in question["params"]["message"]
        return stream, received, question


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON messages of an SSE response, as they arrive."""
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def accept(question: dict[str, Any]) -> dict[str, Any]:
    choices = question["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    content = {"note_id": choices[0]["const"], "confirm": True}
    result = {"action": "accept", "content": content}
    return {"jsonrpc": "2.0", "id": question["id"], "result": result}


def decline(question: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}


@pytest.fixture
def instances(pg_engine: Engine, tmp_path: Path) -> Iterator[list[HttpServer]]:
    with write_tx(pg_engine) as conn:
        grants.upsert(conn, "alice", canonical_workspace(WS), "write", utc_now())
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    url = pg_engine.url.render_as_string(hide_password=False)
    servers: list[HttpServer] = []
    try:
        for _ in range(INSTANCES):
            servers.append(start_http_server(tmp_path, url, "--auth", "token", env=env))
        # Separate processes on separate ports, one worker each: nothing is shared but the
        # database and the keys.
        assert len({s.proc.pid for s in servers}) == len({s.port for s in servers}) == INSTANCES
        assert all(s.proc.poll() is None for s in servers)
        yield servers
        for server in servers:
            assert "Traceback" not in server.stderr_text()
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def session(pg_engine: Engine) -> Iterator[Session]:
    _, token = create_token(SqlTokenRecords(pg_engine), "alice")
    client = Session(token)
    yield client
    client.http.close()


def deletions(engine: Engine, title: str) -> tuple[int, int]:
    """(notes left with this title, audit rows of deletes of it)."""
    with engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM notes WHERE title = :t"), {"t": title})
        audited = conn.execute(
            text(
                "SELECT count(*) FROM audit_log WHERE note_title = :t AND tool = 'notes_delete'"
                " AND outcome = 'deleted'"
            ),
            {"t": title},
        )
        return int(left.scalar_one()), int(audited.scalar_one())


def test_an_answer_posted_to_another_instance_deletes_once_and_the_session_works_everywhere(
    instances: list[HttpServer], session: Session, pg_engine: Engine
) -> None:
    a, b, c = instances
    session.initialize(a)
    session.tool(b, "notes_create", {"workspaceUri": WS, "title": "TPS report"})
    session.tool(c, "notes_create", {"workspaceUri": WS, "title": "Expenses"})

    stream, received, question = session.start_delete(b, "TPS report")
    try:
        delivered = session.post(c, accept(question))
        final = next(received)
        rest = list(received)
    finally:
        stream.__exit__(None, None, None)

    assert delivered.status_code == 202
    assert final["result"]["structuredContent"]["deleted"] is True
    assert rest == []
    assert deletions(pg_engine, "TPS report") == (0, 1)
    # Later requests of the same session, at every instance.
    for server in (a, b, c):
        listed = session.request(server, "tools/list", {})
        assert {tool["name"] for tool in listed["tools"]} >= TOOL_NAMES
        assert session.request(server, "ping", {}) == {}
        assert session.titles(server) == ["Expenses"]
    # And another confirmation, the other way round: asked at C, answered at A.
    stream, received, question = session.start_delete(c, "Expenses")
    try:
        assert session.post(a, accept(question)).status_code == 202
        final = next(received)
    finally:
        stream.__exit__(None, None, None)
    assert final["result"]["structuredContent"]["deleted"] is True
    assert deletions(pg_engine, "Expenses") == (0, 1)
    assert [session.titles(server) for server in instances] == [[], [], []]


def test_two_answers_racing_at_two_instances_settle_once(
    instances: list[HttpServer], session: Session, pg_engine: Engine
) -> None:
    a, b, c = instances
    session.initialize(a)
    session.tool(a, "notes_create", {"workspaceUri": WS, "title": "TPS report"})
    stream, received, question = session.start_delete(a, "TPS report")
    answers = [(b, accept(question)), (c, decline(question))]
    barrier = threading.Barrier(len(answers), timeout=30)
    statuses: list[int] = []

    def deliver(server: HttpServer, answer: dict[str, Any]) -> None:
        barrier.wait()
        statuses.append(session.post(server, answer).status_code)

    threads = [threading.Thread(target=deliver, args=answer) for answer in answers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        final = next(received)
        rest = list(received)
    finally:
        stream.__exit__(None, None, None)

    assert statuses == [202, 202]
    assert rest == []
    deleted = final["result"]["structuredContent"]["deleted"]
    # Whichever answer landed first decided, once: the database agrees with the result.
    assert deletions(pg_engine, "TPS report") == ((0, 1) if deleted else (1, 0))
