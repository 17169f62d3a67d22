"""The dual-era stdio connection in-process: scripted stdin, captured stdout, no subprocess.

Every exchange is written in advance (the server's request ids are deterministic: s-1, s-2, ...),
so ordering rules can be asserted exactly.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest
from sqlalchemy import Engine, func, select

from notes_server.app import SERVER_INFO, create_server
from notes_server.compat_2025.connection import DualEraConnection
from notes_server.compat_2025.session import MAX_ROUNDS
from notes_server.compat_2025.translate import (
    CONFIRMATION_EXPIRED,
    NEEDS_ELICITATION,
    TOO_MANY_ROUNDS,
)
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.security.uri import canonical_workspace
from notes_server.store import notes
from notes_server.store.engine import read_tx
from notes_server.store.models import nonces_table
from notes_server.tools.base import CallContext, InputRequired, Tool, ToolResult, tool_hints
from notes_server.tools.registry import ToolRegistry
from notes_server.tools.services import Services, utc_now
from notes_server.transports.stdio import serve_stdio
from tests.compat_2025.legacy_support import NOTES
from tests.transports.stdio_faults import Unencodable

Message = dict[str, Any] | bytes
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def init(capabilities: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}} if capabilities is None else capabilities,
    }
    return {"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params}


def req(id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params or {}}


def answer(id: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def run(server: McpServer, *messages: Message) -> list[dict[str, Any]]:
    """Feed the lines, serve until EOF, and return every line written to stdout."""
    lines = [m if isinstance(m, bytes) else json.dumps(m).encode() for m in messages]
    stdout = io.BytesIO()
    serve_stdio(server, "alice", io.BytesIO(b"\n".join(lines) + b"\n"), stdout, DualEraConnection)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


class Asker(Tool):
    """Asks one embedded input request every time and remembers what it got back."""

    name = "test_asker"
    title = description = "Always asks"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    tool_annotations = tool_hints("Always asks", read_only=True)
    embedded: ClassVar[dict[str, Any]] = {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Sure?", "requestedSchema": FORM},
    }
    finish_after: ClassVar[int | None] = None

    def __init__(self) -> None:
        self.seen: list[dict[str, Any] | None] = []

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult | InputRequired:
        self.seen.append(ctx.input_responses)
        if self.finish_after is not None and len(self.seen) > self.finish_after:
            return ToolResult({"done": True})
        return InputRequired({"q": self.embedded}, f"state-{len(self.seen)}")


class RootsAsker(Asker):
    embedded: ClassVar[dict[str, Any]] = {"method": "roots/list"}
    finish_after: ClassVar[int | None] = 1


@pytest.fixture
def stub() -> Callable[[Asker], McpServer]:
    def _server(tool: Asker) -> McpServer:
        return McpServer(ToolRegistry([tool]), None, SERVER_INFO)  # type: ignore[arg-type]

    return _server


def call_asker(id: int = 2) -> dict[str, Any]:
    return req(id, "tools/call", {"name": "test_asker", "arguments": {}})


# --- with the real tools -----------------------------------------------------------------


@pytest.fixture
def note(call_tool: Callable[..., dict[str, Any]], grant: Callable[..., str]) -> str:
    grant("alice", NOTES)
    created = call_tool("notes_create", {"workspaceUri": NOTES, "title": "TPS report"})
    note_id: str = created["result"]["structuredContent"]["note"]["id"]
    return note_id


DELETE = req(
    2,
    "tools/call",
    {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": "TPS report"}},
)


def test_stdin_closing_while_waiting_counts_as_cancel(server: McpServer, note: str) -> None:
    out = run(server, init(), DELETE)

    assert [m.get("method") for m in out] == [None, "elicitation/create", None]
    assert out[2]["result"]["structuredContent"] == {"deleted": False, "outcome": "cancelled"}


def test_frames_arriving_while_waiting_are_answered_after_the_call_in_order(
    server: McpServer, note: str
) -> None:
    accept = {"action": "accept", "content": {"note_id": note, "confirm": True}}
    out = run(
        server,
        init(),
        DELETE,
        b"not json",
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        req(3, "tools/list"),
        answer("s-1", accept),
    )

    assert [m.get("id") for m in out] == [1, "s-1", 2, None, 3]
    assert out[2]["result"]["structuredContent"]["deleted"] is True
    assert out[3]["error"]["code"] == -32700
    assert set(out[4]["result"]) == {"tools"}


def test_notifications_and_stray_responses_are_never_answered(server: McpServer) -> None:
    out = run(
        server,
        init(),
        answer("s-9", {}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        answer("s-1", {"action": "accept"}),
        req(2, "ping"),
    )

    assert [m["id"] for m in out] == [1, 2]


def test_a_second_initialize_replaces_the_session(server: McpServer) -> None:
    out = run(server, init(), init({}, id=2), DELETE)

    assert out[2]["result"]["content"][0]["text"] == NEEDS_ELICITATION


def test_a_malformed_initialize_keeps_the_previous_session(server: McpServer) -> None:
    out = run(server, init(), req(2, "initialize", {"protocolVersion": 7}), req(3, "ping"))

    assert out[1]["error"]["code"] == -32602
    assert out[2]["result"] == {}


class LateAnswers(io.BytesIO):
    """stdin on which the answer to the server's first question is read `delay` seconds later
    (on the server's clock) than the question was asked: a person who took their time."""

    def __init__(self, data: bytes, clock: list[datetime], delay: float) -> None:
        super().__init__(data)
        self.clock = clock
        self.delay = delay

    def readline(self, size: int | None = -1) -> bytes:
        line = super().readline(size)
        if b'"s-1"' in line:
            self.clock[0] += timedelta(seconds=self.delay)
        return line


@pytest.mark.parametrize("late", [False, True], ids=["in-time", "expired"])
def test_a_confirmation_answered_after_it_expired_is_a_tool_error_saying_to_call_again(
    settings: Settings, migrated_engine: Engine, note: str, late: bool
) -> None:
    clock = [utc_now()]
    services = Services(settings, engine=migrated_engine, clock=lambda: clock[0])
    server = create_server(settings, services)
    accepted = answer("s-1", {"action": "accept", "content": {"note_id": note, "confirm": True}})
    lines = [json.dumps(m).encode() for m in (init(), DELETE, accepted)]
    delay = settings.state_ttl + 1 if late else settings.state_ttl - 1
    stdout = io.BytesIO()

    serve_stdio(
        server,
        "alice",
        LateAnswers(b"\n".join(lines) + b"\n", clock, delay),
        stdout,
        DualEraConnection,
    )

    out = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert [m.get("method") for m in out] == [None, "elicitation/create", None]
    if late:
        assert out[2] == {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {
                "content": [{"type": "text", "text": CONFIRMATION_EXPIRED}],
                "isError": True,
            },
        }
        assert "Call the tool again" in CONFIRMATION_EXPIRED
    else:
        assert out[2]["result"]["structuredContent"]["outcome"] == "deleted"
    with read_tx(migrated_engine) as conn:
        left = notes.get_note(conn, canonical_workspace(NOTES), note)
        claimed = conn.execute(select(func.count()).select_from(nonces_table)).scalar_one()
    assert (left is not None, claimed) == ((True, 0) if late else (False, 1))


# --- with stub tools ---------------------------------------------------------------------


def test_a_tool_that_keeps_asking_is_stopped_after_the_round_limit(
    stub: Callable[[Asker], McpServer],
) -> None:
    tool = Asker()
    answers = [answer(f"s-{n}", {"action": "accept", "content": {"ok": True}}) for n in range(1, 9)]

    out = run(stub(tool), init(), call_asker(), *answers[:MAX_ROUNDS])

    assert [m.get("method") for m in out[1:-1]] == ["elicitation/create"] * MAX_ROUNDS
    assert out[-1]["result"] == {
        "content": [{"type": "text", "text": TOO_MANY_ROUNDS.format(rounds=MAX_ROUNDS)}],
        "isError": True,
    }
    assert len(tool.seen) == MAX_ROUNDS + 1
    assert tool.seen[1] == {"q": {"action": "accept", "content": {"ok": True}}}


def test_roots_requests_are_forwarded_and_an_error_answer_is_left_out(
    stub: Callable[[Asker], McpServer],
) -> None:
    tool = RootsAsker()
    refusals = [
        {"jsonrpc": "2.0", "id": f"s-{n}", "error": {"code": -32601, "message": "no roots"}}
        for n in (1, 2)
    ]

    out = run(stub(tool), init({"roots": {"listChanged": True}}), call_asker(), *refusals)

    # s-1: the session's own roots/list before serving a call (no `initialized` came);
    # s-2: the tool's embedded one.
    assert out[1] == {"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"}
    assert out[2] == {"jsonrpc": "2.0", "id": "s-2", "method": "roots/list"}
    assert out[3]["result"]["structuredContent"] == {"done": True}
    assert tool.seen == [None, {}]


def test_before_a_legacy_session_a_response_is_an_invalid_request(server: McpServer) -> None:
    out = run(server, answer("s-1", {"action": "accept"}))

    assert out == [
        {
            "jsonrpc": "2.0",
            "id": "s-1",
            "error": {
                "code": -32600,
                "message": "Invalid Request: unexpected members in a request",
            },
        }
    ]


# --- one guard, in the transport ------------------------------------------------------------


def test_a_frame_that_fails_after_waiting_in_the_backlog_costs_only_that_frame() -> None:
    """A request queued while the session waited for an answer, whose reply cannot be
    encoded, is -32603 with its own id; the frames after it are still answered."""
    asker = type("AsksOnce", (Asker,), {"finish_after": 1})()
    tools = ToolRegistry([asker, Unencodable(None)])  # type: ignore[arg-type]
    server = McpServer(tools, None, SERVER_INFO)  # type: ignore[arg-type]
    unencodable = req(3, "tools/call", {"name": "test_unencodable", "arguments": {}})

    out = run(
        server,
        init(),
        call_asker(),
        unencodable,
        answer("s-1", {"action": "decline"}),
        req(4, "ping"),
    )

    assert [(m.get("id"), m.get("method")) for m in out] == [
        (1, None),
        ("s-1", "elicitation/create"),
        (2, None),
        (3, None),
        (4, None),
    ]
    assert out[2]["result"]["structuredContent"] == {"done": True}
    assert out[3] == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert out[4] == {"jsonrpc": "2.0", "id": 4, "result": {}}
