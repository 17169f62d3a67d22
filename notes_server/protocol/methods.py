"""One handler per MCP method. Each returns the result body without `_meta`; dispatch adds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from notes_server.errors import InvalidParams, ToolFailure
from notes_server.jsontext import dump_bytes
from notes_server.protocol.context import RequestContext
from notes_server.protocol.versions import MODERN_VERSIONS
from notes_server.tools.base import CallContext, ToolResult
from notes_server.tools.schema import validate

if TYPE_CHECKING:
    from notes_server.protocol.server_view import ServerView

LIST_TTL_MS = 300_000
MAX_NAME_ECHO = 64

INSTRUCTIONS = (
    "Notes live in workspaces the user granted, named by a file URI (workspaceUri) on every "
    "call; ask the user which workspace to use if unsure. Use notes_search to find note ids, "
    "notes_read to read one, notes_create/notes_update/notes_move to change them. Deleting or "
    "archiving always asks the user to pick the note and confirm in a form."
)


def _cacheable(body: dict[str, Any], scope: str, ttl_ms: int) -> dict[str, Any]:
    return {"resultType": "complete", **body, "ttlMs": ttl_ms, "cacheScope": scope}


def _no_cursor(params: dict[str, Any]) -> None:
    """Single-page lists never issue a cursor, so any cursor sent is not ours."""
    if params.get("cursor") is not None:
        raise InvalidParams("Invalid cursor")


def discover(server: ServerView, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return server.static_result(
        "server/discover",
        lambda: _cacheable(
            {
                "supportedVersions": list(MODERN_VERSIONS),
                "capabilities": server.capabilities,
                "instructions": INSTRUCTIONS,
            },
            "public",
            LIST_TTL_MS,
        ),
    )


def tools_list(server: ServerView, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    registry = server.registry
    if not registry.varies:
        return server.static_result(
            "tools/list",
            lambda: _cacheable({"tools": registry.listing()}, "public", LIST_TTL_MS),
        )
    # The descriptors follow this request's client capabilities: a shared cache keyed on the
    # method alone could hand one client's variant to another, so the list is never public.
    capabilities = ctx.capabilities

    def build() -> dict[str, Any]:
        listing = registry.listing_with(registry.metas_for(capabilities))
        return _cacheable({"tools": listing}, "private", LIST_TTL_MS)

    key = registry.variant_key(capabilities)
    if key is None:  # some hook declares no variant: key on what the hooks answer
        key = dump_bytes(registry.metas_for(capabilities))
    return server.variant_result("tools/list", key, build)


def _mrtr_params(params: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """Shape only. Whether both must come together is the tool's rule: a tool that never asks
    for input ignores them (as the spec asks for unknown input responses)."""
    responses = params.get("inputResponses")
    state = params.get("requestState")
    if responses is not None and not isinstance(responses, dict):
        raise InvalidParams("Invalid params: inputResponses must be an object")
    if responses is not None and not all(isinstance(v, dict) for v in responses.values()):
        raise InvalidParams("Invalid params: every inputResponses entry must be an object")
    if state is not None and not isinstance(state, str):
        raise InvalidParams("Invalid params: requestState must be a string")
    return responses, state


def tools_call(server: ServerView, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams("Invalid params: name must be a string")
    tool = server.registry.get(name)
    if tool is None:
        raise InvalidParams(f"Unknown tool: {name[:MAX_NAME_ECHO]}")
    arguments = params.get("arguments", {})
    problem = validate(arguments, tool.input_schema)
    if problem is not None:
        raise InvalidParams(f"Invalid arguments for {name}: {problem}")
    responses, state = _mrtr_params(params)
    call = CallContext(
        ctx.principal,
        ctx.capabilities,
        ctx.request_id,
        responses,
        state,
        roots=ctx.roots,
        progress=ctx.progress,
    )
    try:
        outcome = tool.call(call, arguments)
    except ToolFailure as failure:
        outcome = ToolResult(failure.structured, failure.message, is_error=True)
    return outcome.to_wire()


def resources_list(
    server: ServerView, ctx: RequestContext, params: dict[str, Any]
) -> dict[str, Any]:
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidParams("Invalid cursor")
    call = CallContext(ctx.principal, ctx.capabilities, ctx.request_id, roots=ctx.roots)
    resources, next_cursor = server.resources.list_resources(call, cursor)
    body: dict[str, Any] = {"resources": resources}
    if next_cursor is not None:
        body["nextCursor"] = next_cursor
    return _cacheable(body, "private", 0)


def resource_templates_list(
    server: ServerView, ctx: RequestContext, params: dict[str, Any]
) -> dict[str, Any]:
    _no_cursor(params)
    return _cacheable({"resourceTemplates": []}, "public", LIST_TTL_MS)


def resources_read(
    server: ServerView, ctx: RequestContext, params: dict[str, Any]
) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams("Invalid params: uri must be a string")
    call = CallContext(ctx.principal, ctx.capabilities, ctx.request_id, roots=ctx.roots)
    contents = server.resources.read_resource(call, uri)
    return _cacheable({"contents": contents}, "private", 0)
