"""Benchmark peer: the notes server written idiomatically on the official MCP Python SDK.

A *benchmark dependency only* (the `bench` extra); notes-server never imports it. It serves the
same four tools as notes-server (`notes_create`, `notes_search`, `notes_read`, `notes_delete`) on
the SAME SQLite schema and data: it opens the database file that notes-server migrated and reads
and writes the same tables, so it sees notes notes-server created and vice versa.

SDK usage follows the SDK documentation, nothing tuned either way:
- `MCPServer` with `@mcp.tool()` functions; typed (pydantic) outputs give `outputSchema` and
  `structuredContent`; `ToolError` gives an `isError` result; `MCPError` a protocol error.
- Tools are plain `def` functions, so the SDK runs them in its worker-thread pool (the documented
  way to do blocking I/O). Each worker thread keeps one stdlib `sqlite3` connection with the same
  pragmas notes-server sets (WAL, synchronous=NORMAL, busy_timeout, foreign_keys).
- `notes_delete` confirms through the SDK's own multi-round-trip support: round 1 returns an
  `InputRequiredResult` (a form elicitation + `request_state`), which the SDK seals (AES-GCM,
  `RequestStateSecurity`) and binds to the tool, arguments and expiry; round 2 reads the verified
  plaintext from `ctx.request_state` and the answer from `ctx.input_responses`, then runs ONE
  `BEGIN IMMEDIATE` transaction: claim the nonce, re-check grant and note version, delete, audit.
- stdio: `mcp.run()`; the SDK serves 2026-07-28 natively when the first request carries the
  per-request `_meta` envelope (no `initialize`). HTTP: `streamable_http_app(stateless_http=True,
  json_response=True)` under uvicorn, N worker processes via an app factory.
- `--sessions` (HTTP): the SDK's stateful mode for 2025-11-25 clients (`stateless_http=False`,
  SSE responses, its defaults); `notes_delete` then asks with a server-initiated
  `elicitation/create` (`ctx.session.elicit_form`, the same form) and deletes in the same
  transaction as round 2 above.

Usage:
    sdk_notes_server.py --db PATH --principal NAME                       # stdio
    sdk_notes_server.py --db PATH --principal NAME --transport http --port P [--workers N]
                        [--sessions]
Environment: SDK_PEER_STATE_KEY (hex, >= 32 bytes) shares the requestState key between
processes; without it each process seals with its own key.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sqlite3
import sys
import threading
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote, urlsplit

import anyio
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ToolAnnotations,
)
from peer_index import PEER_FTS, PEER_FTS_REBUILD, PEER_FTS_SQL
from pydantic import BaseModel, Field

ENV_DB = "SDK_PEER_DB"
ENV_PRINCIPAL = "SDK_PEER_PRINCIPAL"
ENV_KEY = "SDK_PEER_STATE_KEY"
ENV_SESSIONS = "SDK_PEER_SESSIONS"
BUSY_TIMEOUT_MS = 30_000
MAX_CANDIDATES = 10
DENIED = "Workspace is not available to this principal"
STATE_TTL = 300.0
NOTE_COLUMNS = "id, workspace, path, title, body, created_at, updated_at, version, archived"
_TOKEN = re.compile(r"\w+", re.UNICODE)


# -- storage ----------------------------------------------------------------------------------


class Store:
    """One sqlite3 connection per worker thread, autocommit mode with explicit BEGINs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()

    def ensure_index(self) -> None:
        """The peer's full-text index (PEER_FTS), built from the notes when it is missing."""
        conn = self.conn()
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (PEER_FTS,)
        ).fetchone()
        if found is None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(PEER_FTS_SQL)
            conn.execute(PEER_FTS_REBUILD)
            conn.execute("COMMIT")

    def conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
        return conn


