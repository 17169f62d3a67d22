"""Note rows written straight through the store, for the subscription tests: a change that
comes from outside the server under test (another process, an editor's sync)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine

from notes_server.store import notes
from notes_server.store.engine import write_tx

NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
WRITER = notes.Author("writer", "test")


def insert(engine: Engine, workspace: str, path: str) -> notes.NoteRecord:
    with write_tx(engine) as conn:
        return notes.insert_note(
            conn, workspace=workspace, path=path, title=path, body="v1", now=NOW, author=WRITER
        )


def insert_many(engine: Engine, workspace: str, count: int) -> list[notes.NoteRecord]:
    """`count` notes (`n0000.md`, ...) written in one transaction."""
    with write_tx(engine) as conn:
        return [
            notes.insert_note(
                conn,
                workspace=workspace,
                path=f"n{i:04}.md",
                title="n",
                body="v",
                now=NOW,
                author=WRITER,
            )
            for i in range(count)
        ]


def touch(engine: Engine, note: notes.NoteRecord) -> notes.NoteRecord:
    """A committed change of the note's body (its change-log row, and so a notification)."""
    with write_tx(engine) as conn:
        changed = notes.update_fields(conn, note, now=NOW, author=WRITER, body=note.body + "+")
    assert changed is not None
    return changed
