"""Dispatch through the in-process server: method table, result stamping, error mapping."""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import notes_server.protocol
from notes_server.protocol.server import McpServer

Call = Callable[..., dict[str, Any]]
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
WORKSPACE = "file:///home/alice/notes"


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "result" not in reply, reply
    error: dict[str, Any] = reply["error"]
    return error


def result_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    result: dict[str, Any] = reply["result"]
    return result


# --- server/discover ---------------------------------------------------------------------


def test_discover_returns_the_documented_shape(call: Call) -> None:
    reply = call("server/discover", id="discover-1")

    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == "discover-1"
    result = result_of(reply)
    assert set(result) == {
        "resultType",
        "supportedVersions",
        "capabilities",
        "instructions",
        "ttlMs",
        "cacheScope",
        "_meta",
    }
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "tools" in result["capabilities"]
    assert "resources" in result["capabilities"]
    assert "roots" not in result["capabilities"]
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert type(result["ttlMs"]) is int and result["ttlMs"] >= 0
    assert result["cacheScope"] == "public"
    info = result["_meta"][SERVER_INFO_KEY]
    assert info["name"] == "notes-server"
    assert isinstance(info["version"], str) and info["version"]


def test_discover_does_not_need_client_info(call: Call) -> None:
    assert result_of(call("server/discover"))["resultType"] == "complete"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("server/discover", None),
        ("tools/list", None),
        ("resources/list", None),
        ("resources/templates/list", None),
        ("tools/call", {"name": "notes_search", "arguments": {"workspaceUri": WORKSPACE}}),
    ],
)
def test_every_result_carries_result_type_and_server_info(
    call: Call, grant: Callable[..., str], method: str, params: dict[str, Any] | None
) -> None:
    grant("alice", WORKSPACE)

    result = result_of(call(method, params))

    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO_KEY]["name"] == "notes-server"


def test_the_reply_echoes_the_request_id_exactly(call: Call) -> None:
    assert call("server/discover", id="abc-123")["id"] == "abc-123"
    assert call("server/discover", id=0)["id"] == 0


# --- tools/list --------------------------------------------------------------------------


def test_tools_list_is_deterministic(call: Call) -> None:
    first = result_of(call("tools/list"))
    second = result_of(call("tools/list", id=2))

    assert first == second
    assert [t["name"] for t in first["tools"]] == [t["name"] for t in second["tools"]]


def test_tools_list_is_cacheable_and_private_as_it_follows_the_apps_capability(
    call: Call,
) -> None:
    result = result_of(call("tools/list"))

    assert type(result["ttlMs"]) is int and result["ttlMs"] >= 0
    # notes_timeline carries `_meta.ui` only for Apps hosts: a shared cache keyed on the
    # method alone could hand that variant to another client.
    assert result["cacheScope"] == "private"
    assert "nextCursor" not in result


def test_every_tool_refuses_unknown_arguments_and_declares_output_and_hints(call: Call) -> None:
    tools = result_of(call("tools/list"))["tools"]

    assert tools, "the server ships tools"
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object", tool["name"]
        assert tool["inputSchema"]["additionalProperties"] is False, tool["name"]
        assert isinstance(tool["outputSchema"], dict), tool["name"]
        hints = tool["annotations"]
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
            assert isinstance(hints[hint], bool), (tool["name"], hint)
        assert hints["openWorldHint"] is False, tool["name"]


def test_tool_names_are_unique(call: Call) -> None:
    names = [t["name"] for t in result_of(call("tools/list"))["tools"]]

    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", ["notes_search", "notes_read"])
def test_read_only_tools_say_so(call: Call, name: str) -> None:
    tools = {t["name"]: t for t in result_of(call("tools/list"))["tools"]}

    assert tools[name]["annotations"]["readOnlyHint"] is True
    assert tools[name]["annotations"]["destructiveHint"] is False


@pytest.mark.parametrize("name", ["notes_create", "notes_update", "notes_move"])
def test_writing_tools_are_not_marked_read_only(call: Call, name: str) -> None:
    tools = {t["name"]: t for t in result_of(call("tools/list"))["tools"]}

    assert tools[name]["annotations"]["readOnlyHint"] is False


