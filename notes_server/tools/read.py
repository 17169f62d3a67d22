"""notes_read: one note by id, only from inside the named workspace; bounded, section-aware,
and any kept version (store.history)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import (
    LINK_COUNTS_SCHEMA,
    described_note,
    full_note,
    past_note,
)
from notes_server.tools.scope import owned_note, owned_note_details
from notes_server.tools.views import NOTE_ID, NOTE_SCHEMA, WORKSPACE_URI, schema

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from notes_server.store.history import Revision
    from notes_server.store.notes import NoteRecord
    from notes_server.tools.outline import Heading


class _ReadParts(NamedTuple):
    read_tx: Callable[[Engine], AbstractContextManager[Connection]]
    read_statement: Callable[[Engine], AbstractContextManager[Connection]]
    outline: Callable[[str], list[Heading]]
    select_section: Callable[[str, str, list[Heading], str], Heading]


@cache
def _read_parts() -> _ReadParts:
    """`read_tx`, `read_statement`, `outline` and `select_section`: imported at the first
    read, not at start (SQLAlchemy; `tools/list` comes first), and kept. An import statement
    inside the function cost 1.5-2.3 µs at every call (timeit, shared machine under load,
    2026-12-02)."""
    from notes_server.store.engine import read_statement, read_tx
    from notes_server.tools.outline import outline
    from notes_server.tools.sections import select_section

    return _ReadParts(read_tx, read_statement, outline, select_section)


DEFAULT_LIMIT = 20_000
MAX_LIMIT = 1_000_000
SECTION = {
    "type": "string",
    "minLength": 1,
    "maxLength": 2000,
    "description": "A heading path such as `Plan/Risks`; `Risks#2` is the second sibling "
    "heading with that text. Each outline entry carries its exact `address`.",
}
OUTLINE_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "level": {"type": "integer"},
            "text": {"type": "string"},
            "offset": {"type": "integer"},
            "length": {"type": "integer"},
            "address": {"type": "string"},
        },
        "required": ["level", "text", "offset", "length", "address"],
    },
}
READ_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "note": {
            **NOTE_SCHEMA,
            "properties": {**NOTE_SCHEMA["properties"], "links": LINK_COUNTS_SCHEMA},
            "required": [*NOTE_SCHEMA["required"], "links"],
        },
        "outline": OUTLINE_SCHEMA,
        "bodyLength": {"type": "integer"},
        "offset": {"type": "integer"},
        "truncated": {"type": "boolean"},
        "nextOffset": {"type": "integer"},
        "section": {"type": "string"},
        "currentVersion": {"type": "integer"},
    },
    "required": ["note", "outline", "bodyLength", "offset", "truncated"],
}


class ReadNote(Tool):
    name = "notes_read"
    title = "Read note"
    description = (
        "Read one note (title, path, body, version, tags, front matter properties, how many "
        "links it has out, unresolved and in, outline of its headings) by id from an "
        "authorized workspace. Long bodies come in parts: at most `limit` characters "
        f"(default {DEFAULT_LIMIT}) from `offset`, with `truncated` and `nextOffset` when "
        "there is more. `section` (a heading path like `Plan/Risks`, `Risks#2` for the second "
        "of two) returns that section alone; `version` reads a past version (notes_history): "
        "its tags and properties as they were, its link counts as they are now."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "section": SECTION,
            "offset": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            "version": {"type": "integer", "minimum": 1},
        },
        ["workspaceUri", "noteId"],
    )
    output_schema = READ_OUTPUT
    tool_annotations = tool_hints("Read note", read_only=True, idempotent=True)
    _on_loop: bool | None = None

    def runs_on_loop(self) -> bool:
        # One note by primary key in one read transaction: the store says whether such a read
        # may run on the loop (never over a network). Its engine is fixed: asked once.
        on_loop = self._on_loop
        if on_loop is None:
            from notes_server.store.engine import runs_on_loop

            on_loop = self._on_loop = runs_on_loop(self.services.engine)
        return on_loop

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        version = args.get("version")
        if version is None:
            # The grant, the note and what the indexes know of it (tags, properties, link
            # counts) in one statement: one snapshot without a transaction around it on SQLite
            with _read_parts().read_statement(self.services.engine) as conn:
                _, note, uri, details = owned_note_details(
                    conn, ctx, args["workspaceUri"], args["noteId"]
                )
            return ToolResult(
                self.bounded(note, described_note(note, uri, details, link_counts=True), args)
            )
        past: Revision | None = None
        # owned_note reads the grant and the note in one statement; the indexes (tags,
        # properties, link counts) and the version in the same snapshot
        with _read_parts().read_tx(self.services.engine) as conn:
            _, note, uri = owned_note(conn, ctx, args["workspaceUri"], args["noteId"], write=False)
            past = self._past(conn, note, version)
            if past is None:
                shown = note
                view = full_note(conn, note, uri, link_counts=True)
            else:
                shown = _as_record(note, past)
                view = past_note(conn, shown, uri, past.front_matter or "")
        result = self.bounded(shown, view, args)
        if past is not None:
            result["currentVersion"] = note.version
        return ToolResult(result)

    @staticmethod
    def _past(conn: Any, note: NoteRecord, version: int) -> Revision | None:
        from notes_server.store import history

        if version == note.version:
            return None
        found = history.revision(conn, note.id, version) if version < note.version else None
        if found is None:
            kept = history.versions_kept(conn, note.id)
            listed = ", ".join(str(v) for v in [note.version, *kept][:30])
            raise ToolFailure(
                f"Note {note.id!r} has no version {version}. Versions kept: {listed} "
                "(notes_history lists them)."
            )
        return found

    def bounded(
        self, note: NoteRecord, view: dict[str, Any], args: dict[str, Any]
    ) -> dict[str, Any]:
        """The result for ``note`` shown as ``view`` (a full note), its body bounded."""
        parts = _read_parts()
        outline, select_section = parts.outline, parts.select_section
        body = note.body
        headings = outline(body)
        start, end = 0, len(body)
        section = args.get("section")
        if section is not None:
            found = select_section(self.name, body, headings, section)
            start, end = found.offset, found.end
        offset = start + args.get("offset", 0)
        limit = args.get("limit", DEFAULT_LIMIT)
        stop = min(end, offset + limit)
        view["body"] = body[offset:stop] if offset < end else ""
        result: dict[str, Any] = {
            "note": view,
            "outline": [h.as_json() for h in headings],
            "bodyLength": len(body),
            "offset": min(offset, end) - start,
            "truncated": stop < end,
        }
        if stop < end:
            result["nextOffset"] = stop - start
        if section is not None:
            result["section"] = found.address
        return result


def _as_record(note: NoteRecord, past: Revision) -> NoteRecord:
    """The current note's identity with a past version's content."""
    from dataclasses import replace

    return replace(
        note,
        path=past.path,
        title=past.title,
        body=past.body,
        version=past.version,
        updated_at=past.changed_at,
        archived=past.archived,
    )
