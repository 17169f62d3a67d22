"""Notes as MCP resources (the notes extension's `file:` provider): each note is readable at
its canonical file URI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from notes_server.errors import InvalidParams, StoreError, UriError, resource_not_found
from notes_server.security.principals import consented_workspaces
from notes_server.security.uri import parse_note_uri, parse_workspace_uri
from notes_server.tools.base import CallContext
from notes_server.tools.completion import Completion, complete_paths, complete_workspaces
from notes_server.tools.scope import usable_workspaces, within_roots
from notes_server.tools.search import MAX_OFFSET
from notes_server.tools.services import Services
from notes_server.values import is_ascii_digits

PAGE = 100


class NoteResources:
    def __init__(self, services: Services) -> None:
        self.services = services

    def list_resources(
        self, ctx: CallContext, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        from notes_server.store.engine import read_tx
        from notes_server.store.lookups import granted_notes

        offset = _offset(cursor)
        with read_tx(self.services.engine) as conn:
            # The client's roots, and an OAuth consent, narrow the grants, never widen them.
            usable: list[str] | None = None
            if ctx.roots is not None or consented_workspaces(ctx.principal) is not None:
                usable = usable_workspaces(conn, ctx.principal, ctx.roots)
            rows = granted_notes(conn, ctx.principal, usable, PAGE + 1, offset)
        resources = [_listing(*row) for row in rows[:PAGE]]
        more = len(rows) > PAGE and offset + PAGE <= MAX_OFFSET
        return resources, str(offset + PAGE) if more else None

    def read_resource(self, ctx: CallContext, uri: str) -> list[dict[str, Any]]:
        from notes_server.store import grants, notes
        from notes_server.store.engine import read_tx

        try:
            target = parse_note_uri(uri)
        except UriError:
            raise resource_not_found(uri) from None
        with read_tx(self.services.engine) as conn:
            for grant in grants.list_grants(conn, ctx.principal):
                workspace = parse_workspace_uri(grant.workspace)
                if not workspace.contains(target) or not within_roots(workspace, ctx.roots):
                    continue
                consented = consented_workspaces(ctx.principal)
                if consented is not None and workspace.uri not in consented:
                    continue
                path = "/".join(target[len(workspace.segments) :])
                note = notes.get_note_by_path(conn, workspace.uri, path)
                if note is not None and not note.archived:
                    return [
                        {
                            "uri": workspace.note_uri(target[len(workspace.segments) :]),
                            "mimeType": "text/markdown",
                            "text": note.body,
                        }
                    ]
        raise resource_not_found(uri)


def _offset(cursor: str | None) -> int:
    """Our cursors are exactly `str(k * PAGE)`; any other spelling was not issued here."""
    if cursor is None:
        return 0
    if not is_ascii_digits(cursor) or len(cursor) > len(str(MAX_OFFSET + PAGE)):
        raise InvalidParams("Invalid cursor")
    offset = int(cursor)
    if str(offset) != cursor or offset % PAGE or not 0 < offset <= MAX_OFFSET + PAGE:
        raise InvalidParams("Invalid cursor")
    return offset


def _listing(workspace: str, path: str, title: str, note_id: str) -> dict[str, Any]:
    try:
        root = parse_workspace_uri(workspace)
        uri = root.note_uri(tuple(path.split("/")))
    except UriError:
        raise StoreError("stored workspace is not canonical") from None
    return {
        "uri": uri,
        "name": note_id,
        "title": title,
        "mimeType": "text/markdown",
    }


class NoteTemplate:
    """The note resource template: a note's URI is its workspace's URI, a slash, its path.
    `completion/complete` on it offers workspaces for `workspaceUri` and, in the workspace
    already chosen (`context.arguments`), live note paths for `path`."""

    uri_template = "{+workspaceUri}/{+path}"

    def __init__(self, services: Services) -> None:
        self.services = services

    def describe(self) -> dict[str, Any]:
        return {
            "uriTemplate": self.uri_template,
            "name": "note",
            "title": "Note",
            "description": "A note, by its workspace's file: URI and its path in the workspace",
            "mimeType": "text/markdown",
        }

    def complete(
        self, ctx: CallContext, argument: str, value: str, context: Mapping[str, str]
    ) -> Completion:
        if argument == "workspaceUri":
            return complete_workspaces(self.services, ctx, value, context)
        if argument == "path":
            return complete_paths(self.services, ctx, value, context)
        raise InvalidParams(f"Invalid params: the note template has no variable {argument[:64]!r}")
