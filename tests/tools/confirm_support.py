"""Harness for the confirmed-action tests (notes_delete / notes_archive over MRTR).

`Flow` is an in-process server on a temp SQLite file with a manual clock: it speaks 2026-07-28
requests through `McpServer.handle_raw`, seeds notes and grants directly in the store, and reads
database effects (notes, consumed_nonces, audit_log) so tests can assert them exactly.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, select, text

from notes_server.app import SERVER_INFO, create_server
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants, notes
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import audit_table, nonces_table
from notes_server.store.notes import NoteRecord
from notes_server.tools.services import Services

PROTOCOL_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
RESULT_META = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}

FORM: dict[str, Any] = {"elicitation": {"form": {}}}
WS = "file:///home/alice/notes"
OTHER_WS = "file:///home/alice/work"
START = datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)
STATE_TTL = 120.0

STATE_REJECTED = "Invalid or expired requestState"
INVALID_CONFIRMATION = "Invalid confirmation: choose one of the offered notes and confirm it"
WORKSPACE_DENIED = "Workspace is not available to this principal"
CAPABILITY_MESSAGE = (
    "This tool asks the user to confirm in a form: the request must declare the "
    "elicitation capability with form mode"
)
MISSING_CAPABILITY = {
    "code": -32021,
    "message": CAPABILITY_MESSAGE,
    "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
}
BOTH_OR_NEITHER = {
    "code": -32602,
    "message": "Invalid params: inputResponses and requestState must come together",
}
STATE_ERROR = {"code": -32602, "message": STATE_REJECTED}
CONFIRMATION_ERROR = {"code": -32602, "message": INVALID_CONFIRMATION}
WORKSPACE_ERROR = {"code": -32602, "message": WORKSPACE_DENIED}

DECLINE: dict[str, Any] = {"action": "decline"}
CANCEL: dict[str, Any] = {"action": "cancel"}


def accept(note_id: Any, confirm: Any = True) -> dict[str, Any]:
    return {"action": "accept", "content": {"note_id": note_id, "confirm": confirm}}


@dataclass(frozen=True)
class Kind:
    """What differs between notes_delete and notes_archive on the wire."""

    tool: str
    key: str
    flag: str
    done: str
    verb: str
    confirm_title: str

    def __str__(self) -> str:
        return self.tool


DELETE = Kind(
    "notes_delete",
    "delete_choice",
    "deleted",
    "deleted",
    "delete",
    "Yes, permanently delete this note",
)
ARCHIVE = Kind(
    "notes_archive", "archive_choice", "archived", "archived", "archive", "Yes, archive this note"
)
KINDS = (DELETE, ARCHIVE)


class ManualClock:
    """Aware UTC time that moves only when a test says so."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def choice_title(note: NoteRecord) -> str:
    return f"{note.title} \u2014 {note.path} (updated {iso(note.updated_at)})"


def expected_form(kind: Kind, shown: list[NoteRecord]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "note_id": {
                "type": "string",
                "title": "Note",
                "oneOf": [{"const": n.id, "title": choice_title(n)} for n in shown],
            },
            "confirm": {"type": "boolean", "title": kind.confirm_title},
        },
        "required": ["note_id", "confirm"],
    }


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" not in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


