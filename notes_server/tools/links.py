"""notes_links: what a note links to and which notes link to it, inside its workspace."""

from __future__ import annotations

from typing import Any, ClassVar

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import LINK_COUNTS_SCHEMA
from notes_server.tools.scope import contain, owned_note
from notes_server.tools.views import NOTE_ID, WORKSPACE_URI, schema

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

_NOTE_REF = {
    "id": {"type": "string"},
    "title": {"type": "string"},
    "path": {"type": "string"},
}


class NoteLinks(Tool):
    name = "notes_links"
    title = "Note links"
    description = (
        "The links of one note: `outgoing` ([[...]] and markdown links in its body, each "
        "resolved to a note of the same workspace, or unresolved with the text as written) and "
        "`incoming` (the notes linking to it, with a short context), plus `counts`. At most "
        "`limit` of each (default 100); counts are always complete. A note named here that "
        "is archived is still listed, with `archived: true`; a title names a live note "
        "before an archived one."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        },
        ["workspaceUri", "noteId"],
    )
    output_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {
            "note": {"type": "object", "properties": _NOTE_REF, "required": list(_NOTE_REF)},
            "outgoing": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "kind": {"enum": ["wiki", "markdown"]},
                        "resolved": {"type": "boolean"},
                        "heading": {"type": "string"},
                        **_NOTE_REF,
                        "archived": {"type": "boolean"},
                    },
                    "required": ["text", "kind", "resolved"],
                },
            },
            "incoming": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        **_NOTE_REF,
                        "archived": {"type": "boolean"},
                        "context": {"type": "string"},
                        "links": {"type": "integer"},
                    },
                    "required": [*_NOTE_REF, "archived", "context", "links"],
                },
            },
            "counts": LINK_COUNTS_SCHEMA,
        },
        "required": ["note", "outgoing", "incoming", "counts"],
    }
    tool_annotations = tool_hints("Note links", read_only=True, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import links
        from notes_server.store.engine import read_tx

        limit = int(args.get("limit", DEFAULT_LIMIT))
        with read_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=False
            )
            out = links.outgoing(conn, note, limit=limit)
            into = links.incoming(conn, note, limit=limit)
            counted = links.counts(conn, note)
            # Every note named here is of this workspace: contain() proves it once more.
            for link in out:
                if link.target is not None:
                    contain(workspace, link.target)
            for back in into:
                contain(workspace, back.source)
        outgoing = []
        for link in out:
            item: dict[str, Any] = {
                "text": link.text,
                "kind": link.kind,
                "resolved": link.target is not None,
            }
            if link.heading:
                item["heading"] = link.heading
            if link.target is not None:
                target = link.target
                item.update(
                    id=target.id, title=target.title, path=target.path, archived=target.archived
                )
            outgoing.append(item)
        incoming = [
            {
                "id": back.source.id,
                "title": back.source.title,
                "path": back.source.path,
                "archived": back.source.archived,
                "context": back.context,
                "links": back.links,
            }
            for back in into
        ]
        return ToolResult(
            {
                "note": {"id": note.id, "title": note.title, "path": note.path},
                "outgoing": outgoing,
                "incoming": incoming,
                "counts": counted._asdict(),
            }
        )
