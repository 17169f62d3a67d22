"""notes_read: one note by id, only from inside the named workspace."""

from __future__ import annotations

from typing import Any, ClassVar

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import LINK_COUNTS_SCHEMA, full_note
from notes_server.tools.scope import owned_note
from notes_server.tools.views import NOTE_BY_ID_INPUT, NOTE_SCHEMA


class ReadNote(Tool):
    name = "notes_read"
    title = "Read note"
    description = (
        "Read one note (title, path, body, version, tags, front matter properties, and how "
        "many links it has out, unresolved and in) by id from an authorized workspace."
    )
    input_schema = NOTE_BY_ID_INPUT
    output_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {
            "note": {
                **NOTE_SCHEMA,
                "properties": {**NOTE_SCHEMA["properties"], "links": LINK_COUNTS_SCHEMA},
                "required": [*NOTE_SCHEMA["required"], "links"],
            }
        },
        "required": ["note"],
    }
    tool_annotations = tool_hints("Read note", read_only=True, idempotent=True)

    def is_quick(self) -> bool:
        # One note by primary key in one read transaction; on embedded SQLite (WAL) a reader
        # never waits for writers. A database server is a network round trip: not quick.
        return self.services.settings.sqlite_path is not None

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store.engine import read_tx

        # owned_note reads the grant and the note in one statement; the indexes in the same
        # snapshot
        with read_tx(self.services.engine) as conn:
            _, note, uri = owned_note(conn, ctx, args["workspaceUri"], args["noteId"], write=False)
            shown = full_note(conn, note, uri, link_counts=True)
        return ToolResult({"note": shown})
