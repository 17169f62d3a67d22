"""notes_tags: the tags of a workspace, with how many notes carry each."""

from __future__ import annotations

from typing import Any, ClassVar

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.scope import authorize
from notes_server.tools.views import WORKSPACE_URI, schema

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000


class ListTags(Tool):
    name = "notes_tags"
    title = "List tags"
    description = (
        "The tags used in a workspace (#tags in bodies and front matter `tags:`), each with "
        "the number of notes carrying it, by tag; matched case-insensitively and shown as "
        "first written. `prefix` keeps the tags starting with it (`project` lists "
        "`project/q3`). Archived notes count only with `includeArchived`."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "prefix": {"type": "string", "maxLength": 101},
            "includeArchived": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        },
        ["workspaceUri"],
    )
    output_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"tag": {"type": "string"}, "notes": {"type": "integer"}},
                    "required": ["tag", "notes"],
                },
            },
            "total": {"type": "integer"},
        },
        "required": ["tags", "total"],
    }
    tool_annotations = tool_hints("List tags", read_only=True, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import tags
        from notes_server.store.engine import read_tx

        prefix = (args.get("prefix") or "").strip() or None
        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=False)
            listed, total = tags.workspace_tags(
                conn,
                workspace.uri,
                prefix=prefix,
                include_archived=bool(args.get("includeArchived", False)),
                limit=int(args.get("limit", DEFAULT_LIMIT)),
            )
        return ToolResult({"tags": [t._asdict() for t in listed], "total": total})
