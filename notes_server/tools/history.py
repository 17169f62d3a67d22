"""notes_history (the versions of a note, newest first) and notes_revert (make a past version
current again, as a new version: a write, not a destructive action; audited)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from notes_server.errors import ToolFailure
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from notes_server.tools.described import full_note
from notes_server.tools.scope import contain, owned_note
from notes_server.tools.titles import argument_error
from notes_server.tools.update import version_conflict
from notes_server.tools.views import (
    NOTE_ID,
    NOTE_OUTPUT,
    WORKSPACE_URI,
    iso,
    schema,
)

if TYPE_CHECKING:
    from notes_server.store.history import Revision

DEFAULT_LIMIT = 20
MAX_LIMIT = 100

ENTRY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "version": {"type": "integer"},
        "time": {"type": "string"},
        # null for versions written before history was kept
        "principal": {"description": "who made this version (a string), or null if unknown"},
        "tool": {"description": "the tool that made it (a string), or null if unknown"},
        "title": {"type": "string"},
        "path": {"type": "string"},
        "size": {"type": "integer"},
        "linesAdded": {"type": "integer"},
        "linesRemoved": {"type": "integer"},
        "current": {"type": "boolean"},
    },
    "required": [
        "version",
        "time",
        "principal",
        "tool",
        "title",
        "path",
        "size",
        "linesAdded",
        "linesRemoved",
        "current",
    ],
}
HISTORY_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "noteId": {"type": "string"},
        "versions": {"type": "array", "items": ENTRY},
        "nextCursor": {"type": "string"},
    },
    "required": ["noteId", "versions"],
}
REVERT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {**NOTE_OUTPUT["properties"], "revertedTo": {"type": "integer"}},
    "required": ["note", "revertedTo"],
}


def line_changes(old: str | None, new: str) -> tuple[int, int]:
    """(lines added, lines removed) from `old` to `new` (None: everything is added)."""
    import difflib

    after = new.splitlines()
    if old is None:
        return len(after), 0
    before = old.splitlines()
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, before, after, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def _cursor(tool: str, text: Any) -> int | None:
    if text is None:
        return None
    if not isinstance(text, str) or not text.startswith("v") or not text[1:].isdigit():
        raise argument_error(tool, "cursor", "is not a cursor this tool returned")
    return int(text[1:])


class NoteHistory(Tool):
    name = "notes_history"
    title = "Note history"
    description = (
        "List the versions of a note, newest first: version, time, who (principal) and which "
        "tool made it, title, size in characters and lines added/removed against the version "
        "before. Read one with notes_read {version}; bring one back with notes_revert."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            "cursor": {"type": "string", "minLength": 1, "maxLength": 40},
        },
        ["workspaceUri", "noteId"],
    )
    output_schema = HISTORY_OUTPUT
    tool_annotations = tool_hints("Note history", read_only=True, idempotent=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import history
        from notes_server.store.engine import read_tx

        below = _cursor(self.name, args.get("cursor"))
        limit = args.get("limit", DEFAULT_LIMIT)
        with read_tx(self.services.engine) as conn:
            _, note, _ = owned_note(conn, ctx, args["workspaceUri"], args["noteId"], write=False)
            listed: list[tuple[Revision, bool]] = []
            if below is None or below > note.version:
                principal, tool = history.current_author(conn, note.id)
                current = history.Revision(
                    note.id,
                    note.version,
                    note.workspace,
                    note.path,
                    note.title,
                    note.body,
                    None,
                    note.archived,
                    note.updated_at,
                    principal,
                    tool,
                )
                listed.append((current, True))
            start = note.version if below is None else min(below, note.version)
            # One more than shown: the version before the last one listed, for its line counts.
            older = history.revisions_of(conn, note.id, below=start, limit=limit + 1)
        listed.extend((rev, False) for rev in older)
        shown = listed[:limit]
        versions = []
        for i, (rev, current_one) in enumerate(shown):
            previous = listed[i + 1][0] if i + 1 < len(listed) else None
            before = None if previous is None or previous.version != rev.version - 1 else previous
            added, removed = line_changes(None if before is None else before.body, rev.body)
            if before is None and rev.version > 1:
                added = removed = 0  # the version before was pruned: unknown, not "all new"
            versions.append(
                {
                    "version": rev.version,
                    "time": iso(rev.changed_at),
                    "principal": rev.principal,
                    "tool": rev.tool,
                    "title": rev.title,
                    "path": rev.path,
                    "size": len(rev.body),
                    "linesAdded": added,
                    "linesRemoved": removed,
                    "current": current_one,
                }
            )
        result: dict[str, Any] = {"noteId": note.id, "versions": versions}
        if len(listed) > limit:
            result["nextCursor"] = f"v{shown[-1][0].version}"
        return ToolResult(result)


class RevertNote(Tool):
    name = "notes_revert"
    title = "Revert note"
    description = (
        "Make a past version of a note (from notes_history) current again: its title, body "
        "and front matter become a new version, and the version replaced stays in the "
        "history, so a revert can itself be reverted. Path and workspace stay (notes_move "
        "changes those). Pass `expectedVersion` to refuse if the note changed meanwhile."
    )
    input_schema = schema(
        {
            "workspaceUri": WORKSPACE_URI,
            "noteId": NOTE_ID,
            "version": {"type": "integer", "minimum": 1},
            "expectedVersion": {"type": "integer", "minimum": 1},
        },
        ["workspaceUri", "noteId", "version"],
    )
    output_schema = REVERT_OUTPUT
    tool_annotations = tool_hints("Revert note", read_only=False)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        from notes_server.store import audit, history, notes
        from notes_server.store.engine import write_tx

        version = args["version"]
        with write_tx(self.services.engine) as conn:
            workspace, note, _ = owned_note(
                conn, ctx, args["workspaceUri"], args["noteId"], write=True
            )
            expected = args.get("expectedVersion")
            if expected is not None and expected != note.version:
                raise version_conflict(note.id, note.version, expected)
            if version >= note.version:
                raise ToolFailure(
                    f"Version {version} is not a past version of note {note.id!r} (it is at "
                    f"version {note.version}); notes_history lists the past ones."
                )
            past = history.revision(conn, note.id, version)
            if past is None:
                kept = ", ".join(str(v) for v in history.versions_kept(conn, note.id)[:30])
                raise ToolFailure(
                    f"Version {version} of note {note.id!r} is no longer kept (pruned). "
                    f"Versions kept: {kept or 'none'}."
                )
            now = self.services.clock()
            reverted = notes.update_fields(
                conn,
                note,
                now=now,
                author=notes.Author(ctx.principal, self.name),
                extra=past.front_matter or "",
                title=past.title,
                body=past.body,
            )
            if reverted is None:
                raise version_conflict(note.id, note.version + 1, note.version)
            shown = full_note(conn, reverted, contain(workspace, reverted))
            audit.record(
                conn,
                audit.AuditRecord(
                    at=now,
                    principal=ctx.principal,
                    tool=self.name,
                    outcome=f"reverted to {version}",
                    workspace=workspace.uri,
                    note_id=note.id,
                    note_title=reverted.title,
                    note_path=reverted.path,
                    nonce=None,
                ),
            )
        return ToolResult({"note": shown, "revertedTo": version})
