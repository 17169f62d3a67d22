"""notes_update: change title and/or body, optionally guarded by an expected version."""

from __future__ import annotations

from typing import Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.create import MAX_BODY
from notes_server.tools.scope import contain, owned_note
from notes_server.tools.titles import clean_title
from notes_server.tools.views import NOTE_ID, NOTE_OUTPUT, TITLE, WORKSPACE_URI, note_full, schema


def version_conflict(note_id: str, current: int, expected: int) -> ToolFailure:
    return ToolFailure(
        f"Version conflict: note {note_id!r} is at version {current}, not {expected}. "
        "Read it again, merge your change, and retry with expectedVersion "
        f"{current}."
    )


class UpdateNote(Tool):
    name = "notes_update"
    title = "Update note"
    description = (
        "Change a note's title and/or body. Pass `expectedVersion` (from notes_read) to refuse "
        "the update if someone else changed the note in between."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "title": TITLE,
            "body": {"type": "string", "maxLength": MAX_BODY},
            "expectedVersion": {"type": "integer", "minimum": 1},
        },
        ["workspaceUri", "noteId"],
    )
    output_schema = NOTE_OUTPUT
    tool_annotations = tool_hints("Update note", read_only=False, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import notes
        from notes_server.store.engine import write_tx

        changes = {k: args[k] for k in ("title", "body") if k in args}
        if "title" in changes:
            changes["title"] = clean_title(changes["title"], self.name)
        if not changes:
            raise ToolFailure("Nothing to update: pass `title` and/or `body`.")
        with write_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=True
            )
            expected = args.get("expectedVersion")
            if expected is not None and expected != note.version:
                raise version_conflict(note.id, note.version, expected)
            author = notes.Author(ctx.principal, self.name)
            updated = notes.update_fields(
                conn, note, now=self.services.clock(), author=author, **changes
            )
            if updated is None:
                raise version_conflict(note.id, note.version + 1, note.version)
            uri = contain(workspace, updated)
        return ToolResult({"note": note_full(updated, uri)})
