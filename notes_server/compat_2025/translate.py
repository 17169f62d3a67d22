"""Pure translations between 2025-11-25 (and older) wire shapes and the stateless core.

No I/O and no state: the session feeds values in and writes what comes out. Nothing here is
imported by `protocol/`; the core never learns that a legacy client exists.
"""

from __future__ import annotations

import copy
from typing import Any, TypeGuard

from notes_server.capabilities import TASKS_EXTENSION
from notes_server.compat_2025.constants import NOT_INITIALIZED as NOT_INITIALIZED
from notes_server.errors import INVALID_PARAMS, MISSING_CAPABILITY, STATE_REJECTED, InvalidParams
from notes_server.protocol.meta import names_version
from notes_server.protocol.versions import (
    LATEST,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
)
from notes_server.values import larger_than

LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_LEGACY = LEGACY_VERSIONS[0]
TITLED_ENUMS_SINCE = "2025-11-25"  # `oneOf` single-select and `mode` arrived in 2025-11-25

# Methods a legacy session may call; everything else is -32601 as in the modern core.
LEGACY_METHODS = frozenset(
    {
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
    }
)
# The session's level (`logging/setLevel`) is stamped on these requests, which may log.
LOGGED_METHODS = frozenset({"tools/call", "prompts/get"})
# Embedded MRTR input requests that 2025-11-25 expresses as server-initiated requests.
SERVER_REQUESTS = frozenset({"elicitation/create", "roots/list", "sampling/createMessage"})
RESOURCE_NOT_FOUND = -32002
STRIPPED_KEYS = ("resultType", "ttlMs", "cacheScope")
CANCELLED: dict[str, Any] = {"action": "cancel"}

NEEDS_ELICITATION = (
    "This action needs the user's confirmation, but this client does not support elicitation "
    "forms (it did not declare the elicitation capability with form mode in initialize), so "
    "nothing was changed. Ask the user to perform this action in a client that supports MCP "
    "elicitation, or to do it by hand."
)
NEEDS_URL_ELICITATION = (
    "This action must be approved by the user on a web page of this server, but this client "
    "does not support URL-mode elicitation (it did not declare the elicitation capability with "
    "url mode in initialize), so nothing was changed. Ask the user to perform this action in "
    "a client that supports MCP URL elicitation."
)
TOO_MANY_ROUNDS = (
    "The confirmation did not complete after {rounds} rounds of questions, so nothing was "
    "changed. Call the tool again to start over."
)

CONFIRMATION_EXPIRED = (
    "The confirmation expired before the user answered it (it is valid for a limited time), "
    "so nothing was changed. Call the tool again to ask the user again."
)


def is_modern(params: dict[str, Any]) -> bool:
    """A request is modern when its `_meta` names a protocol version (valid or not)."""
    return names_version(params)