def complete(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    assert result["resultType"] == "complete", result
    return result


def structured(reply: dict[str, Any]) -> dict[str, Any]:
    result = complete(reply)
    assert result["isError"] is False, result
    content: dict[str, Any] = result["structuredContent"]
    assert result["content"] == [
        {"type": "text", "text": json.dumps(content, ensure_ascii=False, separators=(",", ":"))}
    ]
    return content


def tool_error(reply: dict[str, Any]) -> str:
    """The text of an `isError: true` complete result (which carries no structuredContent)."""
    result = complete(reply)
    assert result["isError"] is True, result
    assert "structuredContent" not in result
    assert len(result["content"]) == 1 and result["content"][0]["type"] == "text"
    message: str = result["content"][0]["text"]
    return message


def note_uri(note: NoteRecord) -> str:
    return f"{note.workspace}/{note.path}"


class Flow:
    """One in-process server (plus direct store access) on a shared engine and clock."""

    def __init__(self, settings: Settings, engine: Engine, clock: ManualClock) -> None:
        self.settings = settings
        self.engine = engine
        self.clock = clock
        self.services = Services(settings, engine=engine, clock=clock)
        self.server: McpServer = create_server(settings, self.services)
        self._ids = itertools.count(1)

    def with_keys(self, state_keys: str) -> Flow:
        """Another server on the same database and clock, sealing with other keys."""
        return Flow(replace(self.settings, state_keys=state_keys), self.engine, self.clock)

    # -- wire -------------------------------------------------------------------------------

    def rpc(
        self,
        method: str,
        params: dict[str, Any],
        *,
        principal: str = "alice",
        caps: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        request_id = next(self._ids)
        meta = {META_VERSION: PROTOCOL_VERSION, META_CAPABILITIES: FORM if caps is None else caps}
        request = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {**params, "_meta": meta},
        }
        raw = self.server.handle_raw(json.dumps(request).encode(), principal)
        assert raw is not None
        reply: dict[str, Any] = json.loads(raw)
        assert reply["jsonrpc"] == "2.0" and reply["id"] == request_id
        return reply

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        responses: dict[str, Any] | None = None,
        state: str | None = None,
        principal: str = "alice",
        caps: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if responses is not None:
            params["inputResponses"] = responses
        if state is not None:
            params["requestState"] = state
        return self.rpc("tools/call", params, principal=principal, caps=caps)

    def ask(
        self, kind: Kind, title: str, *, workspace: str = WS, principal: str = "alice"
    ) -> tuple[str, dict[str, Any]]:
        """Round 1; returns (requestState, the elicitation request)."""
        reply = self.call_tool(
            kind.tool, {"workspaceUri": workspace, "title": title}, principal=principal
        )
        assert "error" not in reply, reply
        result = reply["result"]
        assert result["resultType"] == "input_required", result
        state: str = result["requestState"]
        request: dict[str, Any] = result["inputRequests"][kind.key]
        return state, request

    def answer(
        self,
        kind: Kind,
        title: str,
        state: str,
        answer: Any,
        *,
        workspace: str = WS,
        principal: str = "alice",
        caps: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Round 2 with one answer under the tool's own input key."""
        return self.call_tool(
            kind.tool,
            {"workspaceUri": workspace, "title": title},
            responses={kind.key: answer},
            state=state,
            principal=principal,
            caps=caps,
        )

    # -- store ------------------------------------------------------------------------------

    def grant(self, principal: str, uri: str, role: str = "write") -> str:
        canonical = canonical_workspace(uri)
        with write_tx(self.engine) as conn:
            grants.upsert(conn, principal, canonical, role, self.clock())
        return canonical

    def revoke(self, principal: str, uri: str) -> None:
        with write_tx(self.engine) as conn:
            assert grants.revoke(conn, principal, canonical_workspace(uri))

    def seed(self, title: str, path: str, *, workspace: str = WS, body: str = "") -> NoteRecord:
        with write_tx(self.engine) as conn:
            return notes.insert_note(
                conn,
                workspace=canonical_workspace(workspace),
                path=path,
                title=title,
                body=body,
                now=self.clock(),
            )

    def live(self, note_id: str) -> NoteRecord | None:
        """The note with this id in any workspace, or None."""
        query = select(*notes.COLUMNS).where(notes.notes.c.id == note_id)
        with read_tx(self.engine) as conn:
            row = conn.execute(query).first()
        return None if row is None else NoteRecord.from_row(row)

    def count(self, table: str) -> int:
        assert table in ("notes", "consumed_nonces", "audit_log")
        with read_tx(self.engine) as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())

    def rows(self, table: str) -> list[dict[str, Any]]:
        """All rows of consumed_nonces or audit_log, typed, in insertion order."""
        columns = {"consumed_nonces": nonces_table, "audit_log": audit_table}[table]
        order = columns.c.consumed_at if columns is nonces_table else columns.c.id
        with read_tx(self.engine) as conn:
            return [dict(row._mapping) for row in conn.execute(select(columns).order_by(order))]

    def untouched(self, note_count: int) -> bool:
        """Nothing consumed, nothing audited, and the expected number of notes still present."""
        return (
            self.count("notes") == note_count
            and self.count("consumed_nonces") == 0
            and self.count("audit_log") == 0
        )

    def applied(self, kind: Kind, note_id: str) -> bool:
        """Whether the kind's effect is visible on the note."""
        note = self.live(note_id)
        if kind is DELETE:
            return note is None
        return note is not None and note.archived
