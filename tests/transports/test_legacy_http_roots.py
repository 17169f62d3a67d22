"""Roots only narrow, over 2025-era Streamable HTTP and across processes.

Two `serve --transport http` instances share one database. A legacy client that declared
`roots` is asked `roots/list` on the SSE stream of its first request that depends on them; it
answers with a POST to the OTHER instance, and the roots are kept in the session row, so both
instances narrow the session alike. `notifications/roots/list_changed` (to either instance)
makes the next such request ask again."""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.compat_2025.roots import ROOTS_WAIT_S
from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants
from notes_server.store.engine import make_engine, write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import utc_now
from tests import pg_support
from tests.helpers import workspace_refusal
from tests.transports.http_support import HttpServer, LegacyHttpHost, server_instances

NOTES = "file:///home/alice/notes"
SHARED = "file:///srv/shared"
Pair = tuple[HttpServer, HttpServer, str]


_hosts = itertools.count()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Pair]:
    """One pair of instances for the module's tests that need no settings of their own: the
    roots belong to a session, and each test opens its own (`Host`, titles of its own)."""
    tmp_path = tmp_path_factory.mktemp("roots-pair")
    if pg_support.on_postgresql():
        url = pg_support.database_url(tmp_path, per_test=False)
    else:
        shutil.copyfile(sqlite_template, tmp_path / "notes.db")
        url = f"sqlite:///{tmp_path}/notes.db"
    engine = make_engine(url)
    try:
        with write_tx(engine) as conn:
            for workspace in (NOTES, SHARED):
                grants.upsert(conn, "alice", canonical_workspace(workspace), "write", utc_now())
        _, token = create_token(SqlTokenRecords(engine), "alice")
    finally:
        engine.dispose()
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    try:
        with server_instances(tmp_path, url, "--auth", "token", env=env) as (first, second):
            yield first, second, token
    finally:
        if pg_support.on_postgresql():
            pg_support.drop_database(url)


class Host(LegacyHttpHost):
    def __init__(self, token: str, capabilities: dict[str, Any]) -> None:
        super().__init__(token, capabilities, name="roots-test", timeout=30)
        self.tag = next(_hosts)  # the module's tests share a database: titles stay unique

    def title(self, title: str) -> str:
        return f"{title} {self.tag}"

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.message(method, params)

    def create(self, server: HttpServer, workspace: str | None, title: str) -> dict[str, Any]:
        arguments: dict[str, Any] = {"title": self.title(title)}
        if workspace is not None:
            arguments["workspaceUri"] = workspace
        call = self.request("tools/call", {"name": "notes_create", "arguments": arguments})
        response = self.post(server, call)
        assert response.headers["content-type"] == "application/json", response.text
        reply: dict[str, Any] = response.json()
        return reply

    def roots_then(
        self, server: HttpServer, other: HttpServer, message: dict[str, Any], *uris: str
    ) -> dict[str, Any]:
        """POST `message` to `server`, answer the roots/list on its stream through `other`,
        and return the final message of the stream."""
        url = f"{server.url}/mcp"
        with self.http.stream("POST", url, json=message, headers=self.headers()) as response:
            assert response.headers["content-type"] == "text/event-stream"
            received = events(response)
            question = next(received)
            assert question["method"] == "roots/list"
            roots = {"roots": [{"uri": uri, "name": "r"} for uri in uris]}
            answer = {"jsonrpc": "2.0", "id": question["id"], "result": roots}
            assert self.post(other, answer).status_code == 202
            final = next(received)
            assert list(received) == []
        return final


def events(stream: httpx.Response) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in stream.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def create_call(host: Host, workspace: str | None, title: str) -> dict[str, Any]:
    arguments: dict[str, Any] = {"title": host.title(title)}
    if workspace is not None:
        arguments["workspaceUri"] = workspace
    return host.request("tools/call", {"name": "notes_create", "arguments": arguments})


def note_uri(reply: dict[str, Any]) -> str:
    return str(reply["result"]["structuredContent"]["note"]["uri"])


