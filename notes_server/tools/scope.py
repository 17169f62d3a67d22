"""Scope checks shared by every tool: parse and authorize the workspace, contain each target."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from notes_server.errors import StoreError, ToolFailure, UriError, WorkspaceDenied
from notes_server.security.principals import consented_workspaces
from notes_server.security.uri import (
    MAX_SEGMENTS,
    MAX_URI_LENGTH,
    WorkspaceUri,
    parse_new_note_path,
    parse_note_path,
    parse_workspace_argument,
    parse_workspace_uri,
)
from notes_server.tools.base import CallContext
from notes_server.tools.titles import argument_error

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy import Connection

    from notes_server.store.details import Details, GrantedDetails
    from notes_server.store.notes import Granted, NoteRecord
    from notes_server.tools.services import Services


def authorize(conn: Connection, ctx: CallContext, text: object, *, write: bool) -> WorkspaceUri:
    """Parse the workspace (one trailing slash allowed) and check the grant, then the client's
    roots (which only narrow); malformed, unauthorized and outside the roots look the same,
    and the refusal names the caller's own usable workspaces (`refusal`)."""
    from notes_server.store import grants

    workspace = _workspace(conn, ctx, text, write=write)
    role = grants.role_for(conn, ctx.principal, workspace.uri)
    if not _allowed(role, workspace, ctx, write=write):
        raise refusal(conn, ctx, write=write)
    return workspace


def _workspace(conn: Connection, ctx: CallContext, text: object, *, write: bool) -> WorkspaceUri:
    if not isinstance(text, str):
        raise refusal(conn, ctx, write=write)
    try:
        return parse_workspace_argument(text)
    except UriError:
        raise refusal(conn, ctx, write=write) from None


def _allowed(role: str | None, workspace: WorkspaceUri, ctx: CallContext, *, write: bool) -> bool:
    if role is None or (write and role != "write"):
        return False
    consented = consented_workspaces(ctx.principal)
    if consented is not None and workspace.uri not in consented:
        return False
    return within_roots(workspace, ctx.roots)


def refusal(conn: Connection, ctx: CallContext, *, write: bool) -> WorkspaceDenied:
    """The one refusal for a workspace the caller cannot use, naming the workspaces it can
    (for a write, those it may write to), inside its roots and, for an OAuth token, its
    consent: what it lists depends only on the caller, so it tells nothing about the workspace
    that was named, nor about anyone else's."""
    from notes_server.store import grants

    consented = consented_workspaces(ctx.principal)
    usable = []
    for grant in grants.list_grants(conn, ctx.principal):
        if write and grant.role != "write":
            continue
        try:
            workspace = parse_workspace_uri(grant.workspace)
        except UriError:
            continue
        if consented is not None and workspace.uri not in consented:
            continue
        if within_roots(workspace, ctx.roots):
            usable.append(workspace.uri)
    return WorkspaceDenied(sorted(usable), write=write)


def within_roots(workspace: WorkspaceUri, roots: tuple[WorkspaceUri, ...] | None) -> bool:
    """A workspace is inside the roots when one root is it or lies above it (None: no roots).
    A root below a workspace does not open the workspace: narrowing stays per workspace."""
    if roots is None:
        return True
    return any(root == workspace or root.contains(workspace) for root in roots)


def usable_workspaces(
    conn: Connection, principal: str, roots: tuple[WorkspaceUri, ...] | None
) -> list[str]:
    """The principal's granted workspaces inside the roots, canonical URIs in order."""
    from notes_server.store import grants

    usable = []
    for grant in grants.list_grants(conn, principal):
        try:
            workspace = parse_workspace_uri(grant.workspace)
        except UriError:
            continue
        consented = consented_workspaces(principal)
        if consented is not None and workspace.uri not in consented:
            continue
        if within_roots(workspace, roots):
            usable.append(workspace.uri)
    return sorted(usable)


def grant_lookup(services: Services) -> Callable[[str], list[str]]:
    """principal -> its granted workspaces (canonical URIs), each call one read transaction."""

    def lookup(principal: str) -> list[str]:
        from notes_server.store.engine import read_tx

        with read_tx(services.engine) as conn:
            return usable_workspaces(conn, principal, None)

    return lookup


