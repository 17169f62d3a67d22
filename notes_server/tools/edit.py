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

import difflib
import re
from typing import TYPE_CHECKING, Any, NamedTuple

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.create import MAX_BODY
from notes_server.tools.outline import Heading, line_of, outline
from notes_server.tools.read import SECTION, select_section
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


class TextEdit(NamedTuple):
    old: str
    new: str


class SectionEdit(NamedTuple):
    section: str
    action: str
    text: str


Edit = TextEdit | SectionEdit


class _Lost(Exception):
    """The row changed between the read and the write: run the transaction again."""


def parse_edits(tool: str, raw: Any) -> list[Edit]:
    """The edits argument, checked item by item (-32602 naming the item)."""
    from notes_server.tools.schema import validate

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


def occurrences(body: str, text: str, cap: int = 1000) -> list[int]:
    """Start offsets of every (possibly overlapping) occurrence, at most `cap`."""
    found: list[int] = []
    at = body.find(text)
    while at >= 0 and len(found) < cap:
        found.append(at)
        at = body.find(text, at + 1)
    return found


def _block(body: str, at: int, end: int, text: str) -> str:
    """body[:at] + text + body[end:], the text on lines of its own."""
    if not text:
        return body[:at] + body[end:]
    if at > 0 and body[at - 1] != "\n":
        text = "\n" + text
    # A line of its own before what follows; at the end, as the note ended (newline or not).
    if not text.endswith("\n") and (end < len(body) or body.endswith("\n")):
        text += "\n"
    return body[:at] + text + body[end:]


def apply_section(body: str, heading: Heading, action: str, text: str) -> str:
    if action == "replace":
        return _block(body, heading.content_offset, heading.end, text)
    if action == "prepend":
        return _block(body, heading.content_offset, heading.content_offset, text)
    # append: after the section's last non-blank line, before its trailing blank lines
    content = body[heading.content_offset : heading.end]
    at = heading.content_offset + len(content.rstrip())
    if at < heading.end and body[at] == "\n":
        at += 1
    return _block(body, at, at, text)


def apply_edits(
    tool: str, body: str, edits: list[Edit], base: str | None, versions: tuple[int, int]
) -> str:
    """The body after every edit, in order; `base` (the body at expectedVersion, when others
    wrote since) must agree with `body` on every section edited."""
    for number, edit in enumerate(edits, start=1):
        if isinstance(edit, TextEdit):
            body = _apply_text(body, edit, number)
            continue
        headings = outline(body)
        heading = select_section(tool, body, headings, edit.section)
        if base is not None:
            _check_unchanged(base, body, heading, edit.section, versions)
        body = apply_section(body, heading, edit.action, edit.text)
    return body


def _apply_text(body: str, edit: TextEdit, number: int) -> str:
    found = occurrences(body, edit.old)
    if len(found) != 1:
        lines = sorted({line_of(body, at) for at in found})
        where = "" if not lines else " (lines " + ", ".join(map(str, lines[:50])) + ")"
        raise ToolFailure(
            f"Edit {number}: oldText occurs {len(found)} times{where}; it must occur exactly "
            "once. Nothing was changed: "
            + (
                "read the note again and copy the text exactly."
                if not found
                else "include more of the surrounding text to make it unique."
            ),
            {"edit": number, "occurrences": len(found), "lines": lines},
        )
    at = found[0]
    return body[:at] + edit.new + body[at + len(edit.old) :]


def _check_unchanged(
    base: str, body: str, heading: Heading, section: str, versions: tuple[int, int]
) -> None:
    expected, current = versions
    before = next((h for h in outline(base) if h.address == heading.address), None)
    if before is None or base[before.offset : before.end] != body[heading.offset : heading.end]:
        raise ToolFailure(
            f"Edit conflict: section {section!r} changed after version {expected} (the note "
            f"is at version {current}). Nothing was changed: read it again and retry with "
            f"expectedVersion {current}.",
            {"conflict": section, "currentVersion": current},
        )


def unified_diff(path: str, old: str, new: str, versions: tuple[int, int]) -> str:
    """difflib's unified diff, run only on the lines between the common head and tail (plus
    the context lines): one section changed in a 100 KB note costs what that section costs."""
    before = old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    shortest = min(len(before), len(after))
    head = 0
    while head < shortest and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < shortest - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    skip = max(0, head - CONTEXT)
    keep_tail = max(0, tail - CONTEXT)
    lines = list(
        difflib.unified_diff(
            before[skip : len(before) - keep_tail],
            after[skip : len(after) - keep_tail],
            fromfile=f"a/{path}@{versions[0]}",
            tofile=f"b/{path}@{versions[1]}",
            n=CONTEXT,
        )
    )
    if skip:
        lines = [_HUNK.sub(lambda m: _shifted(m, skip), line, count=1) for line in lines]
    return "".join(lines)


CONTEXT = 3
_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _shifted(match: re.Match[str], by: int) -> str:
    old_start, old_len, new_start, new_len = match.groups()
    return f"@@ -{int(old_start) + by}{old_len} +{int(new_start) + by}{new_len} @@"


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
        for _ in range(ATTEMPTS):
            try:
                return retrying(lambda: self._once(ctx, args, edits))
            except _Lost:
                continue
        raise ToolFailure("The note kept changing while editing it; nothing was changed.")

    def _once(self, ctx: CallContext, args: dict[str, Any], edits: list[Edit]) -> ToolResult:
        from notes_server.store import notes
        from notes_server.store.engine import write_tx

        with write_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=True
            )
            expected = args.get("expectedVersion", note.version)
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
                    raise _Lost
                updated = changed
            uri = contain(workspace, updated)
        result: dict[str, Any] = {
            "note": note_summary(updated, uri),
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
