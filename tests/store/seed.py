"""Notes written straight through the store, for the search and semantic index tests: one
write transaction, fixed paths under `n/`, a fixed time."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine

from notes_server.store import notes
from notes_server.store.engine import write_tx

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)


def insert_notes(engine: Engine, workspace: str, bodies: list[tuple[str, str]]) -> list[str]:
    """Insert (title, body) notes into `workspace` in one transaction; their ids, in order."""
    with write_tx(engine) as conn:
        return [
            notes.insert_note(
                conn,
                workspace=workspace,
                path=f"n/{notes.new_note_id()}.md",
                title=title,
                body=body,
                now=NOW,
            ).id
            for title, body in bodies
        ]
