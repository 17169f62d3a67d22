"""The pure 2025-11-25 <-> 2026-07-28 translations."""

from __future__ import annotations

from typing import Any

import pytest

from notes_server.compat_2025.session import kept_client_info
from notes_server.compat_2025.translate import (
    CANCELLED,
    MAX_KEPT_CAPABILITIES_BYTES,
    initialize_result,
    input_response,
    is_modern,
    is_response,
    legacy_elicitation,
    legacy_error,
    legacy_result,
    modern_capabilities,
    modern_params,
    needs_capability,
    negotiate,
    server_request,
)
from notes_server.errors import InvalidParams

VERSION = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"

FORM_PARAMS: dict[str, Any] = {
    "mode": "form",
    "message": "Pick one",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "note_id": {
                "type": "string",
                "title": "Note",
                "oneOf": [{"const": "n-1", "title": "One"}, {"const": "n-2", "title": "Two"}],
            },
            "confirm": {"type": "boolean"},
        },
        "required": ["note_id", "confirm"],
    },
}


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("", "2025-11-25"),
    ],
)
def test_negotiation_echoes_known_legacy_versions_only(requested: str, negotiated: str) -> None:
    assert negotiate(requested) == negotiated


@pytest.mark.parametrize(
    ("params", "modern"),
    [
        ({"_meta": {VERSION: "2026-07-28", CAPS: {}}}, True),
        ({"_meta": {VERSION: 12}}, True),  # malformed, but modern: the core's ladder answers
        ({"_meta": {"progressToken": 1}}, False),
        ({"_meta": "x"}, False),
        ({}, False),
    ],
)
def test_a_request_is_modern_when_its_meta_names_a_version(
    params: dict[str, Any], modern: bool
) -> None:
    assert is_modern(params) is modern


def test_capabilities_are_mapped_to_the_per_request_shape() -> None:
    declared = {
        "roots": {"listChanged": True},
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "tasks": {"requests": {}},
        "experimental": {"x": {}},
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}},
    }

    assert modern_capabilities(declared) == {
        "roots": {},
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}},
    }


def test_only_what_the_server_reads_is_kept_of_the_capabilities() -> None:
    bulk = {"blob": "x" * 100_000}
    declared = {
        "experimental": bulk,
        "sampling": {"context": bulk, "tools": {}, "other": bulk},
        "elicitation": {"form": bulk, "url": bulk},
        "roots": {"listChanged": True, "extra": bulk},
    }

    assert modern_capabilities(declared) == {
        "sampling": {"context": {}, "tools": {}},
        "elicitation": {"form": {}, "url": {}},
        "roots": {},
    }


def test_extensions_past_the_bound_are_invalid_params() -> None:
    declared = {"extensions": {"x.example/big": {"blob": "x" * MAX_KEPT_CAPABILITIES_BYTES}}}

    with pytest.raises(InvalidParams) as refused:
        modern_capabilities(declared)

    assert refused.value.message == (
        "Invalid params: initialize capabilities.extensions take more than 8192 bytes"
    )


def test_client_info_keeps_name_title_and_version_only() -> None:
    sent = {"name": "host", "title": "Host", "version": "1", "icons": [{"src": "x" * 10**6}]}

    assert kept_client_info(sent) == {"name": "host", "title": "Host", "version": "1"}
    assert kept_client_info({"name": 5, "version": "1"}) == {"version": "1"}
    assert kept_client_info("host") is None


@pytest.mark.parametrize("field", ["name", "title", "version"])
def test_a_client_info_field_past_the_bound_is_invalid_params(field: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        kept_client_info({field: "x" * 257})

    assert refused.value.message == (
        f"Invalid params: initialize clientInfo.{field} is longer than 256 characters"
    )


@pytest.mark.parametrize(
    ("elicitation", "mapped"),
    [({}, {}), ({"url": {}}, {"url": {}}), ({"form": {}, "bogus": 1}, {"form": {}})],
)
def test_elicitation_keeps_its_modes_and_empty_stays_form_only(
    elicitation: dict[str, Any], mapped: dict[str, Any]
) -> None:
    assert modern_capabilities({"elicitation": elicitation}) == {"elicitation": mapped}


def test_malformed_capability_entries_are_dropped() -> None:
    assert modern_capabilities({"elicitation": True, "roots": "yes", "sampling": []}) == {}


def test_modern_params_stamp_meta_and_keep_the_rest() -> None:
    params = {"name": "t", "_meta": {"progressToken": 5, VERSION: "old"}}

    stamped = modern_params(params, {"elicitation": {}}, {"name": "host", "version": "1"})

    assert stamped == {
        "name": "t",
        "_meta": {
            "progressToken": 5,
            VERSION: "2026-07-28",
            CAPS: {"elicitation": {}},
            CLIENT_INFO: {"name": "host", "version": "1"},
        },
    }
    assert params["_meta"][VERSION] == "old"


def test_initialize_result_comes_from_discover_without_modern_only_parts() -> None:
    discovered = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "extensions": {"io.modelcontextprotocol/ui": {}}},
        "instructions": "Use workspaces.",
        "ttlMs": 1,
        "cacheScope": "public",
    }

    assert initialize_result("2025-06-18", discovered, {"name": "n", "version": "1"}) == {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "n", "version": "1"},
        "instructions": "Use workspaces.",
    }