def is_response(message: Any) -> TypeGuard[dict[str, Any]]:
    """A JSON-RPC response object (what a client sends back to a server-initiated request)."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and "id" in message
        and ("result" in message or "error" in message)
    )


def negotiate(requested: str) -> str:
    """Echo a legacy version we speak; answer anything else with the latest legacy one."""
    return requested if requested in LEGACY_VERSIONS else LATEST_LEGACY


# What a session keeps of `initialize`: only what the server reads, bounded (the row lives for
# a day, and every request of the session stamps it into `_meta`).
MAX_KEPT_CAPABILITIES_BYTES = 8 * 1024
_SAMPLING_FLAGS = ("context", "tools")


def modern_capabilities(declared: dict[str, Any], version: str = LATEST_LEGACY) -> dict[str, Any]:
    """Map `initialize` capabilities to the per-request 2026-07-28 shape, keeping only what
    the server reads: which elicitation modes, roots and sampling are declared (their
    contents are not read, so they are kept as `{}`) and the `extensions` entries (each
    extension reads its own). `experimental` and `tasks` are dropped, as are malformed entries
    and the 2026-07-28 Tasks extension (a 2025 session's calls never become tasks: that era
    has tasks of its own, in the core, which this server does not offer).

    `roots: {listChanged}` becomes `roots: {}`; `elicitation: {}` stays `{}` (form only);
    `url` mode, which older revisions cannot express, counts only from 2025-11-25 on. What is
    kept may take at most MAX_KEPT_CAPABILITIES_BYTES as JSON: more is -32602.
    """
    caps: dict[str, Any] = {}
    sampling = declared.get("sampling")
    if isinstance(sampling, dict):
        caps["sampling"] = {
            flag: {} for flag in _SAMPLING_FLAGS if isinstance(sampling.get(flag), dict)
        }
    if isinstance(declared.get("extensions"), dict):
        if larger_than(declared["extensions"], MAX_KEPT_CAPABILITIES_BYTES):
            raise InvalidParams(
                "Invalid params: initialize capabilities.extensions take more than "
                f"{MAX_KEPT_CAPABILITIES_BYTES} bytes"
            )
        caps["extensions"] = {
            name: copy.deepcopy(entry)
            for name, entry in declared["extensions"].items()
            if isinstance(entry, dict) and name != TASKS_EXTENSION
        }
    if isinstance(declared.get("roots"), dict):
        caps["roots"] = {}
    elicitation = declared.get("elicitation")
    if isinstance(elicitation, dict):
        caps["elicitation"] = {
            mode: {}
            for mode, value in elicitation.items()
            if mode in ("form", "url")
            and isinstance(value, dict)
            and (mode == "form" or version >= TITLED_ENUMS_SINCE)
        }
    return caps


def modern_params(
    params: dict[str, Any],
    capabilities: dict[str, Any],
    client_info: dict[str, Any] | None,
    log_level: str | None = None,
) -> dict[str, Any]:
    """The legacy params with the `_meta` a modern client would have sent (other keys kept):
    with `log_level` (the session's `logging/setLevel`), the per-request log level; without
    it none, whatever the client put there (2025-11-25 has no per-request level)."""
    meta = params.get("_meta")
    stamped: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
    stamped[META_VERSION] = LATEST
    stamped[META_CAPABILITIES] = copy.deepcopy(capabilities)
    stamped.pop(META_LOG_LEVEL, None)
    if log_level is not None:
        stamped[META_LOG_LEVEL] = log_level
    if client_info is not None:
        stamped[META_CLIENT_INFO] = dict(client_info)  # shared by the session's requests
    return {**params, "_meta": stamped}


# What `resources` declares only where the session can be told (`resources/subscribe` and
# the notifications on its stream): the 2026-07-28 listen's capabilities otherwise.
SUBSCRIPTION_CAPABILITIES = ("subscribe", "listChanged")


def initialize_result(
    version: str,
    discovered: dict[str, Any],
    server_info: dict[str, Any],
    *,
    subscriptions: bool = False,
) -> dict[str, Any]:
    """An InitializeResult built from the core's own `server/discover` answer; `subscriptions`:
    the session's transport delivers change notifications (else `resources` claims none)."""
    capabilities = {k: v for k, v in discovered["capabilities"].items() if k != "extensions"}
    resources = capabilities.get("resources")
    if not subscriptions and isinstance(resources, dict):
        capabilities["resources"] = {
            k: v for k, v in resources.items() if k not in SUBSCRIPTION_CAPABILITIES
        }
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info,
    }
    if "instructions" in discovered:
        result["instructions"] = discovered["instructions"]
    return result