def test_a_cursor_on_the_single_page_tool_list_is_invalid_params(call: Call) -> None:
    assert error_of(call("tools/list", {"cursor": "x"}))["code"] == -32602


# --- method table ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/list",
        "no/such/method",
    ],
)
def test_removed_unadvertised_and_unknown_methods_are_method_not_found(
    call: Call, method: str
) -> None:
    reply = call(method, id=42)

    assert reply["id"] == 42
    assert error_of(reply)["code"] == -32601


def test_the_meta_ladder_runs_before_method_lookup(server: McpServer) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}})

    reply = json.loads(server.handle_raw(raw.encode(), "alice") or b"")

    assert reply["id"] == 5
    assert error_of(reply)["code"] == -32602


def test_an_unsupported_version_is_refused_with_the_exact_requested_value(
    server: McpServer,
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 6,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "1900-01-01",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }

    reply = json.loads(server.handle_raw(json.dumps(request).encode(), "alice") or b"")

    assert reply == {
        "jsonrpc": "2.0",
        "id": 6,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "1900-01-01"},
        },
    }


def test_a_notification_is_never_answered(server: McpServer) -> None:
    raw = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}})

    assert server.handle_raw(raw.encode(), "alice") is None


def test_an_undecodable_message_is_answered_with_a_null_id(server: McpServer) -> None:
    reply = json.loads(server.handle_raw(b"{oops", "alice") or b"")

    assert reply["id"] is None
    assert error_of(reply)["code"] == -32700


# --- tools/call validation ---------------------------------------------------------------


def test_an_unknown_tool_is_invalid_params_naming_it(call: Call) -> None:
    error = error_of(call("tools/call", {"name": "notes_nuke", "arguments": {}}))

    assert error == {"code": -32602, "message": "Unknown tool: notes_nuke"}


@pytest.mark.parametrize("name", [None, 3, ["notes_read"]])
def test_a_tool_name_that_is_not_a_string_is_invalid_params(call: Call, name: Any) -> None:
    assert error_of(call("tools/call", {"name": name}))["code"] == -32602


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({}, "workspaceUri"),
        ({"workspaceUri": WORKSPACE}, "noteId"),
        ({"workspaceUri": WORKSPACE, "noteId": 12}, "noteId"),
        ({"workspaceUri": 5, "noteId": "n"}, "workspaceUri"),
        ({"workspaceUri": WORKSPACE, "noteId": "n", "extra": 1}, "extra"),
        ({"workspaceUri": WORKSPACE, "noteId": ""}, "noteId"),
    ],
    ids=["missing-workspace", "missing-note", "wrong-type", "wrong-type-uri", "extra", "empty"],
)
def test_schema_invalid_arguments_are_invalid_params_naming_the_field(
    call: Call, arguments: dict[str, Any], field: str
) -> None:
    error = error_of(call("tools/call", {"name": "notes_read", "arguments": arguments}))

    assert error["code"] == -32602
    assert field in error["message"]


def test_arguments_that_are_not_an_object_are_invalid_params(call: Call) -> None:
    error = error_of(call("tools/call", {"name": "notes_read", "arguments": ["x"]}))

    assert error["code"] == -32602


def test_a_boolean_is_not_accepted_as_an_integer(call: Call) -> None:
    arguments = {"workspaceUri": WORKSPACE, "limit": True}

    error = error_of(call("tools/call", {"name": "notes_search", "arguments": arguments}))

    assert error["code"] == -32602
    assert "limit" in error["message"]


def test_input_responses_without_request_state_are_invalid_params_for_a_confirming_tool(
    call: Call, grant: Callable[..., str]
) -> None:
    grant("alice", WORKSPACE)
    params = {
        "name": "notes_delete",
        "arguments": {"workspaceUri": WORKSPACE, "title": "x"},
        "inputResponses": {"delete_choice": {"action": "accept"}},
    }

    error = error_of(call("tools/call", params, caps={"elicitation": {}}))

    assert error["code"] == -32602
    assert "requestState" in error["message"]


