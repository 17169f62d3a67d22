"""Hostile values inside well-formed JSON: deep nesting, lone surrogates, non-ASCII numerals.

Each is refused with a precise JSON-RPC error where it is decoded, for every transport, instead
of failing later (RecursionError in a deepcopy, UnicodeEncodeError in the store) as -32603.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from notes_server.errors import INVALID_PARAMS, INVALID_REQUEST
from notes_server.protocol.envelope import DecodeFailure, decode
from notes_server.protocol.server import McpServer
from notes_server.tools.schema import validate
from tests.helpers import make_request

Call = Callable[..., dict[str, Any]]
NOTES = "file:///home/alice/notes"
LONE = "\ud800"


def nested(levels: int) -> Any:
    """An object `levels` deep (the outermost counts as one)."""
    value: Any = {}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


def failure_of(raw: bytes | str) -> DecodeFailure:
    with pytest.raises(DecodeFailure) as info:
        decode(raw)
    return info.value


def raw_request(params: dict[str, Any], method: str = "tools/call", id: Any = 9) -> bytes:
    """Bytes as a client writes them: json.dumps spells a lone surrogate as `\\ud800`."""
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).encode()


def answer(server: McpServer, raw: bytes) -> dict[str, Any]:
    reply = server.handle_raw(raw, "alice")
    assert reply is not None
    parsed: dict[str, Any] = json.loads(reply)
    return parsed


def test_a_message_nested_64_levels_deep_is_accepted() -> None:
    # message (1) > params (2) > 62 more levels
    assert isinstance(decode(raw_request(nested(63))), object)


PARAMS_TOO_DEEP = "Invalid params: params nest deeper than 64 levels"
TOO_DEEP = "Invalid Request: message nests deeper than 64 levels"


def test_params_nested_65_levels_deep_are_invalid_params_with_the_id() -> None:
    failure = failure_of(raw_request(nested(64)))

    assert failure.error.code == INVALID_PARAMS
    assert failure.error.message == PARAMS_TOO_DEEP
    assert failure.request_id == 9


@pytest.mark.parametrize("levels", [65, 600, 5_000, 200_000])
@pytest.mark.parametrize("request_id", [84619, "r-1"])
def test_params_too_deep_even_for_the_parser_echo_the_id(levels: int, request_id: Any) -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})[:-1]
    raw = head + ',"params":{"x":' + "[" * levels + "]" * levels + "}}"

    failure = failure_of(raw)

    assert (failure.error.code, failure.error.message) == (INVALID_PARAMS, PARAMS_TOO_DEEP)
    assert failure.request_id == request_id


@pytest.mark.parametrize("levels", [65, 5_000])
def test_an_id_after_params_too_deep_for_the_parser_is_still_echoed(levels: int) -> None:
    raw = '{"params":' + "[" * levels + "]" * levels + ', "id" : "a\\"b",\n"method":"m",'
    raw += ' "jsonrpc": "2.0" }\n'

    failure = failure_of(raw)

    assert (failure.error.code, failure.error.message) == (INVALID_PARAMS, PARAMS_TOO_DEEP)
    assert failure.request_id == 'a"b'


@pytest.mark.parametrize("levels", [65, 5_000])
def test_depth_inside_tool_arguments_is_invalid_params_with_the_id(levels: int) -> None:
    arguments = '{"workspaceUri":"file:///w","query":' + "[" * levels + "]" * levels + "}"
    raw = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"notes_search",'
    raw += '"arguments":' + arguments + "}}"

    failure = failure_of(raw)

    assert (failure.error.code, failure.error.message) == (INVALID_PARAMS, PARAMS_TOO_DEEP)
    assert failure.request_id == 7


@pytest.mark.parametrize("levels", [65, 5_000])
def test_depth_outside_params_is_invalid_request_with_the_id(levels: int) -> None:
    raw = '{"jsonrpc":"2.0","id":5,"method":"m","params":{},"x":' + "[" * levels
    raw += "]" * levels + "}"

    failure = failure_of(raw)

    assert (failure.error.code, failure.error.message) == (INVALID_REQUEST, TOO_DEEP)
    assert failure.request_id == 5


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 5_000 + "]" * 5_000,
        '{"params":' + "[" * 5_000 + "]" * 5_000 + ', "id": [1], "method": "m"}',
        '{"id":1,"id":2,"params":' + "[" * 5_000 + "]" * 5_000 + "}",
        '{"jsonrpc":"2.0","method":"m","params":' + "[" * 5_000 + "]" * 5_000 + "}",
    ],
    ids=["top-level-array", "id-not-an-id", "id-repeated", "notification"],
)
def test_only_a_frame_whose_id_cannot_be_read_gets_a_null_id(raw: str) -> None:
    assert failure_of(raw).request_id is None


def test_deep_initialize_capabilities_are_refused_before_any_handler_walks_them(
    server: McpServer,
) -> None:
    params = {"protocolVersion": "2025-11-25", "capabilities": {"experimental": nested(600)}}

    reply = answer(server, raw_request(params, method="initialize", id="deep"))

    assert reply["id"] == "deep"
    assert reply["error"] == {"code": INVALID_PARAMS, "message": PARAMS_TOO_DEEP}


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("notes_create", {"title": LONE, "body": "b"}, "arguments.title"),
        ("notes_create", {"title": "t", "body": "a" + LONE + "b"}, "arguments.body"),
        ("notes_create", {"title": "t", "body": "b", "path": f"q/{LONE}.md"}, "arguments.path"),
        ("notes_search", {"query": LONE}, "arguments.query"),
        ("notes_search", {"cursor": LONE}, "arguments.cursor"),
        ("notes_search", {"tags": ["ok", LONE]}, "arguments.tags[1]"),
    ],
)
def test_a_lone_surrogate_in_tool_arguments_is_invalid_params_naming_the_field(
    call_tool: Call, grant: Callable[..., str], tool: str, arguments: dict[str, Any], field: str
) -> None:
    grant("alice", NOTES)

    reply = call_tool(tool, {"workspaceUri": NOTES, **arguments})

    assert reply["error"] == {
        "code": INVALID_PARAMS,
        "message": f"Invalid params: {field} contains an unpaired surrogate",
    }


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("resources/list", {"cursor": LONE}, "cursor"),
        ("resources/read", {"uri": f"{NOTES}/{LONE}.md"}, "uri"),
        (
            "server/discover",
            {"_meta": {"io.modelcontextprotocol/clientInfo": {"name": LONE}}},
            "_meta.io.modelcontextprotocol/clientInfo.name",
        ),
    ],
)
def test_a_lone_surrogate_anywhere_in_params_is_invalid_params_naming_the_field(
    server: McpServer, method: str, params: dict[str, Any], field: str
) -> None:
    request = make_request(method, {k: v for k, v in params.items() if k != "_meta"})
    request["params"]["_meta"].update(params.get("_meta", {}))

    reply = answer(server, json.dumps(request).encode())

    assert reply["error"] == {
        "code": INVALID_PARAMS,
        "message": f"Invalid params: {field} contains an unpaired surrogate",
    }


def test_a_member_name_with_a_lone_surrogate_is_named_without_echoing_it(
    server: McpServer,
) -> None:
    params = make_request("server/discover")["params"]
    params["extra"] = {LONE: 1}

    reply = answer(server, raw_request(params, method="server/discover"))

    assert reply["error"]["code"] == INVALID_PARAMS
    assert reply["error"]["message"] == (
        "Invalid params: extra has a member name with an unpaired surrogate"
    )


def test_a_lone_surrogate_in_the_method_is_invalid_request(server: McpServer) -> None:
    reply = answer(server, raw_request({}, method="tools/" + LONE))

    assert reply["error"]["code"] == INVALID_REQUEST
    assert reply["error"]["message"] == "Invalid Request: method contains an unpaired surrogate"


def test_a_lone_surrogate_in_the_id_is_echoed_as_valid_json(server: McpServer) -> None:
    raw = raw_request(make_request("server/discover")["params"], "server/discover", id=LONE)

    reply = server.handle_raw(raw, "alice")

    assert reply is not None
    assert b"\\ud800" in reply
    assert json.loads(reply)["id"] == LONE


def test_a_surrogate_pair_is_an_ordinary_character(
    call_tool: Call, grant: Callable[..., str]
) -> None:
    grant("alice", NOTES)

    reply = call_tool("notes_create", {"workspaceUri": NOTES, "title": "\U0001f600", "body": "b"})

    assert reply["result"]["isError"] is False
    assert reply["result"]["structuredContent"]["note"]["title"] == "\U0001f600"


def test_the_schema_validator_refuses_a_lone_surrogate_in_any_string() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array"}}}

    assert validate({"tags": [{"k": LONE}]}, schema) == (
        "arguments.tags[0].k contains an unpaired surrogate"
    )
    assert validate({"other": LONE}, schema) == "arguments.other contains an unpaired surrogate"
    assert validate({"tags": ["fine"]}, schema) is None


@pytest.mark.parametrize(
    "cursor", ["²", "\u0661\u0660\u0660", "0100", "150", "+100", " 100", "1" * 5000, ""]
)
def test_resources_list_refuses_a_cursor_that_is_not_exactly_one_it_issues(
    call: Call, cursor: str
) -> None:
    assert call("resources/list", {"cursor": cursor})["error"] == {
        "code": INVALID_PARAMS,
        "message": "Invalid cursor",
    }


@pytest.mark.parametrize("cursor", ["²", "\u0661\u0660\u0660", "\U0001f600", "e30"])
def test_notes_search_refuses_a_foreign_cursor(
    call_tool: Call, grant: Callable[..., str], cursor: str
) -> None:
    grant("alice", NOTES)

    reply = call_tool("notes_search", {"workspaceUri": NOTES, "cursor": cursor})

    assert reply["error"]["code"] == INVALID_PARAMS
    assert reply["error"]["message"] == "Invalid cursor: it does not belong to this search"
