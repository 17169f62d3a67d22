"""`notes-server serve` as a real subprocess speaking newline-delimited JSON-RPC on pipes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.store import migrate
from notes_server.store.engine import make_engine
from notes_server.store.migrate import HEAD, sqlite_revision
from notes_server.transports.stdio import MAX_LINE_BYTES
from tests.helpers import ServerProcess, default_db_url, make_request
from tests.helpers import spawn_server as start_server

Spawn = Callable[..., ServerProcess]
Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"


@pytest.fixture
def served(migrated_engine: Engine, spawn_server: Spawn) -> ServerProcess:
    """A fresh server on the (already migrated) test database, acting as alice."""
    process: ServerProcess = spawn_server()
    return process


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the tests that only exchange stateless messages with it."""
    tmp_path = tmp_path_factory.mktemp("stdio-shared")
    engine = make_engine(default_db_url(tmp_path))
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    process = start_server(tmp_path)
    yield process
    assert process.close() == 0


def assert_json_rpc_reply(line: bytes) -> dict[str, Any]:
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    reply: dict[str, Any] = json.loads(line)
    assert reply["jsonrpc"] == "2.0"
    assert "id" in reply
    assert ("result" in reply) != ("error" in reply)
    return reply


def test_pipelined_requests_are_answered_in_order(served: ServerProcess, grant: Grant) -> None:
    grant("alice", NOTES)
    methods = [
        ("server/discover", None),
        ("tools/list", None),
        ("tools/call", {"name": "notes_search", "arguments": {"workspaceUri": NOTES}}),
        ("resources/list", None),
        ("no/such/method", None),
    ]
    requests = [make_request(*methods[i % len(methods)], id=f"r{i}") for i in range(20)]

    served.send_raw(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    replies = [assert_json_rpc_reply(served.read_line()) for _ in requests]

    assert [r["id"] for r in replies] == [f"r{i}" for i in range(20)]
    assert replies[2]["result"]["isError"] is False
    assert replies[4]["error"]["code"] == -32601


def test_a_notification_gets_no_answer(shared: ServerProcess) -> None:
    shared.send(make_request("notifications/cancelled", {"requestId": 1}, id=None))
    shared.send(make_request("server/discover", id="after"))

    assert shared.read()["id"] == "after"


@pytest.mark.parametrize(
    ("frame", "code", "reply_id"),
    [
        (b"garbage", -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', -32700, None),
        (b"[]", -32600, None),
        (b'{"jsonrpc":"2.0","id":null,"method":"server/discover"}', -32600, None),
        (b'{"jsonrpc":"1.0","id":4,"method":"server/discover"}', -32600, 4),
        (b'{"jsonrpc":"2.0","id":5,"method":"server/discover","params":[]}', -32602, 5),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"nope"}', -32602, "\ud800"),
    ],
    ids=["garbage", "not-utf8", "batch", "null-id", "jsonrpc-1", "params-array", "surrogate-id"],
)
def test_a_malformed_frame_is_answered_and_the_server_keeps_serving(
    shared: ServerProcess, frame: bytes, code: int, reply_id: Any
) -> None:
    shared.send_raw(frame + b"\n")

    reply = assert_json_rpc_reply(shared.read_line())

    assert reply["id"] == reply_id
    assert reply["error"]["code"] == code
    assert shared.request("server/discover", id="still-alive")["id"] == "still-alive"


def padded_discover(total_bytes: int) -> bytes:
    """A valid server/discover request of exactly `total_bytes` bytes (newline excluded)."""
    request = make_request("server/discover", id="big")
    request["params"]["padding"] = ""
    empty = len(json.dumps(request, separators=(",", ":")).encode())
    request["params"]["padding"] = "x" * (total_bytes - empty)
    raw = json.dumps(request, separators=(",", ":")).encode()
    assert len(raw) == total_bytes
    return raw


def test_a_line_over_4_mib_is_refused_and_the_server_survives(shared: ServerProcess) -> None:
    shared.send_raw(padded_discover(MAX_LINE_BYTES + 1) + b"\n")

    reply = assert_json_rpc_reply(shared.read_line())

    assert reply["id"] is None
    assert reply["error"]["code"] == -32600
    assert shared.request("server/discover", id="after")["id"] == "after"


def test_a_line_of_exactly_4_mib_is_served(shared: ServerProcess) -> None:
    shared.send_raw(padded_discover(MAX_LINE_BYTES) + b"\n")

    reply = assert_json_rpc_reply(shared.read_line())

    assert reply["id"] == "big"
    assert reply["result"]["resultType"] == "complete"


def test_empty_lines_are_ignored_and_crlf_is_accepted(shared: ServerProcess) -> None:
    shared.send_raw(b"\n\n   \n\r\n")
    shared.send_raw(json.dumps(make_request("server/discover", id="crlf")).encode() + b"\r\n")

    assert shared.read()["id"] == "crlf"


def test_tool_calls_reach_the_configured_database(
    served: ServerProcess, grant: Grant, call_tool: Callable[..., dict[str, Any]]
) -> None:
    grant("alice", NOTES)

    reply = served.request(
        "tools/call",
        {"name": "notes_create", "arguments": {"workspaceUri": NOTES, "title": "From stdio"}},
    )

    note = reply["result"]["structuredContent"]["note"]
    in_process = call_tool("notes_read", {"workspaceUri": NOTES, "noteId": note["id"]})
    assert in_process["result"]["structuredContent"]["note"]["title"] == "From stdio"


def test_stdout_carries_only_json_rpc_and_the_banner_goes_to_stderr(
    served: ServerProcess,
) -> None:
    for frame in (b"garbage", b"[]", json.dumps(make_request("tools/list", id=2)).encode()):
        served.send_raw(frame + b"\n")
        served.read_line()

    assert served.close() == 0

    assert len(served.transcript) == 3
    for line in served.transcript:
        assert_json_rpc_reply(line)
    banner = [
        line
        for line in served.stderr_text().splitlines()
        if "notes-server" in line and "alice" in line
    ]
    assert len(banner) == 1


def test_closing_stdin_ends_the_process_with_exit_code_0(served: ServerProcess) -> None:
    assert served.request("server/discover")["id"] == 1

    assert served.close() == 0


def test_an_idle_server_exits_cleanly_when_stdin_closes(served: ServerProcess) -> None:
    assert served.close() == 0
    assert served.transcript == []


def test_the_first_run_creates_and_migrates_the_default_database(
    spawn_server: Spawn, tmp_path: Path
) -> None:
    xdg = tmp_path / "fresh-xdg"
    database = xdg / "notes-server" / "notes.db"
    assert not database.exists()

    process = spawn_server(db_url=None, env={"XDG_DATA_HOME": str(xdg)})
    reply = process.request("tools/list")

    assert reply["result"]["tools"]
    assert process.close() == 0
    assert database.exists()
    assert sqlite_revision(database) == HEAD
    assert str(database) in process.stderr_text()


def test_an_unmigrated_explicit_database_is_refused_with_a_hint(
    spawn_server: Spawn, tmp_path: Path
) -> None:
    process = spawn_server(db_url=f"sqlite:///{tmp_path}/elsewhere.db")

    assert process.close() == 2
    assert process.transcript == []
    assert "notes-server migrate" in process.stderr_text()


def test_a_note_changed_by_another_server_process_reads_changed_at_once(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    """`notes_read` is one statement on each request, nothing remembered between requests: a
    write committed by another `serve` process on the same database (its tags and links
    included) shows in this process's very next read."""
    grant("alice", NOTES)
    reader, writer = spawn_server(), spawn_server()

    def call(process: ServerProcess, tool: str, **arguments: Any) -> dict[str, Any]:
        reply = process.request("tools/call", {"name": tool, "arguments": arguments})
        assert reply["result"]["isError"] is False, reply
        structured: dict[str, Any] = reply["result"]["structuredContent"]
        return structured

    made = call(writer, "notes_create", workspaceUri=NOTES, title="Moving", body="first #old")
    note_id = made["note"]["id"]
    before = call(reader, "notes_read", workspaceUri=NOTES, noteId=note_id)["note"]
    assert (before["version"], before["tags"], before["links"]["outgoing"]) == (1, ["old"], 0)

    call(writer, "notes_update", workspaceUri=NOTES, noteId=note_id, body="see [[Moving]] #new")
    after = call(reader, "notes_read", workspaceUri=NOTES, noteId=note_id)
    assert after["note"]["version"] == 2 and after["note"]["body"] == "see [[Moving]] #new"
    assert after["note"]["tags"] == ["new"]
    assert after["note"]["links"] == {"outgoing": 1, "unresolved": 0, "incoming": 1}
