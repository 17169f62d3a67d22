"""notes_update: change title, body, tags and/or front matter properties, optionally guarded
by an expected version. A new title rewrites the links that named the note by its old one."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.create import MAX_BODY
from notes_server.tools.described import TAGS_ARGUMENT, full_note, tag_arguments
from notes_server.tools.scope import contain, owned_note
from notes_server.tools.titles import argument_error, clean_title
from notes_server.tools.views import NOTE_ID, NOTE_SCHEMA, TITLE, WORKSPACE_URI, schema

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.notes import NoteRecord

_PROPERTY_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
MAX_PROPERTIES = 100
MAX_PROPERTY_TEXT = 10_000

REWRITTEN_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Notes whose links to this one were rewritten (a rename or a move)",
    "items": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "path": {"type": "string"},
            "version": {"type": "integer"},
        },
        "required": ["id", "title", "path", "version"],
    },
}
UPDATE_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"note": NOTE_SCHEMA, "rewritten": REWRITTEN_SCHEMA},
    "required": ["note", "rewritten"],
}
UPDATE_LINKS = {
    "type": "boolean",
    "description": "Rewrite [[...]] and markdown links that name this note (default true)",
}


def version_conflict(note_id: str, current: int, expected: int) -> ToolFailure:
    return ToolFailure(
        f"Version conflict: note {note_id!r} is at version {current}, not {expected}. "
        "Read it again, merge your change, and retry with expectedVersion "
        f"{current}."
    )


def rewritten_view(notes: list[NoteRecord]) -> list[dict[str, Any]]:
    return [{"id": n.id, "title": n.title, "path": n.path, "version": n.version} for n in notes]


class UpdateNote(Tool):
    name = "notes_update"
    title = "Update note"
    description = (
        "Change a note's title, body, `tags` (its front matter tags; [] removes them; #tags "
        "in the body stay) and/or `properties` (other front matter keys: a value sets one, "
        "null removes it). Pass `expectedVersion` (from notes_read) to refuse the update if "
        "someone else changed the note in between. A new title rewrites the [[...]] links "
        "naming the note by its old title (listed in `rewritten`) unless `updateLinks` is false."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "title": TITLE,
            "body": {"type": "string", "maxLength": MAX_BODY},
            "tags": TAGS_ARGUMENT,
            "properties": {
                "type": "object",
                "description": "Front matter keys to set (string, number, boolean or a list "
                "of them) or remove (null)",
            },
            "expectedVersion": {"type": "integer", "minimum": 1},
            "updateLinks": UPDATE_LINKS,
        },
        ["workspaceUri", "noteId"],
    )
    output_schema = UPDATE_OUTPUT
    tool_annotations = tool_hints("Update note", read_only=False, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import link_rewrite, notes
        from notes_server.store.engine import write_tx

        changes = {k: args[k] for k in ("title", "body") if k in args}
        if "title" in changes:
            changes["title"] = clean_title(changes["title"], self.name)
        front = self._front_matter_changes(args)
        if not changes and not front:
            raise ToolFailure(
                "Nothing to update: pass `title`, `body`, `tags` and/or `properties`."
            )
        now = self.services.clock()
        with write_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=True
            )
            expected = args.get("expectedVersion")
            if expected is not None and expected != note.version:
                raise version_conflict(note.id, note.version, expected)
            renamed = "title" in changes and changes["title"] != note.title
            rewrite = renamed and args.get("updateLinks", True)
            sources = link_rewrite.sources_of(conn, note) if rewrite else []
            extra = _new_front_matter(conn, note, front) if front else None
            author = notes.Author(ctx.principal, self.name)
            updated = notes.update_fields(
                conn, note, now=now, author=author, extra=extra, **changes
            )
            if updated is None:
                raise version_conflict(note.id, note.version + 1, note.version)
            rewritten = link_rewrite.rewrite_links(
                conn, sources, note, updated, now=now, principal=ctx.principal
            )
            shown = full_note(conn, updated, contain(workspace, updated))
        return ToolResult({"note": shown, "rewritten": rewritten_view(rewritten)})

    def _front_matter_changes(self, args: dict[str, Any]) -> dict[str, Any]:
        """The front matter keys to change: `tags` and every property (REMOVE for null)."""
        from notes_server.markup.properties import REMOVE, RESERVED

        front: dict[str, Any] = {}
        if "tags" in args:
            tags = tag_arguments(self.name, args["tags"], "tags")
            front["tags"] = tags if tags else REMOVE
        given = args.get("properties", {})
        if len(given) > MAX_PROPERTIES:
            raise argument_error(self.name, "properties", f"may have at most {MAX_PROPERTIES}")
        for key, value in given.items():
            where = f"properties.{key}"
            if not _PROPERTY_KEY.fullmatch(key):
                raise argument_error(
                    self.name,
                    "properties",
                    "keys must start with a letter or '_' and hold only letters, digits, "
                    "'_' and '-'",
                )
            if key in RESERVED:
                raise argument_error(
                    self.name, where, "is kept by the server (use `title` or `tags`)"
                )
            if value is None:
                front[key] = REMOVE
            elif _scalar_ok(value) or (
                isinstance(value, list) and len(value) <= 1000 and all(map(_scalar_ok, value))
            ):
                front[key] = value
            else:
                raise argument_error(
                    self.name, where, "must be a string, number, boolean, a list of those, or null"
                )
        return front


def _scalar_ok(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= MAX_PROPERTY_TEXT
    return isinstance(value, bool | int | float) and value == value and abs(value) != float("inf")


def _new_front_matter(conn: Connection, note: NoteRecord, front: dict[str, Any]) -> str:
    """The note's front matter lines with ``front`` applied (written by `update_fields`, after
    the old ones went into the revision)."""
    from notes_server.markup.properties import with_changes
    from notes_server.store import folders

    return with_changes(folders.extra_of(conn, note.id), front)
