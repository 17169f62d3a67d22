"""notes_create: add a note to an authorized workspace."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import sorted_tags
from notes_server.tools.scope import authorize, contain, fits_under, new_path
from notes_server.tools.titles import clean_title
from notes_server.tools.views import NOTE_OUTPUT, TITLE, WORKSPACE_URI, note_full, schema

MAX_BODY = 1_000_000


def slug_path(title: str) -> str:
    """A readable default path from a title: lowercase words joined by dashes, plus `.md`."""
    text = unicodedata.normalize("NFKC", title).casefold()
    slug = re.sub(r"[^\w]+", "-", text).strip("-_")[:120].strip("-_")
    return unicodedata.normalize("NFC", slug or "note") + ".md"


class CreateNote(Tool):
    name = "notes_create"
    title = "Create note"
    description = (
        "Create a markdown note in a workspace the user granted. `path` is relative to the "
        "workspace (e.g. `projects/q3.md`); it defaults to a slug of the title. Fails with a "
        "message naming the conflicting path if a note already lives there."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "title": TITLE,
            "body": {"type": "string", "maxLength": MAX_BODY},
            "path": {"type": "string", "minLength": 1, "maxLength": 1024},
        },
        ["workspaceUri", "title"],
    )
    output_schema = NOTE_OUTPUT
    tool_annotations = tool_hints("Create note", read_only=False)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import notes
        from notes_server.store.engine import write_tx

        title = clean_title(args["title"], self.name)
        segments = new_path(self.name, args.get("path") or slug_path(title))
        path = "/".join(segments)
        with write_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=True)
            fits_under(self.name, workspace, segments)  # before anything is written
            try:
                note = notes.insert_note(
                    conn,
                    workspace=workspace.uri,
                    path=path,
                    title=title,
                    body=args.get("body", ""),
                    now=self.services.clock(),
                    author=notes.Author(ctx.principal, self.name),
                )
            except notes.PathConflict:
                raise ToolFailure(
                    f"A note already exists at path {path!r} in this workspace; "
                    "choose another `path` or update that note."
                ) from None
            uri = contain(workspace, note)
        return ToolResult({"note": note_full(note, uri, sorted_tags(note.body))})