def now_text() -> tuple[datetime, str]:
    """Naive UTC in the text form SQLAlchemy's SQLite DateTime uses, so both servers agree."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return now, now.strftime("%Y-%m-%d %H:%M:%S.%f")


def iso(text: str) -> str:
    return text[:19].replace(" ", "T") + "Z"


def title_key(title: str) -> str:
    return " ".join(title.casefold().split())


def canonical_workspace(uri: str) -> str:
    """file:///a/b -> canonical text; anything else is refused with the one denial message."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost") or parts.query:
        raise MCPError(code=INVALID_PARAMS, message=DENIED)
    if parts.fragment or not parts.path.startswith("/"):
        raise MCPError(code=INVALID_PARAMS, message=DENIED)
    segments = [unquote(s) for s in parts.path.split("/")[1:]]
    if segments and segments[-1] == "":
        segments.pop()
    if not segments or any(s in ("", ".", "..") or "/" in s or "\x00" in s for s in segments):
        raise MCPError(code=INVALID_PARAMS, message=DENIED)
    return "file:///" + "/".join(quote(unicodedata.normalize("NFC", s)) for s in segments)


def authorize(conn: sqlite3.Connection, principal: str, uri: str, write: bool) -> str:
    workspace = canonical_workspace(uri)
    row = conn.execute(
        "SELECT role FROM workspace_grants WHERE principal = ? AND workspace = ?",
        (principal, workspace),
    ).fetchone()
    if row is None or (write and row[0] != "write"):
        raise MCPError(code=INVALID_PARAMS, message=DENIED)
    return workspace


def note_path_segments(path: str) -> list[str]:
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise ToolError("stored note path is not canonical")
    return segments


# -- wire shapes (pydantic: the SDK derives outputSchema and structuredContent) ---------------


class NoteSummary(BaseModel):
    id: str
    title: str
    path: str
    uri: str
    version: int
    createdAt: str
    updatedAt: str
    archived: bool


class Note(NoteSummary):
    body: str


class NoteResult(BaseModel):
    note: Note


class SearchHit(NoteSummary):
    snippet: str


class SearchResult(BaseModel):
    notes: list[SearchHit]
    nextCursor: str | None = None


class DeleteOutcome(BaseModel):
    deleted: bool
    outcome: Literal["deleted", "declined", "cancelled"]
    noteId: str | None = None
    title: str | None = None
    uri: str | None = None


def note_from_row(workspace: str, row: tuple[Any, ...]) -> Note:
    uri = workspace + "/" + "/".join(quote(s) for s in note_path_segments(row[2]))
    return Note(
        id=row[0],
        title=row[3],
        path=row[2],
        uri=uri,
        version=row[7],
        createdAt=iso(row[5]),
        updatedAt=iso(row[6]),
        archived=bool(row[8]),
        body=row[4],
    )


def fts_query(query: str) -> str | None:
    words = _TOKEN.findall(query)[:16]
    return " ".join(f'"{w}"*' for w in words) if words else None


# -- the server -------------------------------------------------------------------------------


