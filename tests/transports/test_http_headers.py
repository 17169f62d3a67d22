"""The standard-header rung (protocol/headers.py): decoding and comparing, pure."""

from __future__ import annotations

from typing import Any

import pytest

from notes_server.errors import HeaderMismatch
from notes_server.protocol.envelope import Request
from notes_server.protocol.headers import check_headers, decode_header_value
from notes_server.protocol.meta import ClientMeta

META = ClientMeta("2026-07-28", {}, None)


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ("notes_read", "notes_read"),
        ("  notes_read\t", "notes_read"),
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64?Y2Fmw6k=?=", "caf\u00e9"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("SGVsbG8=", "SGVsbG8="),  # no sentinel: a literal value
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # markers are lowercase, exactly
    ],
)
def test_header_values_decode(raw: str, decoded: str) -> None:
    assert decode_header_value(raw) == decoded


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVs!!!bG8=?=",  # outside the alphabet
        "=?base64?/w==?=",  # not UTF-8
        "caf\u00e9",  # raw non-ASCII
        "a\x00b",  # control character
    ],
)
def test_malformed_header_values_are_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        decode_header_value(raw)


def headers(**values: Any) -> dict[str, list[str]]:
    base = {"mcp-protocol-version": ["2026-07-28"], "mcp-method": ["tools/call"]}
    base.update({k.replace("_", "-"): v for k, v in values.items()})
    return {k: v for k, v in base.items() if v is not None}


CALL = Request(1, "tools/call", {"name": "notes_read"})


def test_matching_headers_pass() -> None:
    check_headers(headers(mcp_name=["notes_read"]), CALL, META)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"mcp_protocol_version": None}, "MCP-Protocol-Version"),
        ({"mcp_protocol_version": ["2025-11-25"]}, "MCP-Protocol-Version"),
        ({"mcp_method": ["tools/list"]}, "Mcp-Method"),
        ({"mcp_method": ["tools/call", "tools/call"]}, "Mcp-Method"),
        ({"mcp_name": None}, "Mcp-Name"),
        ({"mcp_name": ["notes_search"]}, "Mcp-Name"),
        ({"mcp_name": ["=?base64?bm90ZXNfcmVhZA?="]}, "Mcp-Name"),
    ],
)
def test_a_missing_repeated_or_disagreeing_header_is_named(values: Any, named: str) -> None:
    defaults = {"mcp_name": ["notes_read"], **values}
    with pytest.raises(HeaderMismatch) as caught:
        check_headers(headers(**defaults), CALL, META)

    assert caught.value.code == -32020
    assert named in caught.value.message


def test_methods_without_a_target_need_no_name_header() -> None:
    check_headers(headers(mcp_method=["tools/list"]), Request(1, "tools/list", {}), META)


def test_a_non_string_target_is_left_to_params_validation() -> None:
    check_headers(headers(), Request(1, "tools/call", {"name": 7}), META)
