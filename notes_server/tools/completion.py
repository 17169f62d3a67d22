"""Argument completion over notes: workspaces, note paths and titles, scoped like a search.

What a caller may be offered is exactly what it could use: workspaces it holds a grant on
(inside a 2025 session's roots), and live notes of the one workspace the request names, after
the same authorization a tool call makes. Anything else (no grant, a malformed URI, outside the
roots) completes to nothing, never to an error that would tell a workspace exists. At most
MAX_VALUES values; `total` only when it is known exactly, `hasMore` always.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from notes_server.errors import WorkspaceDenied
from notes_server.tools.base import CallContext
from notes_server.tools.scope import authorize, usable_workspaces

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from notes_server.tools.services import Services

MAX_VALUES = 100
MAX_PREFIX = 2048
WORKSPACE_ARGUMENT = "workspaceUri"


class Completion(NamedTuple):
    values: list[str]
    total: int | None = None
    has_more: bool = False

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"values": self.values, "hasMore": self.has_more}
        if self.total is not None:
            body["total"] = self.total
        return body


NOTHING = Completion([], 0, False)


def bounded(values: Sequence[str], more: bool = False) -> Completion:
    """The first MAX_VALUES of `values` (repeats removed, order kept); `more`: the source was
    cut, so the total is unknown."""
    unique = list(dict.fromkeys(values))
    more = more or len(unique) > MAX_VALUES
    return Completion(unique[:MAX_VALUES], None if more else len(unique), more)


# (services, request, the value typed so far, the other arguments already chosen) -> values
Completer = Callable[["Services", CallContext, str, Mapping[str, str]], Completion]


def complete_workspaces(
    services: Services, ctx: CallContext, prefix: str, context: Mapping[str, str]
) -> Completion:
    """The caller's usable workspaces (grants, narrowed by roots) starting with `prefix`."""
    from notes_server.store.engine import read_tx

    with read_tx(services.engine) as conn:
        usable = usable_workspaces(conn, ctx.principal, ctx.roots)
    return bounded([uri for uri in usable if uri.startswith(prefix)])


def complete_paths(
    services: Services, ctx: CallContext, prefix: str, context: Mapping[str, str]
) -> Completion:
    """Live note paths of the chosen workspace starting with `prefix` (case-sensitive)."""
    from notes_server.store.lookups import paths_with_prefix

    return _in_workspace(services, ctx, context, paths_with_prefix, prefix)


def complete_titles(
    services: Services, ctx: CallContext, prefix: str, context: Mapping[str, str]
) -> Completion:
    """Titles of the chosen workspace's live notes starting with `prefix`, ignoring case."""
    from notes_server.store.lookups import titles_with_prefix

    return _in_workspace(services, ctx, context, titles_with_prefix, prefix)


def _in_workspace(
    services: Services,
    ctx: CallContext,
    context: Mapping[str, str],
    lookup: Callable[[Connection, str, str, int], list[str]],
    prefix: str,
) -> Completion:
    """`lookup(conn, workspace, prefix, limit)` in the workspace named in `context` (or the
    caller's only usable one), after the tools' own authorization; nothing when there is none
    or it is not the caller's."""
    from notes_server.store.engine import read_tx

    with read_tx(services.engine) as conn:
        named = context.get(WORKSPACE_ARGUMENT)
        if named is None:
            usable = usable_workspaces(conn, ctx.principal, ctx.roots)
            if len(usable) != 1:
                return NOTHING
            named = usable[0]
        try:
            workspace = authorize(conn, ctx, named, write=False)
        except WorkspaceDenied:
            return NOTHING
        rows = lookup(conn, workspace.uri, prefix, MAX_VALUES + 1)
    return bounded(rows[:MAX_VALUES], more=len(rows) > MAX_VALUES)