@pytest.fixture
def host(pair: Pair) -> Iterator[Host]:
    client = Host(pair[2], {"elicitation": {}, "roots": {"listChanged": True}})
    yield client
    client.http.close()


def test_roots_asked_on_one_instance_narrow_the_session_on_both(pair: Pair, host: Host) -> None:
    first, second, _ = pair
    host.initialize(first)

    final = host.roots_then(first, second, create_call(host, None, "defaulted"), "file:///home")
    denied_elsewhere = host.create(second, SHARED, "shared")
    allowed_elsewhere = host.create(second, NOTES, "notes")

    assert note_uri(final).startswith(NOTES + "/")
    assert workspace_refusal(denied_elsewhere["error"])
    assert note_uri(allowed_elsewhere).startswith(NOTES + "/")


def test_roots_disjoint_from_the_grants_open_nothing(pair: Pair, host: Host) -> None:
    first, second, _ = pair
    host.initialize(first)

    listing = host.request("resources/list", {})
    final = host.roots_then(first, second, listing, "file:///tmp/elsewhere")
    named = host.create(second, NOTES, "named")

    assert final["result"]["resources"] == []
    assert workspace_refusal(named["error"])


def test_a_root_equal_to_a_grant_and_a_change_mid_session(pair: Pair, host: Host) -> None:
    first, second, _ = pair
    host.initialize(first)
    final = host.roots_then(first, second, create_call(host, SHARED, "one"), SHARED)
    assert note_uri(final).startswith(SHARED + "/")
    assert workspace_refusal(host.create(first, NOTES, "two")["error"])

    changed = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    assert host.post(second, changed).status_code == 202
    final = host.roots_then(first, second, create_call(host, NOTES, "three"), NOTES)

    assert note_uri(final).startswith(NOTES + "/")
    assert workspace_refusal(host.create(second, SHARED, "four")["error"])


def test_a_client_without_roots_is_never_asked_and_not_narrowed(pair: Pair) -> None:
    first, second, token = pair
    host = Host(token, {"elicitation": {}})
    host.initialize(first)

    notes = host.create(first, NOTES, "notes")
    shared = host.create(second, SHARED, "shared")
    missing = host.create(second, None, "missing")

    assert note_uri(notes).startswith(NOTES + "/")
    assert note_uri(shared).startswith(SHARED + "/")
    assert missing["result"]["isError"] is True
    assert f"usable workspaces: {NOTES}, {SHARED}." in missing["result"]["content"][0]["text"]
    host.http.close()


def test_an_empty_roots_list_is_kept_and_narrows_nothing(pair: Pair, host: Host) -> None:
    first, second, _ = pair
    host.initialize(first)

    final = host.roots_then(first, second, create_call(host, NOTES, "notes"))
    shared = host.create(second, SHARED, "shared")

    assert note_uri(final).startswith(NOTES + "/")
    assert note_uri(shared).startswith(SHARED + "/")


def test_an_unanswered_roots_list_leaves_nothing_usable_after_the_configured_wait(
    tmp_path: Path, migrated_engine: Engine, grant: Any
) -> None:
    grant("alice", NOTES)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec(), "NOTES_SERVER_ROOTS_WAIT": "0.5"}
    url = str(migrated_engine.url)
    with server_instances(tmp_path, url, "--auth", "token", env=env, count=1) as (server,):
        host = Host(token, {"elicitation": {}, "roots": {"listChanged": True}})
        host.initialize(server)
        call = create_call(host, NOTES, "unanswered")
        began = time.monotonic()
        with host.http.stream("POST", f"{server.url}/mcp", json=call, headers=host.headers()) as r:
            received = list(events(r))
        waited = time.monotonic() - began
        later = host.create(server, NOTES, "later")  # not asked again: plain JSON
        host.close()

    methods = [event.get("method") for event in received]
    assert methods == ["roots/list", "notifications/cancelled", None]
    assert received[1]["params"]["requestId"] == received[0]["id"]  # the question withdrawn
    assert workspace_refusal(received[2]["id"] == call["id"] and received[2]["error"])
    assert 0.5 <= waited < ROOTS_WAIT_S  # the default would have held it for 30 s
    assert workspace_refusal(later["error"])
