"""notes_archive (confirmed, like delete) and notes_restore (plain, reversible)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.confirm import Action, ConfirmedAction, output_schema_for
from notes_server.tools.described import full_note
from notes_server.tools.scope import contain, owned_note
from notes_server.tools.views import NOTE_BY_ID_INPUT, NOTE_OUTPUT

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.notes import NoteRecord


class ArchiveNote(ConfirmedAction):
    name = "notes_archive"
    title = "Archive note"
    description = (
        "Archive one note: it leaves search results (unless includeArchived) but is kept and "
        "can be brought back with notes_restore. `title` may be the whole title or any part "
        "of it (case-insensitive). Always asks the user, in a form, to pick the note and "
        "confirm."
    )
    action = Action(
        tool="notes_archive",
        input_key="archive_choice",
        phase="archive/confirm",
        verb="archive",
        flag="archived",
        done="archived",
        confirm_title="Yes, archive this note",
    )
    output_schema = output_schema_for(action)
    tool_annotations = tool_hints("Archive note", read_only=False, destructive=True)

    def apply(self, conn: Connection, note: NoteRecord, now: datetime, principal: str) -> bool:
        from notes_server.store import notes

        author = notes.Author(principal, self.name)
        changed = notes.update_fields(
            conn, note, now=now, author=author, archived=True, archived_at=now
        )
        return changed is not None


class RestoreNote(Tool):
    name = "notes_restore"
    title = "Restore note"
    description = "Bring an archived note back into search results, by id."
    input_schema = NOTE_BY_ID_INPUT
    output_schema = NOTE_OUTPUT
    tool_annotations = tool_hints("Restore note", read_only=False, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import notes
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=True
            )
            if not note.archived:
                raise ToolFailure(f"Note {note.id!r} is not archived; nothing to restore.")
            restored = notes.update_fields(
                conn,
                note,
                now=self.services.clock(),
                author=notes.Author(ctx.principal, self.name),
                archived=False,
                archived_at=None,
            )
            if restored is None:
                raise ToolFailure("The note changed while restoring it; try again.")
            shown = full_note(conn, restored, contain(workspace, restored))
        return ToolResult({"note": shown})
