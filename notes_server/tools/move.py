"""notes_move: move a note to another path and/or another authorized workspace."""

from __future__ import annotations

from typing import Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.scope import (
    authorize,
    contain,
    fits_under,
    new_path,
    owned_note,
    stored_path,
)
from notes_server.tools.views import NOTE_ID, NOTE_OUTPUT, WORKSPACE_URI, note_full, schema


class MoveNote(Tool):
    name = "notes_move"
    title = "Move note"
    description = (
        "Move a note to `targetWorkspaceUri` (which may equal `workspaceUri`), optionally to a "
        "new relative `path`. Both workspaces must be granted to the user with write access."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "targetWorkspaceUri": WORKSPACE_URI,
            "path": {"type": "string", "minLength": 1, "maxLength": 1024},
        },
        ["workspaceUri", "noteId", "targetWorkspaceUri"],
    )
    output_schema = NOTE_OUTPUT
    tool_annotations = tool_hints("Move note", read_only=False, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import notes
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            # Both grants are checked before the note is looked up; both refusals read the same.
            target = authorize(conn, ctx, args["targetWorkspaceUri"], write=True)
            _, note, _ = owned_note(conn, ctx, args["workspaceUri"], args["noteId"], write=True)
            # A new path must look like no other; a kept one only has to fit the target.
            segments = new_path(self.name, args["path"]) if "path" in args else stored_path(note)
            fits_under(self.name, target, segments)  # before anything is written
            path = "/".join(segments)
            if notes.get_note_by_path(conn, target.uri, path) not in (None, note):
                raise ToolFailure(
                    f"A note already exists at path {path!r} in the target workspace."
                )
            moved = notes.update_fields(
                conn,
                note,
                now=self.services.clock(),
                author=notes.Author(ctx.principal, self.name),
                workspace=target.uri,
                path=path,
            )
            if moved is None:
                raise ToolFailure("The note changed while moving it; try again.")
            uri = contain(target, moved)
        return ToolResult({"note": note_full(moved, uri)})
