"""notes_search: keyword, semantic or hybrid search (the modes this server offers), or recent
notes, with opaque cursor pagination scoped to the search that issued the cursor."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, ClassVar

from notes_server.errors import InvalidParams
from notes_server.markup.tags import tag_key
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import TAGS_ARGUMENT, tag_arguments, tags_by_note
from notes_server.tools.scope import authorize, contain
from notes_server.tools.views import NOTE_SUMMARY_PROPERTIES, WORKSPACE_URI, note_summary, schema

if TYPE_CHECKING:
    from notes_server.store.search import SearchHit

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_OFFSET = 10_000


def _query_digest(
    workspace: str, query: str, include_archived: bool, mode: str, tags: list[str] | None = None
) -> str:
    keyed = sorted({tag_key(tag) for tag in tags or ()})
    material = json.dumps([workspace, query, include_archived, mode, *keyed], ensure_ascii=False)
    from hashlib import sha256  # not at start: hashlib loads OpenSSL (~2.5 ms)

    return sha256(material.encode()).hexdigest()[:16]


def encode_cursor(offset: int, digest: str) -> str:
    raw = json.dumps({"o": offset, "q": digest}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, digest: str) -> int:
    """The offset in a cursor issued for this same search; anything else is -32602."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        offset = data["o"]
        valid = data["q"] == digest and type(offset) is int and 0 < offset <= MAX_OFFSET
        # The lenient base64 decoder skips foreign characters: accept only our own spelling.
        valid = valid and encode_cursor(offset, digest) == cursor
    except (ValueError, KeyError, TypeError, UnicodeEncodeError):
        valid = False
    if not valid:
        raise InvalidParams("Invalid cursor: it does not belong to this search")
    return int(offset)


SIGNALS = ("keyword", "semantic")
HIT_SCHEMA = {
    "type": "object",
    "properties": {
        **NOTE_SUMMARY_PROPERTIES,
        "snippet": {"type": "string"},
        "section": {"type": "string"},
        "score": {"type": "number"},
        "matchedBy": {"type": "array", "items": {"type": "string", "enum": list(SIGNALS)}},
    },
    "required": [*NOTE_SUMMARY_PROPERTIES, "snippet", "score", "matchedBy"],
}


class SearchNotes(Tool):
    name = "notes_search"
    title = "Search notes"
    description = (
        "Keyword search over note titles and bodies in an authorized workspace, best matches "
        "first: notes holding more of the query's words (or the exact phrase) rank higher, and "
        "words inside Chinese, Japanese, Korean or Thai text are found as substrings. Without "
        "`query`, lists notes by most recent update. Archived notes are left out unless "
        "`includeArchived` is true. `tags` keeps only notes carrying every one of them "
        "(case-insensitive). Pass `nextCursor` back as `cursor` for more. Modes offered "
        "by this server: keyword."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "query": {"type": "string", "maxLength": 500},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            "cursor": {"type": "string", "maxLength": 200},
            "includeArchived": {"type": "boolean"},
            "tags": TAGS_ARGUMENT,
            "mode": {"type": "string", "enum": ["hybrid", "keyword", "semantic"]},
        },
        ["workspaceUri"],
    )
    output_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {
            "notes": {"type": "array", "items": HIT_SCHEMA},
            "nextCursor": {"type": "string"},
        },
        "required": ["notes"],
    }
    tool_annotations = tool_hints("Search notes", read_only=True, idempotent=True)

    def modes(self) -> tuple[str, ...]:
        """The modes this server offers, default first."""
        if self.services.semantic_available():
            return ("hybrid", "keyword", "semantic")
        return ("keyword",)

    def describe(self) -> dict[str, Any]:
        entry = super().describe()
        modes = self.modes()
        if len(modes) > 1:
            entry["description"] = entry["description"].replace(
                "Modes offered by this server: keyword.",
                "Modes offered by this server: hybrid (the default: keyword and semantic "
                "matches fused), keyword, semantic (by meaning, from a local embedding model).",
            )
        return entry

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import search
        from notes_server.store.engine import read_tx

        query = (args.get("query") or "").strip()
        limit = int(args.get("limit", DEFAULT_LIMIT))
        include_archived = bool(args.get("includeArchived", False))
        offered = self.modes()
        mode = args.get("mode") or offered[0]
        if mode not in offered:
            raise InvalidParams(
                f"Invalid arguments for tool notes_search: mode {mode!r} is not offered by this "
                f"server (offered: {', '.join(offered)}); semantic search needs the "
                "'semantic' extra and its index"
            )
        tag_filter = tag_arguments(self.name, args.get("tags"), "tags")
        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=False)
            digest = _query_digest(workspace.uri, query, include_archived, mode, tag_filter)
            offset = decode_cursor(args["cursor"], digest) if "cursor" in args else 0
            hits: list[tuple[SearchHit, tuple[str, ...]]]
            if mode == "keyword" or not query:
                signals: tuple[str, ...] = ("keyword",) if query else ()
                found = search.search(
                    conn,
                    workspace.uri,
                    query or None,
                    include_archived=include_archived,
                    limit=limit + 1,
                    offset=offset,
                    tags=tag_filter,
                )
                hits = [(h, signals) for h in found]
            else:
                from notes_server.store import hybrid

                fused = hybrid.search(
                    conn,
                    workspace.uri,
                    query,
                    mode,
                    self.services.embedder(),
                    include_archived=include_archived,
                    limit=limit + 1,
                    offset=offset,
                    tags=tag_filter,
                )
                hits = [(h.hit, h.matched_by) for h in fused]
            shown = tags_by_note(conn, [h.note for h, _ in hits[:limit]])
        items = []
        for hit, matched_by in hits[:limit]:
            item = {
                **note_summary(hit.note, contain(workspace, hit.note), shown[hit.note.id]),
                "snippet": hit.snippet,
                "score": hit.rank,
                "matchedBy": list(matched_by),
            }
            if hit.section is not None:
                item["section"] = hit.section
            items.append(item)
        result: dict[str, Any] = {"notes": items}
        if len(hits) > limit and offset + limit <= MAX_OFFSET:
            result["nextCursor"] = encode_cursor(offset + limit, digest)
        return ToolResult(result)
