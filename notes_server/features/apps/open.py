"""notes_open: one note by id, for the host to show when the timeline view asks for it.

The view never reaches the server: its click becomes a host `tools/call`, authorized like any
other call of this principal. The text is the note as a reader would see it.
"""

from __future__ import annotations

from typing import Any

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import full_note
from notes_server.tools.scope import owned_note
from notes_server.tools.views import NOTE_BY_ID_INPUT, NOTE_OUTPUT, iso


class NotesOpen(Tool):
    name = "notes_open"
    title = "Open note"
    description = (
        "Open one note by id (from notes_timeline or notes_search) to show it to the user: "
        "title, path, last update and body."
    )
    input_schema = NOTE_BY_ID_INPUT
    output_schema = NOTE_OUTPUT
    tool_annotations = tool_hints("Open note", read_only=True, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store.engine import read_tx

        with read_tx(self.services.engine) as conn:
            _, note, uri = owned_note(conn, ctx, args["workspaceUri"], args["noteId"], write=False)
            shown = full_note(conn, note, uri)
        flag = ", archived" if note.archived else ""
        text = f"# {note.title}\n({note.path}, updated {iso(note.updated_at)}{flag})\n\n{note.body}"
        return ToolResult({"note": shown}, text)