def test_request_state_without_input_responses_is_invalid_params_for_a_confirming_tool(
    call: Call,
) -> None:
    params = {
        "name": "notes_delete",
        "arguments": {"workspaceUri": WORKSPACE, "title": "x"},
        "requestState": "s",
    }

    assert error_of(call("tools/call", params, caps={"elicitation": {}}))["code"] == -32602


def test_a_tool_that_never_asks_for_input_ignores_stray_input_responses(
    call: Call, grant: Callable[..., str]
) -> None:
    grant("alice", WORKSPACE)
    params = {
        "name": "notes_search",
        "arguments": {"workspaceUri": WORKSPACE},
        "inputResponses": {"confirm": {"action": "accept"}},
    }

    reply = call("tools/call", params)

    assert reply["result"]["resultType"] == "complete"
    assert reply["result"]["isError"] is False


def test_mistyped_input_responses_are_invalid_params_for_any_tool(call: Call) -> None:
    params = {
        "name": "notes_search",
        "arguments": {"workspaceUri": WORKSPACE},
        "inputResponses": ["not", "an", "object"],
    }

    assert error_of(call("tools/call", params))["code"] == -32602


def test_an_exception_inside_a_tool_leaves_only_as_a_bare_internal_error(
    call: Call,
    server: McpServer,
    grant: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    grant("alice", WORKSPACE)
    tool = server.registry.get("notes_search")
    assert tool is not None

    def explode(*_args: Any) -> Any:
        raise RuntimeError("secret /etc/passwd")

    monkeypatch.setattr(tool, "call", explode)
    params = {"name": "notes_search", "arguments": {"workspaceUri": WORKSPACE}}

    with caplog.at_level(logging.ERROR, logger="notes_server.protocol"):
        reply = call("tools/call", params, id=77)

    assert reply == {
        "jsonrpc": "2.0",
        "id": 77,
        "error": {"code": -32603, "message": "Internal error"},
    }
    assert "secret" not in json.dumps(reply)
    assert any(record.exc_info for record in caplog.records), "the traceback goes to the log"


# --- dependency direction ----------------------------------------------------------------

FORBIDDEN_IN_PROTOCOL = ("notes_server.store", "sqlalchemy", "notes_server.transports")


def imported_modules(source: str, module: str) -> set[str]:
    """Every module a source file imports, at any depth (functions, TYPE_CHECKING blocks)."""
    package = module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def violations(source: str, module: str) -> list[str]:
    return sorted(
        name
        for name in imported_modules(source, module)
        if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_IN_PROTOCOL)
    )


def test_the_import_walker_detects_forbidden_imports() -> None:
    source = (
        "import sqlalchemy\n"
        "def f():\n    from notes_server.store import notes\n"
        "from ..transports import stdio\n"
        "from . import meta\n"
    )

    assert violations(source, "notes_server.protocol.example") == [
        "notes_server.store",
        "notes_server.store.notes",
        "notes_server.transports",
        "notes_server.transports.stdio",
        "sqlalchemy",
    ]


def test_protocol_never_imports_the_store_sqlalchemy_or_transports() -> None:
    package_dir = Path(next(iter(notes_server.protocol.__path__)))
    files = sorted(package_dir.glob("*.py"))
    assert len(files) >= 5

    problems = {
        path.name: found
        for path in files
        if (
            found := violations(
                path.read_text(encoding="utf-8"), f"notes_server.protocol.{path.stem}"
            )
        )
    }

    assert problems == {}


def test_an_input_response_that_is_not_an_object_is_invalid_params_for_any_tool(
    call: Call,
) -> None:
    params = {
        "name": "notes_search",
        "arguments": {"workspaceUri": WORKSPACE},
        "inputResponses": {"confirm": 42},
    }

    assert error_of(call("tools/call", params)) == {
        "code": -32602,
        "message": "Invalid params: every inputResponses entry must be an object",
    }