def not_found(note_id: str) -> ToolFailure:
    return ToolFailure(
        f"No note with id {note_id!r} in this workspace. Use notes_search to find note ids."
    )


@cache
def _get_granted() -> Callable[[Connection, str, str, str], Granted | None]:
    """`store.notes.get_granted`, imported at the first by-id call (the store loads
    SQLAlchemy), not at start, and kept: an import statement at every call cost 1.5-2.3 µs."""
    from notes_server.store.notes import get_granted

    return get_granted


@cache
def _granted_details() -> Callable[[Connection, str, str, str], GrantedDetails | None]:
    """`store.details.granted_details`, imported at the first read and kept (as above)."""
    from notes_server.store.details import granted_details

    return granted_details


def owned_note(
    conn: Connection, ctx: CallContext, workspace_text: object, note_id: str, *, write: bool
) -> tuple[WorkspaceUri, NoteRecord, str]:
    """Authorize the workspace, find the note by id inside it and contain it: what every
    by-id tool does first. Returns (workspace, note, the note's canonical URI). The grant and
    the note are read in one statement; the checks and their order are `authorize`'s."""
    workspace = _workspace(conn, ctx, workspace_text, write=write)
    granted = _get_granted()(conn, ctx.principal, workspace.uri, note_id)
    note = _owned(conn, ctx, workspace, granted, note_id, write=write)
    return workspace, note, contain(workspace, note)


def owned_note_details(
    conn: Connection, ctx: CallContext, workspace_text: object, note_id: str
) -> tuple[WorkspaceUri, NoteRecord, str, Details]:
    """`owned_note` for a read that also shows the note's tags, properties and link counts:
    the grant, the note and those in one statement (`store.details.granted_details`), the
    same checks in the same order."""
    workspace = _workspace(conn, ctx, workspace_text, write=False)
    granted = _granted_details()(conn, ctx.principal, workspace.uri, note_id)
    note = _owned(conn, ctx, workspace, granted, note_id, write=False)
    assert granted is not None and granted.details is not None  # a note comes with them
    return workspace, note, contain(workspace, note), granted.details


def _owned(
    conn: Connection,
    ctx: CallContext,
    workspace: WorkspaceUri,
    granted: Granted | GrantedDetails | None,
    note_id: str,
    *,
    write: bool,
) -> NoteRecord:
    """The grant check (refusal), then the note's existence (not found)."""
    if granted is None or not _allowed(granted.role, workspace, ctx, write=write):
        raise refusal(conn, ctx, write=write)
    if granted.note is None:
        raise not_found(note_id)
    return granted.note


def contain(workspace: WorkspaceUri, note: NoteRecord) -> str:
    """Re-derive a stored note's URI and prove it lies inside the workspace; return the URI.

    The row must belong to exactly this workspace and its stored path must re-parse as a
    canonical relative path (no dot segments, separators or empty segments): together these
    are what keep the URI, built segment by segment under the workspace, inside it.
    """
    if note.workspace != workspace.uri:
        raise StoreError("note is outside its workspace")
    try:
        return workspace.stored_note_uri(note.path)
    except UriError:
        raise StoreError("stored note path is not canonical") from None


def new_path(tool: str, text: str) -> tuple[str, ...]:
    """A client's `path` argument for a note about to be written; -32602 naming it if refused."""
    try:
        return parse_new_note_path(text)
    except UriError as exc:
        raise argument_error(tool, "path", f"is not acceptable: {exc}") from None


def stored_path(note: NoteRecord) -> tuple[str, ...]:
    try:
        return parse_note_path(note.path)
    except UriError:
        raise StoreError("stored note path is not canonical") from None


def fits_under(tool: str, workspace: WorkspaceUri, path: tuple[str, ...]) -> None:
    """Refuse, before any write, a path whose URI under `workspace` would break the limits
    (a long granted workspace plus a long path): the stored note could never be addressed."""
    try:
        workspace.note_uri(path)
    except UriError as exc:
        raise argument_error(
            tool,
            "path",
            f"is too long for this workspace: {exc} (a note's URI, workspace included, may "
            f"have at most {MAX_URI_LENGTH} characters and {MAX_SEGMENTS} segments)",
        ) from None