def test_results_lose_result_type_caching_hints_and_server_info() -> None:
    result = {
        "resultType": "complete",
        "contents": [],
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {SERVER_INFO: {"name": "n"}, "other": 1},
    }

    assert legacy_result("resources/read", result) == {"contents": [], "_meta": {"other": 1}}
    assert legacy_result("resources/read", {"x": 1, "_meta": {SERVER_INFO: {}}}) == {"x": 1}


def test_non_object_structured_content_and_output_schemas_are_dropped() -> None:
    listing = {
        "tools": [
            {"name": "a", "outputSchema": {"type": "array"}},
            {"name": "b", "outputSchema": {"type": "object"}},
            {"name": "c"},
        ]
    }

    assert legacy_result("tools/list", listing)["tools"] == [
        {"name": "a"},
        {"name": "b", "outputSchema": {"type": "object"}},
        {"name": "c"},
    ]
    call = {"content": [], "structuredContent": [1, 2], "isError": False}
    assert legacy_result("tools/call", call) == {"content": [], "isError": False}


def test_resource_not_found_becomes_the_legacy_code() -> None:
    missing = {"code": -32602, "message": "Resource not found", "data": {"uri": "file:///x"}}

    assert legacy_error("resources/read", missing)["code"] == -32002
    assert legacy_error("resources/read", {"code": -32602, "message": "bad"})["code"] == -32602
    assert legacy_error("tools/call", missing)["code"] == -32602


def test_only_a_tools_call_missing_capability_is_turned_into_a_tool_error() -> None:
    assert needs_capability("tools/call", {"code": -32021, "message": "m"})
    assert not needs_capability("tools/call", {"code": -32602, "message": "m"})
    assert not needs_capability("resources/read", {"code": -32021, "message": "m"})


def test_2025_11_25_elicitations_are_sent_unchanged() -> None:
    message = server_request(
        "2025-11-25", "s-1", {"method": "elicitation/create", "params": FORM_PARAMS}
    )

    assert message == {
        "jsonrpc": "2.0",
        "id": "s-1",
        "method": "elicitation/create",
        "params": FORM_PARAMS,
    }


@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_older_hosts_get_enum_names_instead_of_titled_choices_and_no_mode(version: str) -> None:
    params = legacy_elicitation(version, "s-1", FORM_PARAMS)

    assert "mode" not in params
    assert params["requestedSchema"]["properties"]["note_id"] == {
        "type": "string",
        "title": "Note",
        "enum": ["n-1", "n-2"],
        "enumNames": ["One", "Two"],
    }
    assert params["requestedSchema"]["properties"]["confirm"] == {"type": "boolean"}
    assert "oneOf" in FORM_PARAMS["requestedSchema"]["properties"]["note_id"]  # not mutated


def test_url_elicitations_get_an_elicitation_id() -> None:
    params = legacy_elicitation("2025-11-25", "s-4", {"mode": "url", "message": "m", "url": "u"})

    assert params["elicitationId"] == "s-4"


def test_other_server_requests_keep_their_params() -> None:
    assert server_request("2025-11-25", "s-2", {"method": "roots/list"}) == {
        "jsonrpc": "2.0",
        "id": "s-2",
        "method": "roots/list",
    }


@pytest.mark.parametrize(
    ("response", "entry"),
    [
        ({"id": "s-1", "result": {"action": "decline"}}, {"action": "decline"}),
        ({"id": "s-1", "error": {"code": -32601, "message": "no"}}, CANCELLED),
        ({"id": "s-1", "result": "weird"}, CANCELLED),
        (None, CANCELLED),
    ],
)
def test_elicitation_answers_and_failures(
    response: dict[str, Any] | None, entry: dict[str, Any]
) -> None:
    assert input_response("elicitation/create", response) == entry


def test_a_failed_roots_request_is_left_out() -> None:
    assert input_response("roots/list", {"id": "s-1", "error": {"code": 1, "message": "x"}}) is None
    assert input_response("roots/list", {"id": "s-1", "result": {"roots": []}}) == {"roots": []}


@pytest.mark.parametrize(
    ("message", "response"),
    [
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, True),
        ({"jsonrpc": "2.0", "id": 1, "error": {}}, True),
        ({"jsonrpc": "2.0", "id": 1}, False),
        ({"jsonrpc": "2.0", "id": 1, "method": "x", "result": {}}, False),
        ([], False),
    ],
)
def test_responses_are_recognized(message: Any, response: bool) -> None:
    assert is_response(message) is response
