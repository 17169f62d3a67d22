"""notes_edit: precise edits of one note (exact text replacements, section replace / append /
prepend), all of one call in one transaction or none, answered with a unified diff.

Concurrency: edits are applied to the note as it is when the write transaction runs. A call
that names `expectedVersion` while others have written since is re-applied on the new version
only if every section it edits reads exactly as it did at `expectedVersion` (taken from the
history) and every `oldText` still occurs exactly once; otherwise it is a conflict and nothing
is written. Two writers of different sections both land; two of one section: the second is
refused. A write that loses a race to a concurrent transaction (PostgreSQL) runs again.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.create import MAX_BODY
from notes_server.tools.read import SECTION
from notes_server.tools.scope import contain, owned_note
from notes_server.tools.titles import argument_error
from notes_server.tools.views import (
    NOTE_ID,
    NOTE_SUMMARY_PROPERTIES,
    WORKSPACE_URI,
    note_summary,
    schema,
)

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.notes import NoteRecord
    from notes_server.tools.sections import Edit

MAX_EDITS = 100
# Attempts of the whole transaction when a concurrent writer won the version (PostgreSQL).
ATTEMPTS = 20
ACTIONS = ("replace", "append", "prepend")

TEXT_EDIT = schema(
    {
        "oldText": {"type": "string", "minLength": 1, "maxLength": MAX_BODY},
        "newText": {"type": "string", "maxLength": MAX_BODY},
    },
    ["oldText", "newText"],
)
SECTION_EDIT = schema(
    {
        "section": SECTION,
        "action": {"type": "string", "enum": list(ACTIONS)},
        "text": {"type": "string", "maxLength": MAX_BODY},
    },
    ["section", "action", "text"],
)
EDIT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "note": {
            "type": "object",
            "properties": NOTE_SUMMARY_PROPERTIES,
            "required": list(NOTE_SUMMARY_PROPERTIES),
        },
        "diff": {"type": "string"},
        "rebasedFrom": {"type": "integer"},
    },
    "required": ["note", "diff"],
}


class _Lost(Exception):
    """The row changed between the read and the write: run the transaction again, with the
    version this attempt edited as the base (as if the caller had passed expectedVersion)."""

    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version


def parse_edits(tool: str, raw: Any) -> list[Edit]:
    """The edits argument, checked item by item (-32602 naming the item)."""
    from notes_server.tools.schema import validate
    from notes_server.tools.sections import SectionEdit, TextEdit

    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_EDITS:
        raise argument_error(tool, "edits", f"must be a list of 1 to {MAX_EDITS} edits")
    edits: list[Edit] = []
    for i, item in enumerate(raw):
        where = f"edits[{i}]"
        if isinstance(item, dict) and "oldText" in item:
            problem = validate(item, TEXT_EDIT, where)
            if problem is None:
                edits.append(TextEdit(item["oldText"], item["newText"]))
                continue
        elif isinstance(item, dict) and "section" in item:
            problem = validate(item, SECTION_EDIT, where)
            if problem is None:
                edits.append(SectionEdit(item["section"], item["action"], item["text"]))
                continue
        else:
            problem = f"{where} must be {{oldText, newText}} or {{section, action, text}}"
        field, _, reason = problem.partition(" ")
        raise argument_error(tool, field, reason)
    return edits


class EditNote(Tool):
    name = "notes_edit"
    title = "Edit note"
    description = (
        "Change part of a note: `edits` is a list of `{oldText, newText}` (oldText must occur "
        "exactly once) and `{section, action: replace|append|prepend, text}` (section: a "
        "heading path from notes_read's outline, e.g. `Plan/Risks`; replace keeps the heading "
        "line). All edits apply in order, together or not at all; the result is the new "
        "version and a unified diff. With `expectedVersion`, a call made while others edited "
        "other sections still applies; an edit of a section someone changed is a conflict."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "expectedVersion": {"type": "integer", "minimum": 1},
            "edits": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_EDITS,
                "items": {"oneOf": [TEXT_EDIT, SECTION_EDIT]},
            },
        },
        ["workspaceUri", "noteId", "edits"],
    )
    output_schema = EDIT_OUTPUT
    tool_annotations = tool_hints("Edit note", read_only=False)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store.engine import retrying

        edits = parse_edits(self.name, args["edits"])
        expected: int | None = args.get("expectedVersion")
        for _ in range(ATTEMPTS):
            try:
                return retrying(partial(self._once, ctx, args, edits, expected))
            except _Lost as lost:
                expected = lost.version if expected is None else expected
        raise ToolFailure("The note kept changing while editing it; nothing was changed.")

    def _once(
        self, ctx: CallContext, args: dict[str, Any], edits: list[Edit], pinned: int | None
    ) -> ToolResult:
        from notes_server.store import notes, tags
        from notes_server.store.engine import write_tx
        from notes_server.tools.sections import apply_edits, unified_diff

        with write_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=True
            )
            expected = note.version if pinned is None else pinned
            base = self._base(conn, note, expected)
            body = apply_edits(self.name, note.body, edits, base, (expected, note.version))
            if len(body) > MAX_BODY:
                raise ToolFailure(
                    f"The edited body would have {len(body)} characters; at most {MAX_BODY}."
                )
            if body == note.body:
                updated = note
            else:
                author = notes.Author(ctx.principal, self.name)
                changed = notes.update_fields(
                    conn, note, now=self.services.clock(), author=author, body=body
                )
                if changed is None:
                    raise _Lost(note.version)
                updated = changed
            shown = note_summary(
                updated, contain(workspace, updated), tags.note_tags(conn, note.id)
            )
        result: dict[str, Any] = {
            "note": shown,
            "diff": unified_diff(note.path, note.body, body, (note.version, updated.version)),
        }
        if expected != note.version:
            result["rebasedFrom"] = expected
        return ToolResult(result)

    @staticmethod
    def _base(conn: Connection, note: NoteRecord, expected: int) -> str | None:
        """The body at `expected` when the note has moved on since (None: it has not)."""
        from notes_server.store import history

        if expected == note.version:
            return None
        past = history.revision(conn, note.id, expected) if expected < note.version else None
        if past is None:
            raise ToolFailure(
                f"Version conflict: note {note.id!r} is at version {note.version}; version "
                f"{expected} is not in its history. Read it again and retry with "
                f"expectedVersion {note.version}.",
                {"currentVersion": note.version},
            )
        return past.body
