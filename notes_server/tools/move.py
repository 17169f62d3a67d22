"""notes_move: move a note to another path and/or another authorized workspace."""

from __future__ import annotations

from typing import Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import full_note
from notes_server.tools.scope import (
    authorize,
    contain,
    fits_under,
    new_path,
    owned_note,
    stored_path,
)
from notes_server.tools.update import UPDATE_LINKS, UPDATE_OUTPUT, rewritten_view
from notes_server.tools.views import NOTE_ID, WORKSPACE_URI, schema


class MoveNote(Tool):
    name = "notes_move"
    title = "Move note"
    description = (
        "Move a note to `targetWorkspaceUri` (which may equal `workspaceUri`), optionally to a "
        "new relative `path`. Both workspaces must be granted to the user with write access. "
        "Within a workspace, links naming the note by its old path are rewritten (listed in "
        "`rewritten`) unless `updateLinks` is false; links never follow a note into another "
        "workspace."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "targetWorkspaceUri": WORKSPACE_URI,
            "path": {"type": "string", "minLength": 1, "maxLength": 1024},
            "updateLinks": UPDATE_LINKS,
        },
        ["workspaceUri", "noteId", "targetWorkspaceUri"],
    )
    output_schema = UPDATE_OUTPUT
    tool_annotations = tool_hints("Move note", read_only=False, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import link_rewrite, notes
        from notes_server.store.engine import write_tx

        now = self.services.clock()
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
            in_place = target.uri == note.workspace
            rewrite = in_place and path != note.path and args.get("updateLinks", True)
            sources = link_rewrite.sources_of(conn, note) if rewrite else []
            changes: dict[str, Any] = {"workspace": target.uri, "path": path}
            if rewrite:
                body = link_rewrite.moved_body(note, path)
                if body != note.body:
                    changes["body"] = body
            moved = notes.update_fields(
                conn, note, now=now, author=notes.Author(ctx.principal, self.name), **changes
            )
            if moved is None:
                raise ToolFailure("The note changed while moving it; try again.")
            rewritten = link_rewrite.rewrite_links(
                conn, sources, note, moved, now=now, principal=ctx.principal
            )
            shown = full_note(conn, moved, contain(target, moved))
        return ToolResult({"note": shown, "rewritten": rewritten_view(rewritten)})
