"""notes_timeline: a workspace's notes over time, grouped by the UTC day of their last update.

The text is a dated outline a model can read; `structuredContent` carries the same notes (with
snippets) and the per-day counts the view draws its density strip from. Notes come from the
store's own search (ranked for a query, newest first without one), scanned in pages up to a
bound, and filtered to the date range here.
"""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING, Any, ClassVar

from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import tags_by_note
from notes_server.tools.scope import authorize, contain
from notes_server.tools.titles import argument_error
from notes_server.tools.views import NOTE_SUMMARY_PROPERTIES, WORKSPACE_URI, note_summary, schema

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.security.uri import WorkspaceUri
    from notes_server.store.search import SearchHit

MAX_NOTES = 500
SCAN_PAGE = 200
MAX_SCAN = 2000
DAY_FORMAT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
DAY = {"type": "string", "minLength": 10, "maxLength": 10, "description": "A UTC day, YYYY-MM-DD"}

ENTRY_SCHEMA = {
    "type": "object",
    "properties": {**NOTE_SUMMARY_PROPERTIES, "snippet": {"type": "string"}},
    "required": [*NOTE_SUMMARY_PROPERTIES, "snippet"],
}


class NotesTimeline(Tool):
    name = "notes_timeline"
    title = "Notes timeline"
    description = (
        "A workspace's notes over time, grouped by the day they were last updated (UTC), newest "
        "day first. Optional `from`/`to` (YYYY-MM-DD, inclusive) bound the days, `query` keeps "
        "only notes matching the words, `includeArchived` adds archived notes. Use notes_open "
        "with an id to read one."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "from": DAY,
            "to": DAY,
            "query": {"type": "string", "maxLength": 500},
            "includeArchived": {"type": "boolean"},
        },
        ["workspaceUri"],
    )
    output_schema: ClassVar[dict[str, Any] | None] = {
        "type": "object",
        "properties": {
            "workspaceUri": {"type": "string"},
            "notes": {"type": "array", "items": ENTRY_SCHEMA},
            "days": {"type": "array", "items": {"type": "object"}},
            "truncated": {"type": "boolean"},
        },
        "required": ["workspaceUri", "notes", "days", "truncated"],
    }
    tool_annotations = tool_hints("Notes timeline", read_only=True, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store.engine import read_tx

        first, last = _day(args, "from"), _day(args, "to")
        if first and last and first > last:
            raise argument_error(self.name, "from", "must not be after `to`")
        query = (args.get("query") or "").strip() or None
        include_archived = bool(args.get("includeArchived", False))
        with read_tx(self.services.engine) as conn:
            workspace = authorize(conn, ctx, args["workspaceUri"], write=False)
            hits, truncated = _scan(conn, workspace, query, include_archived, first, last)
            shown = tags_by_note(conn, [h.note for h in hits])
        entries = [
            {
                **note_summary(h.note, contain(workspace, h.note), shown[h.note.id]),
                "snippet": h.snippet,
            }
            for h in hits
        ]
        entries.sort(key=lambda e: (e["updatedAt"], e["id"]), reverse=True)
        days = _days(entries)
        structured: dict[str, Any] = {
            "workspaceUri": workspace.uri,
            "notes": entries,
            "days": days,
            "truncated": truncated,
        }
        for key in ("from", "to", "query"):
            if args.get(key):
                structured[key] = args[key]
        return ToolResult(structured, _text(workspace.uri, entries, days, truncated))


def _day(args: dict[str, Any], key: str) -> date | None:
    text = args.get(key)
    if text is None:
        return None
    if DAY_FORMAT.fullmatch(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
    raise argument_error(NotesTimeline.name, key, "must be a day as YYYY-MM-DD")


def _scan(
    conn: Connection,
    workspace: WorkspaceUri,
    query: str | None,
    include_archived: bool,
    first: date | None,
    last: date | None,
) -> tuple[list[SearchHit], bool]:
    """Hits whose update day lies in [first, last]; True when the bound cut the scan short."""
    from notes_server.store import search

    kept: list[SearchHit] = []
    offset = 0
    while offset < MAX_SCAN:
        page = search.search(
            conn, workspace.uri, query, include_archived=include_archived,
            limit=SCAN_PAGE, offset=offset,
        )  # fmt: skip
        kept.extend(hit for hit in page if _within(hit.note.updated_at.date(), first, last))
        offset += len(page)
        # Without a query the pages run newest first: past `first`, nothing older can match.
        passed = query is None and bool(page) and _before(page[-1].note.updated_at.date(), first)
        if len(page) < SCAN_PAGE or passed:
            return kept[:MAX_NOTES], len(kept) > MAX_NOTES
    return kept[:MAX_NOTES], True


def _before(day: date, first: date | None) -> bool:
    return first is not None and day < first


def _within(day: date, first: date | None, last: date | None) -> bool:
    return (first is None or day >= first) and (last is None or day <= last)


def _days(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    for entry in entries:
        day = entry["updatedAt"][:10]
        counts[day] = counts.get(day, 0) + 1
    return [{"date": day, "count": count} for day, count in counts.items()]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _text(
    workspace: str, entries: list[dict[str, Any]], days: list[dict[str, Any]], cut: bool
) -> str:
    if not entries:
        return f"No notes in {workspace} for these days."
    lines = [
        f"Timeline of {workspace}: {_count(len(entries), 'note')} on {_count(len(days), 'day')}, "
        "by last update (UTC)."
    ]
    day = None
    for entry in entries:
        if entry["updatedAt"][:10] != day:
            day = entry["updatedAt"][:10]
            lines.append(f"{day}:")
        flag = " [archived]" if entry["archived"] else ""
        lines.append(
            f"- {entry['updatedAt'][11:16]} {entry['title']}{flag} "
            f"(id {entry['id']}, {entry['path']})"
        )
    if cut:
        lines.append("More notes match: narrow the days or the query to see the rest.")
    return "\n".join(lines)