def build_server(db_path: str, principal: str, *, sessions: bool = False) -> MCPServer:
    key = os.environ.get(ENV_KEY)
    security = (
        RequestStateSecurity(keys=[bytes.fromhex(key)], ttl=STATE_TTL)
        if key
        else RequestStateSecurity.ephemeral(ttl=STATE_TTL)
    )
    mcp = MCPServer(
        "notes-sdk-peer",
        version="0.1.0",
        instructions="Notes in granted workspaces (SDK benchmark peer).",
        request_state_security=security,
    )
    store = Store(db_path)
    store.ensure_index()

    @mcp.tool(annotations=ToolAnnotations(title="Create note", read_only_hint=False))
    def notes_create(
        workspaceUri: str,
        title: Annotated[str, Field(min_length=1, max_length=500)],
        body: str = "",
        path: str | None = None,
    ) -> NoteResult:
        """Create a markdown note in a workspace the user granted."""
        title = title.strip()
        if not title:
            raise ToolError("The title must contain visible characters.")
        slug = re.sub(r"[^\w]+", "-", title.casefold()).strip("-_")[:120] or "note"
        note_path = path or f"{slug}.md"
        note_path_segments(note_path)
        conn = store.conn()
        _, stamp = now_text()
        note_id = "note_" + secrets.token_hex(10)
        conn.execute("BEGIN IMMEDIATE")
        try:
            workspace = authorize(conn, principal, workspaceUri, write=True)
            try:
                conn.execute(
                    "INSERT INTO notes (id, workspace, path, title, title_key, body, created_at,"
                    " updated_at, version, archived, archived_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, 0, NULL)",
                    (note_id, workspace, note_path, title, title_key(title), body, stamp, stamp),
                )
            except sqlite3.IntegrityError:
                raise ToolError(f"A note already exists at path {note_path!r}.") from None
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        row = (note_id, workspace, note_path, title, body, stamp, stamp, 1, 0)
        return NoteResult(note=note_from_row(workspace, row))

    @mcp.tool(annotations=ToolAnnotations(title="Read note", read_only_hint=True))
    def notes_read(
        workspaceUri: str, noteId: Annotated[str, Field(min_length=1, max_length=64)]
    ) -> NoteResult:
        """Read one note (title, path, body, version) by id from an authorized workspace."""
        conn = store.conn()
        conn.execute("BEGIN")
        try:
            workspace = authorize(conn, principal, workspaceUri, write=False)
            row = conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = ? AND workspace = ?",
                (noteId, workspace),
            ).fetchone()
        finally:
            conn.execute("COMMIT")
        if row is None:
            raise ToolError(f"No note with id {noteId!r} in this workspace.")
        return NoteResult(note=note_from_row(workspace, row))

    @mcp.tool(annotations=ToolAnnotations(title="Search notes", read_only_hint=True))
    def notes_search(
        workspaceUri: str,
        query: Annotated[str | None, Field(max_length=500)] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        includeArchived: bool = False,
    ) -> SearchResult:
        """Full-text search over note titles and bodies, best matches first."""
        conn = store.conn()
        archived = "" if includeArchived else " AND n.archived = 0"
        conn.execute("BEGIN")
        try:
            workspace = authorize(conn, principal, workspaceUri, write=False)
            match = fts_query(query) if query else None
            if query and match is None:
                rows: list[Any] = []
            elif match is None:
                rows = conn.execute(
                    f"SELECT {', '.join('n.' + c for c in NOTE_COLUMNS.split(', '))}, ''"
                    f" FROM notes n WHERE n.workspace = ?{archived}"
                    " ORDER BY n.updated_at DESC, n.id LIMIT ?",
                    (workspace, limit + 1),
                ).fetchall()
            else:
                rows = conn.execute(
                    f"SELECT {', '.join('n.' + c for c in NOTE_COLUMNS.split(', '))},"
                    f" snippet({PEER_FTS}, 1, '**', '**', '…', 12)"
                    f" FROM notes n JOIN {PEER_FTS} ON {PEER_FTS}.rowid = n.seq"
                    f" WHERE {PEER_FTS} MATCH ? AND n.workspace = ?{archived}"
                    f" ORDER BY bm25({PEER_FTS}, 10.0, 1.0), n.id LIMIT ?",
                    (match, workspace, limit + 1),
                ).fetchall()
        finally:
            conn.execute("COMMIT")
        hits = []
        for row in rows[:limit]:
            note = note_from_row(workspace, row)
            hits.append(SearchHit(**note.model_dump(exclude={"body"}), snippet=row[9] or ""))
        return SearchResult(notes=hits)

    delete_annotations = ToolAnnotations(
        title="Delete note", read_only_hint=False, destructive_hint=True, idempotent_hint=False
    )

    def require_form_elicitation(ctx: Context) -> None:
        caps = ctx.client_capabilities
        elicitation = caps.elicitation if caps is not None else None
        if elicitation is None or (elicitation.form is None and elicitation.url is not None):
            raise MCPError(
                code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                message="This tool asks the user to confirm in a form",
                data={"requiredCapabilities": {"elicitation": {"form": {}}}},
            )

    def notes_delete(
        workspaceUri: str, title: Annotated[str, Field(min_length=1, max_length=500)], ctx: Context
    ) -> DeleteOutcome | InputRequiredResult:
        """Permanently delete one note whose title matches, after the user picks and confirms."""
        require_form_elicitation(ctx)
        if ctx.request_state is None:
            return ask_confirmation(workspaceUri, title)
        return apply_confirmation(workspaceUri, title, ctx)

    async def notes_delete_in_session(
        workspaceUri: str, title: Annotated[str, Field(min_length=1, max_length=500)], ctx: Context
    ) -> DeleteOutcome:
        """Permanently delete one note whose title matches, after the user picks and confirms."""
        # 2025-11-25 sessions: the SDK's server-initiated `elicitation/create` on the call's
        # SSE stream (`ctx.session.elicit_form`, the schema given as is, like round 1 above);
        # the database work runs in the worker-thread pool like the plain `def` tools.
        require_form_elicitation(ctx)
        form, state = await anyio.to_thread.run_sync(candidates, workspaceUri, title)
        answer = await ctx.session.elicit_form(
            message=form.message,
            requested_schema=form.requested_schema,
            related_request_id=ctx.request_context.request_id,
        )
        return await anyio.to_thread.run_sync(apply_answer, workspaceUri, state, answer)

    if sessions:
        mcp.tool(name="notes_delete", annotations=delete_annotations)(notes_delete_in_session)
    else:
        mcp.tool(annotations=delete_annotations)(notes_delete)

    def ask_confirmation(workspace_uri: str, title: str) -> InputRequiredResult:
        form, state = candidates(workspace_uri, title)
        return InputRequiredResult(
            input_requests={"delete_choice": ElicitRequest(params=form)},
            request_state=json.dumps(state, separators=(",", ":")),
        )

    def candidates(workspace_uri: str, title: str) -> tuple[ElicitRequestFormParams, Any]:
        conn = store.conn()
        conn.execute("BEGIN")
        try:
            workspace = authorize(conn, principal, workspace_uri, write=True)
            rows = conn.execute(
                # The same statement notes-server runs (its subquery keeps SQLite on the
                # title index; see notes_server.store.notes.find_by_title).
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE seq IN (SELECT seq FROM notes"
                " WHERE workspace = ? AND title_key = ?) AND archived = 0"
                " ORDER BY updated_at DESC, id LIMIT ?",
                (workspace, title_key(title), MAX_CANDIDATES),
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        if not rows:
            raise ToolError(f"No matching note in this workspace: no note titled {title!r}.")
        choices = [{"const": r[0], "title": f"{r[3]} — {r[2]} (updated {iso(r[6])})"} for r in rows]
        form = ElicitRequestFormParams(
            message=f"{len(rows)} note(s) titled {title!r} match. Choose one and confirm.",
            requested_schema={
                "type": "object",
                "properties": {
                    "note_id": {"type": "string", "title": "Note", "oneOf": choices},
                    "confirm": {"type": "boolean", "title": "Yes, permanently delete this note"},
                },
                "required": ["note_id", "confirm"],
            },
        )
        state = {"c": [[r[0], r[7]] for r in rows], "n": secrets.token_hex(16), "w": workspace}
        return form, state

    def apply_confirmation(workspace_uri: str, title: str, ctx: Context) -> DeleteOutcome:
        state = json.loads(ctx.request_state or "{}")
        answer = (ctx.input_responses or {}).get("delete_choice")
        return apply_answer(workspace_uri, state, answer)

    def apply_answer(workspace_uri: str, state: Any, answer: Any) -> DeleteOutcome:
        if not isinstance(answer, ElicitResult):
            raise MCPError(code=INVALID_PARAMS, message="Invalid confirmation")
        if answer.action != "accept":
            outcome: Literal["declined", "cancelled"] = (
                "declined" if answer.action == "decline" else "cancelled"
            )
            return DeleteOutcome(deleted=False, outcome=outcome)
        content = answer.content or {}
        versions = {entry[0]: entry[1] for entry in state["c"]}
        note_id = content.get("note_id")
        if content.get("confirm") is not True or note_id not in versions:
            raise MCPError(code=INVALID_PARAMS, message="Invalid confirmation")
        now, stamp = now_text()
        expires = (now + timedelta(seconds=STATE_TTL)).strftime("%Y-%m-%d %H:%M:%S.%f")
        conn = store.conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            claimed = conn.execute(
                "INSERT INTO consumed_nonces (nonce, principal, tool, outcome, answer_digest,"
                " result_json, consumed_at, expires_at) VALUES (?, ?, 'notes_delete', 'deleted',"
                " NULL, NULL, ?, ?) ON CONFLICT (nonce) DO NOTHING RETURNING nonce",
                (state["n"], principal, stamp, expires),
            ).fetchone()
            if claimed is None:
                raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState")
            workspace = authorize(conn, principal, workspace_uri, write=True)
            row = conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE id = ? AND workspace = ?",
                (note_id, workspace),
            ).fetchone()
            if row is None or row[7] != versions[note_id] or row[8]:
                raise ToolError("The chosen note changed or no longer exists; nothing deleted.")
            note = note_from_row(workspace, row)
            conn.execute("DELETE FROM notes WHERE id = ? AND version = ?", (note_id, row[7]))
            conn.execute(
                "INSERT INTO audit_log (at, principal, tool, outcome, workspace, note_id,"
                " note_title, note_path, nonce) VALUES (?, ?, 'notes_delete', 'deleted', ?, ?, ?,"
                " ?, ?)",
                (stamp, principal, workspace, note_id, row[3], row[2], state["n"]),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return DeleteOutcome(
            deleted=True, outcome="deleted", noteId=note_id, title=note.title, uri=note.uri
        )

    return mcp


def http_app() -> Any:
    """uvicorn app factory (used for --workers N): configuration comes from the environment."""
    sessions = os.environ.get(ENV_SESSIONS) == "1"
    server = build_server(os.environ[ENV_DB], os.environ[ENV_PRINCIPAL], sessions=sessions)
    if sessions:
        # The SDK's stateful mode, as documented: SSE responses, which carry `elicitation/create`.
        return server.streamable_http_app(stateless_http=False, json_response=False)
    return server.streamable_http_app(stateless_http=True, json_response=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="path of the notes-server SQLite file")
    parser.add_argument("--principal", required=True)
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--sessions",
        action="store_true",
        help="HTTP: stateful 2025-11-25 sessions (Mcp-Session-Id, SSE), notes_delete confirming "
        "through a server-initiated elicitation/create (ctx.session.elicit_form)",
    )
    args = parser.parse_args()
    db = args.db.removeprefix("sqlite:///")
    if args.transport == "stdio":
        build_server(db, args.principal).run()
        return
    import uvicorn

    os.environ[ENV_DB] = db
    os.environ[ENV_PRINCIPAL] = args.principal
    os.environ[ENV_SESSIONS] = "1" if args.sessions else "0"
    here = os.path.dirname(os.path.abspath(__file__))
    if args.workers == 1:
        uvicorn.run(
            "sdk_notes_server:http_app",
            factory=True,
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            app_dir=here,
        )
        return
    # uvicorn's multi-worker mode hands workers a socket re-created from its descriptor, which
    # asyncio does not recognise as TCP, so accepted connections lack TCP_NODELAY and every
    # reply stalls ~40 ms (Nagle + delayed ACK). The same fix notes-server applies to itself:
    # set it on the listener (Linux passes it on to accepted sockets).
    import socket

    from uvicorn.supervisors import Multiprocess

    sys.path.insert(0, here)
    config = uvicorn.Config(
        "sdk_notes_server:http_app",
        factory=True,
        host="127.0.0.1",
        port=args.port,
        workers=args.workers,
        log_level="warning",
    )
    sock = config.bind_socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    Multiprocess(config, sockets=[sock]).run()


if __name__ == "__main__":
    main()
