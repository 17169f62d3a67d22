"""A 2025-11-25 client's roots: asked with `roots/list`, and only ever narrowing the grants.

Roots are hints from the client, never authority: a session may touch a workspace only when
the principal holds a grant for it AND it is one of the roots or lies below one
(`tools.scope.within_roots`). A root that covers no granted workspace is ignored and logged; a
root that is not a strict `file:///` URI is ignored and logged; a failed or malformed
`roots/list` answer leaves nothing usable (the client declared it would narrow, then did not
say how). An empty list says nothing about where the user works (hosts such as the Inspector
declare `roots` and list none until the user adds some), so it narrows nothing, as a client
without the `roots` capability: the grants alone decide, as for every modern request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from notes_server.compat_2025.constants import ROOTS_CHANGED as ROOTS_CHANGED
from notes_server.compat_2025.constants import ROOTS_WAIT_S as ROOTS_WAIT_S
from notes_server.errors import UriError
from notes_server.security.uri import WorkspaceUri, parse_workspace_uri
from notes_server.tools.scope import within_roots

log = logging.getLogger("notes_server.legacy")

Roots = tuple[WorkspaceUri, ...]
# principal -> the canonical URIs of the workspaces granted to it (composed at the edges)
GrantLookup = Callable[[str], list[str]]
# Methods whose answer depends on which workspaces the session may touch.
NARROWED_METHODS = frozenset(
    {"tools/call", "resources/list", "resources/read", "prompts/get", "completion/complete"}
)
MAX_ROOTS = 100
WHOLE_FILESYSTEM = "file:///"

NO_USABLE_WORKSPACE = (
    "This call needs a workspaceUri, and none can be chosen for you: {why} Call the tool again "
    "with workspaceUri set to one of the usable workspaces: {usable}."
)


def declares_roots(capabilities: dict[str, Any]) -> bool:
    return isinstance(capabilities.get("roots"), dict)


def roots_request(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "roots/list"}


def read_roots(response: dict[str, Any] | None) -> Roots | None:
    """The roots in a client's `roots/list` response (None: it listed none, so no narrowing);
    anything unusable is logged."""
    result = None if response is None else response.get("result")
    listed = result.get("roots") if isinstance(result, dict) else None
    if not isinstance(listed, list):
        log.warning("legacy client gave no usable roots/list answer; no workspace is usable")
        return ()
    if not listed:
        log.info("legacy client lists no roots; its grants alone apply")
        return None
    roots: list[WorkspaceUri] = []
    for entry in listed[:MAX_ROOTS]:
        uri = entry.get("uri") if isinstance(entry, dict) else None
        if uri == WHOLE_FILESYSTEM:
            return None  # a root above every workspace narrows nothing
        try:
            # Hosts often write a folder with a trailing slash: file:///home/alice/notes/
            roots.append(parse_workspace_uri(uri.removesuffix("/") if isinstance(uri, str) else ""))
        except UriError as exc:
            log.warning("ignored a client root that is not a plain file:/// URI (%s)", exc)
    return tuple(dict.fromkeys(roots))


def log_outside(principal: str, roots: Roots, granted: list[str]) -> None:
    """Log each root that opens none of the principal's workspaces (it is simply ignored)."""
    workspaces = [parse_workspace_uri(uri) for uri in granted]
    for root in roots:
        if not any(within_roots(ws, (root,)) for ws in workspaces):
            log.warning(
                "ignored client root %s: it holds no workspace granted to %s",
                root.uri[:200],
                principal[:64],
            )


def usable(granted: list[str], roots: Roots | None) -> list[str]:
    return [uri for uri in granted if within_roots(parse_workspace_uri(uri), roots)]


def missing_workspace(usable_uris: list[str], roots: Roots | None) -> str:
    """The tool error when a call omits workspaceUri and no single workspace is implied."""
    if roots is None:
        why = "this client shares no roots, so the workspace must be named."
    elif not usable_uris:
        why = "the client's roots hold none of the workspaces granted to this user."
    else:
        why = "the client's roots hold several granted workspaces."
    listing = ", ".join(usable_uris) if usable_uris else "(none)"
    return NO_USABLE_WORKSPACE.format(why=why, usable=listing)


def dump_roots(roots: Roots | None) -> str:
    """For the session row: a list of URIs, or `null` for a client that listed none."""
    return json.dumps(None if roots is None else [root.uri for root in roots])


def load_roots(text: str | None) -> tuple[bool, Roots | None]:
    """(known, roots) from a session row; SQL NULL means they are still to be asked."""
    if text is None:
        return False, None
    listed = json.loads(text)
    if listed is None:
        return True, None
    return True, tuple(parse_workspace_uri(uri) for uri in listed)


OPTIONAL_WORKSPACE = (
    " Optional for this client: when omitted, the one granted workspace among the client's "
    "roots is used."
)


def optional_workspace(tools: list[Any]) -> list[Any]:
    """`tools/list` for a client that declared roots: `workspaceUri` is no longer required
    (a missing one is filled from the roots). Copies what it changes; the listing is shared."""
    return [_optional_workspace(tool) for tool in tools]


def _optional_workspace(tool: Any) -> Any:
    schema = tool.get("inputSchema") if isinstance(tool, dict) else None
    if not isinstance(schema, dict):
        return tool
    required = schema.get("required")
    if not isinstance(required, list) or "workspaceUri" not in required:
        return tool
    properties = dict(schema.get("properties") or {})
    described = dict(properties.get("workspaceUri") or {})
    described["description"] = str(described.get("description", "")) + OPTIONAL_WORKSPACE
    properties["workspaceUri"] = described
    relaxed = {**schema, "properties": properties}
    relaxed["required"] = [name for name in required if name != "workspaceUri"]
    return {**tool, "inputSchema": relaxed}