def legacy_result(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """Strip what 2025-11-25 results do not have: resultType, caching hints, serverInfo."""
    out = {k: v for k, v in result.items() if k not in STRIPPED_KEYS}
    meta = out.pop("_meta", None)
    if isinstance(meta, dict):
        rest = {k: v for k, v in meta.items() if k != META_SERVER_INFO}
        if rest:
            out["_meta"] = rest
    if "structuredContent" in out and not isinstance(out["structuredContent"], dict):
        del out["structuredContent"]  # 2025-11-25 allows only objects; the text block remains
    if method == "tools/list" and isinstance(out.get("tools"), list):
        out["tools"] = [_legacy_tool(tool) for tool in out["tools"]]
    return out


def _legacy_tool(tool: Any) -> Any:
    """2025-11-25 requires an object-typed outputSchema; drop any other."""
    if isinstance(tool, dict) and "outputSchema" in tool:
        schema = tool["outputSchema"]
        if not (isinstance(schema, dict) and schema.get("type") == "object"):
            return {k: v for k, v in tool.items() if k != "outputSchema"}
    return tool


def legacy_error(method: str, error: dict[str, Any]) -> dict[str, Any]:
    """Resource not found is -32002 (with data.uri) before 2026-07-28."""
    data = error.get("data")
    if (
        method == "resources/read"
        and error.get("code") == INVALID_PARAMS
        and isinstance(data, dict)
        and "uri" in data
    ):
        return {**error, "code": RESOURCE_NOT_FOUND}
    return error


def tool_error_result(text: str) -> dict[str, Any]:
    """A legacy CallToolResult that tells the model what went wrong."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def expired_confirmation(error: dict[str, Any]) -> bool:
    """The core refused the requestState that came with the user's answer.

    The adapter passes on only states the core itself just issued, unchanged, so the answer
    came too late (or the keys changed meanwhile): either way, asking again is the remedy, and
    a 2025-11-25 host shows a tool error to the model, where a JSON-RPC error is a dead end."""
    return error.get("code") == INVALID_PARAMS and error.get("message") == STATE_REJECTED


def needs_capability(method: str, error: dict[str, Any]) -> bool:
    return method == "tools/call" and error.get("code") == MISSING_CAPABILITY


def capability_refusal(error: dict[str, Any]) -> str:
    """What the model is told for -32021: URL mode or form mode, as the tool required."""
    data = error.get("data")
    required = data.get("requiredCapabilities") if isinstance(data, dict) else None
    elicitation = required.get("elicitation") if isinstance(required, dict) else None
    if isinstance(elicitation, dict) and "url" in elicitation:
        return NEEDS_URL_ELICITATION
    return NEEDS_ELICITATION


def server_request(version: str, request_id: str, embedded: dict[str, Any]) -> dict[str, Any]:
    """A real JSON-RPC request for one embedded MRTR input request."""
    method = embedded["method"]
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    params = embedded.get("params")
    if method == "elicitation/create" and isinstance(params, dict):
        params = legacy_elicitation(version, request_id, params)
    if params is not None:
        message["params"] = params
    return message


def legacy_elicitation(version: str, request_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """2025-11-25 url mode needs an `elicitationId`; older revisions know neither `mode` nor
    titled `oneOf` choices, which become `enum` + `enumNames`."""
    out = copy.deepcopy(params)
    if version >= TITLED_ENUMS_SINCE:
        if out.get("mode") == "url" and "elicitationId" not in out:
            out["elicitationId"] = request_id
        return out
    out.pop("mode", None)
    schema = out.get("requestedSchema")
    if isinstance(schema, dict) and isinstance(schema.get("properties"), dict):
        schema["properties"] = {
            name: _untitled_enum(prop) for name, prop in schema["properties"].items()
        }
    return out


def _untitled_enum(prop: Any) -> Any:
    choices = prop.get("oneOf") if isinstance(prop, dict) else None
    if not isinstance(choices, list) or not all(
        isinstance(c, dict) and isinstance(c.get("const"), str) for c in choices
    ):
        return prop
    out = {k: v for k, v in prop.items() if k != "oneOf"}
    out["enum"] = [c["const"] for c in choices]
    out["enumNames"] = [str(c.get("title", c["const"])) for c in choices]
    return out


def input_response(method: str, response: dict[str, Any] | None) -> dict[str, Any] | None:
    """The client's answer as an `inputResponses` entry; None leaves the entry out.

    A JSON-RPC error (or no answer at all, e.g. stdin closed) to an elicitation counts as
    `{"action": "cancel"}`: the user did not choose, so nothing is changed.
    """
    result = None if response is None else response.get("result")
    if isinstance(result, dict):
        return result
    return copy.deepcopy(CANCELLED) if method == "elicitation/create" else None
