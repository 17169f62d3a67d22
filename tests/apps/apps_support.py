"""Shared by the MCP Apps tests: a workspace with notes on known days, and the capabilities an
Apps host declares."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from notes_server.store import grants, notes
from notes_server.store.engine import write_tx
from tests.helpers import make_request

UI = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
VIEW = "ui://notes/timeline.html"
NOTES = "file:///home/alice/notes"
APPS: dict[str, Any] = {"extensions": {UI: {"mimeTypes": [APP_MIME]}}}

# (path, title, body, updated at, archived)
SEED = [
    ("plans/q1.md", "Q1 plans", "Ship the timeline view", datetime(2026, 3, 2, 9, 30), False),
    ("journal/mar-2.md", "Standup", "Talked about caching", datetime(2026, 3, 2, 16, 5), False),
    ("journal/mar-1.md", "Garden", "Planted tomatoes", datetime(2026, 3, 1, 8, 0), False),
    ("old/feb.md", "Old idea", "Archived long ago", datetime(2026, 2, 20, 12, 0), True),
]


def seed_notes(engine: Engine, principal: str = "alice") -> dict[str, str]:
    """Grant `principal` write access to NOTES and store SEED; returns title -> note id."""
    ids: dict[str, str] = {}
    with write_tx(engine) as conn:
        grants.upsert(conn, principal, NOTES, "write", datetime(2026, 1, 1, tzinfo=UTC))
        for path, title, body, when, archived in SEED:
            moment = when.replace(tzinfo=UTC)
            note = notes.insert_note(
                conn, workspace=NOTES, path=path, title=title, body=body, now=moment
            )
            if archived:
                notes.update_fields(conn, note, now=moment, archived=True, archived_at=moment)
            ids[title] = note.id
    return ids


LOOPBACK_URL = "http://127.0.0.1:8765"


def rpc(
    method: str, params: dict[str, Any] | None = None, **kw: Any
) -> tuple[bytes, dict[str, str]]:
    """A 2026-07-28 request body and the standard headers a correct client sends with it."""
    message = make_request(method, params, **kw)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": message["params"]["_meta"][
            "io.modelcontextprotocol/protocolVersion"
        ],
        "Mcp-Method": method,
    }
    name = {"tools/call": "name", "resources/read": "uri"}.get(method)
    if name is not None:
        headers["Mcp-Name"] = message["params"][name]
    return json.dumps(message).encode(), headers
