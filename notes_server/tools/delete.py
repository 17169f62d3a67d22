"""notes_delete: permanently delete one note, only after the user picks it and confirms."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from notes_server.tools.base import tool_hints
from notes_server.tools.confirm import Action, ConfirmedAction, output_schema_for

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.notes import NoteRecord


class DeleteNote(ConfirmedAction):
    name = "notes_delete"
    title = "Delete note"
    description = (
        "Permanently delete one note in an authorized workspace. `title` may be the whole "
        "title or any part of it, as the user said it (case-insensitive): e.g. `TPS report` "
        "offers 'TPS report 2024' and 'TPS report 2025'. Always asks the user, in a form, to "
        "pick the exact note and confirm; the client must support form elicitation. Nothing is "
        "deleted without that explicit confirmation."
    )
    action = Action(
        tool="notes_delete",
        input_key="delete_choice",
        phase="delete/confirm",
        verb="delete",
        flag="deleted",
        done="deleted",
        confirm_title="Yes, permanently delete this note",
    )
    output_schema = output_schema_for(action)
    tool_annotations = tool_hints("Delete note", read_only=False, destructive=True)

    def apply(self, conn: Connection, note: NoteRecord, now: datetime, principal: str) -> bool:
        from notes_server.store import notes

        return notes.delete_note(conn, note)
