"""One handler per MCP method. Each returns the result body without `_meta`; dispatch adds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from notes_server.errors import InvalidParams, ToolFailure
from notes_server.jsontext import dump_bytes
from notes_server.protocol.context import RequestContext
from notes_server.protocol.versions import MODERN_VERSIONS
from notes_server.tools.base import CallContext, ToolResult
from notes_server.tools.schema import validate

if TYPE_CHECKING:
    from notes_server.features.extension import ExtensionMethod
    from notes_server.protocol.server_view import ServerView

LIST_TTL_MS = 300_000
MAX_NAME_ECHO = 64
MAX_COMPLETION_VALUE = 2048

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
    call = _call_context(ctx, params)
    try:
        if server.tool_call_hook is not None:
            instead = server.tool_call_hook(tool, call, arguments)
            if instead is not None:
                return instead
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
    return server.static_result(
        "resources/templates/list",
        lambda: _cacheable(
            {"resourceTemplates": [t.describe() for t in server.templates]}, "public", LIST_TTL_MS
        ),
    )


def _call_context(ctx: RequestContext, params: dict[str, Any]) -> CallContext:
    responses, state = _mrtr_params(params)
    return CallContext(
        ctx.principal,
        ctx.capabilities,
        ctx.request_id,
        responses,
        state,
        roots=ctx.roots,
        progress=ctx.progress,
        log=ctx.log,
    )


def prompts_list(server: ServerView, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    _no_cursor(params)
    return server.static_result(
        "prompts/list",
        lambda: _cacheable({"prompts": server.prompts.listing()}, "public", LIST_TTL_MS),
    )


def prompts_get(server: ServerView, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    if not isinstance(name, str):
        raise InvalidParams("Invalid params: name must be a string")
    prompt = server.prompts.get(name)
    if prompt is None:
        raise InvalidParams(f"Unknown prompt: {name[:MAX_NAME_ECHO]}")
    arguments = prompt.checked(params.get("arguments"))
    return prompt.get(_call_context(ctx, params), arguments).to_wire()


def _string_map(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidParams(f"Invalid params: {what} must be an object of strings")
    return value


def completion_complete(
    server: ServerView, ctx: RequestContext, params: dict[str, Any]
) -> dict[str, Any]:
    """`ref/prompt` completes a prompt's argument, `ref/resource` a variable of the template
    whose `uriTemplate` the ref names exactly. (The spec has no reference to a tool, so tool
    arguments cannot be completed; the prompts take the same arguments and complete them.)"""
    ref, argument = params.get("ref"), params.get("argument")
    if not isinstance(ref, dict):
        raise InvalidParams("Invalid params: ref must be an object")
    if not isinstance(argument, dict):
        raise InvalidParams("Invalid params: argument must be an object")
    name, value = argument.get("name"), argument.get("value")
    if not isinstance(name, str) or not isinstance(value, str):
        raise InvalidParams("Invalid params: argument needs name and value as strings")
    if len(value) > MAX_COMPLETION_VALUE:
        raise InvalidParams(
            f"Invalid params: argument.value may have at most {MAX_COMPLETION_VALUE} characters"
        )
    context = params.get("context")
    if context is not None and not isinstance(context, dict):
        raise InvalidParams("Invalid params: context must be an object")
    chosen = _string_map((context or {}).get("arguments"), "context.arguments")
    call = _call_context(ctx, {})
    kind = ref.get("type")
    if kind == "ref/prompt":
        prompt_name = ref.get("name")
        prompt = server.prompts.get(prompt_name) if isinstance(prompt_name, str) else None
        if prompt is None:
            raise InvalidParams(f"Unknown prompt: {str(prompt_name)[:MAX_NAME_ECHO]}")
        completion = prompt.complete(call, name, value, chosen)
    elif kind == "ref/resource":
        uri = ref.get("uri")
        template = next((t for t in server.templates if t.uri_template == uri), None)
        if template is None:
            raise InvalidParams(f"Unknown resource template: {str(uri)[:MAX_NAME_ECHO]}")
        completion = template.complete(call, name, value, chosen)
    else:
        raise InvalidParams("Invalid params: ref.type must be ref/prompt or ref/resource")
    return {"resultType": "complete", "completion": completion.to_wire()}


def resources_read(
    server: ServerView, ctx: RequestContext, params: dict[str, Any]
) -> dict[str, Any]:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise InvalidParams("Invalid params: uri must be a string")
    call = CallContext(ctx.principal, ctx.capabilities, ctx.request_id, roots=ctx.roots)
    contents = server.resources.read_resource(call, uri)
    return _cacheable({"contents": contents}, "private", 0)


def extension_method(
    method: ExtensionMethod,
) -> Callable[[ServerView, RequestContext, dict[str, Any]], dict[str, Any]]:
    """A method an extension serves, as a handler: it sees the request as a CallContext."""

    def handle(server: ServerView, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return method(_call_context(ctx, {}), params)

    return handle
