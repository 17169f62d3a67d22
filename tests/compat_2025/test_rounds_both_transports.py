"""One rounds loop behind both 2025-11-25 transports: the same confirmed `notes_delete`, with the
same answer, asks the same question and ends in the same result over stdio (a `serve` process,
the question on stdout) and over HTTP (a `serve --transport http` process, the question on the
call's SSE stream, the answer in a second POST), on one database."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.compat_2025.legacy_support import NOTES, LegacyClient
from tests.helpers import ServerProcess
from tests.transports.http_support import HttpServer, LegacyHttpHost, server_instances

TITLE = "Quarterly plan"
Answer = Callable[[dict[str, Any]], dict[str, Any]]


def accept(question: dict[str, Any]) -> dict[str, Any]:
    choices = question["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    return {"action": "accept", "content": {"note_id": choices[0]["const"], "confirm": True}}


def decline(question: dict[str, Any]) -> dict[str, Any]:
    return {"action": "decline"}


def accept_unconfirmed(question: dict[str, Any]) -> dict[str, Any]:
    choices = question["params"]["requestedSchema"]["properties"]["note_id"]["oneOf"]
    return {"action": "accept", "content": {"note_id": choices[0]["const"], "confirm": False}}


@pytest.fixture
def servers(
    tmp_path: Path,
    migrated_engine: Engine,
    grant: Callable[..., str],
    spawn_server: Callable[..., ServerProcess],
) -> Iterator[tuple[LegacyClient, LegacyHttpHost, HttpServer]]:
    grant("alice", NOTES)
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    stdio = LegacyClient(spawn_server(env=env))
    stdio.initialize()
    url = str(migrated_engine.url.render_as_string(hide_password=False))
    with server_instances(tmp_path, url, "--auth", "token", env=env, count=1) as (http,):
        host = LegacyHttpHost(token)
        host.initialize(http)
        try:
            yield stdio, host, http
        finally:
            host.close()


def over_stdio(client: LegacyClient, answer: Answer) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the question's params, the call's result) of one delete answered with `answer`."""
    call = client.call_tool("notes_delete", {"workspaceUri": NOTES, "title": TITLE})
    question = client.read()
    assert question["method"] == "elicitation/create"
    client.respond(question["id"], answer(question))
    final = client.read()
    assert final["id"] == call
    return question["params"], final["result"]


def events(stream: httpx.Response) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in stream.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def over_http(
    host: LegacyHttpHost, server: HttpServer, answer: Answer
) -> tuple[dict[str, Any], dict[str, Any]]:
    call = host.message(
        "tools/call", {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": TITLE}}
    )
    with host.http.stream(
        "POST", f"{server.url}/mcp", json=call, headers=host.headers()
    ) as response:
        received = events(response)
        question = next(received)
        assert question["method"] == "elicitation/create"
        reply = {"jsonrpc": "2.0", "id": question["id"], "result": answer(question)}
        assert host.post(server, reply).status_code == 202
        final = next(received)
        assert list(received) == []
    assert final["id"] == call["id"]
    return question["params"], final["result"]


def create(client: LegacyClient) -> str:
    created = client.tool("notes_create", {"workspaceUri": NOTES, "title": TITLE})
    note_id: str = created["structuredContent"]["note"]["id"]
    return note_id


UPDATED = re.compile(r"\(updated \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)")


def same_note(value: Any, note_id: str) -> Any:
    """`value` with the note's id written as NOTE and its update time as WHEN (each transport
    deletes its own note, created a moment apart)."""
    text = UPDATED.sub("(updated WHEN)", json.dumps(value).replace(note_id, "NOTE"))
    return json.loads(text)


@pytest.mark.parametrize("answer", [decline, accept_unconfirmed], ids=lambda a: a.__name__)
def test_an_answer_that_changes_nothing_asks_and_ends_alike_on_both_transports(
    servers: tuple[LegacyClient, LegacyHttpHost, HttpServer], answer: Answer
) -> None:
    stdio, host, http = servers
    create(stdio)

    asked_stdio, result_stdio = over_stdio(stdio, answer)
    asked_http, result_http = over_http(host, http, answer)

    assert asked_http == asked_stdio
    assert result_http == result_stdio
    assert result_stdio["structuredContent"]["deleted"] is False


def test_a_confirmed_delete_asks_and_ends_alike_on_both_transports(
    servers: tuple[LegacyClient, LegacyHttpHost, HttpServer],
) -> None:
    stdio, host, http = servers
    first = create(stdio)
    asked_stdio, result_stdio = over_stdio(stdio, accept)
    second = create(stdio)
    asked_http, result_http = over_http(host, http, accept)

    assert same_note(asked_http, second) == same_note(asked_stdio, first)
    assert same_note(result_http, second) == same_note(result_stdio, first)
    assert result_stdio["structuredContent"]["deleted"] is True
    assert stdio.tool("notes_search", {"workspaceUri": NOTES})["structuredContent"]["notes"] == []
