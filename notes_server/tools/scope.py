"""Scope checks shared by every tool: parse and authorize the workspace, contain each target."""

from __future__ import annotations

from typing import TYPE_CHECKING

from notes_server.errors import StoreError, UriError, WorkspaceDenied
from notes_server.security.uri import WorkspaceUri, parse_note_path, parse_workspace_uri

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.store.notes import NoteRecord


def authorize(conn: Connection, principal: str, text: object, *, write: bool) -> WorkspaceUri:
    """Parse the workspace and check the grant; malformed and unauthorized look the same."""
    from notes_server.store import grants

    if not isinstance(text, str):
        raise WorkspaceDenied()
    try:
        workspace = parse_workspace_uri(text)
    except UriError:
        raise WorkspaceDenied() from None
    role = grants.role_for(conn, principal, workspace.uri)
    if role is None or (write and role != "write"):
        raise WorkspaceDenied()
    return workspace


def contain(workspace: WorkspaceUri, note: NoteRecord) -> str:
    """Re-derive a stored note's URI and prove it lies inside the workspace; return the URI."""
    try:
        segments = parse_note_path(note.path)
    except UriError:
        raise StoreError("stored note path is not canonical") from None
    if note.workspace != workspace.uri or not workspace.contains(workspace.segments + segments):
        raise StoreError("note is outside its workspace")
    return workspace.note_uri(segments)
