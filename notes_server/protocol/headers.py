"""Streamable HTTP standard headers (2026-07-28): do they agree with the body? Pure.

Every POSTed request repeats facts from its body in headers so that proxies and gateways can
route without parsing JSON: `MCP-Protocol-Version`, `Mcp-Method`, and `Mcp-Name` for the three
methods that name a target. A server that processes the body MUST reject a missing, malformed or
disagreeing header with -32020, otherwise a gateway and the server could act on different
requests. `Mcp-Name` values that are not plain visible ASCII travel as `=?base64?...?=` and are
decoded before the comparison.

The transport passes header values as a mapping from lower-cased name to every value received,
so a repeated header is detected instead of silently taking the first one.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any

from notes_server.errors import HeaderMismatch
from notes_server.protocol.envelope import Request
from notes_server.protocol.meta import ClientMeta

VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"

# Which body field `Mcp-Name` mirrors, per method; other methods carry no `Mcp-Name`.
NAME_SOURCES: dict[str, str] = {
    "tools/call": "name",
    "resources/read": "uri",
    "prompts/get": "name",
    # The Tasks extension: a task's requests name it, so a gateway routes them to its state.
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

_SENTINEL = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)
_VISIBLE = re.compile(r"[\x20-\x7e\t]*")
_OWS = " \t"

HeaderValues = Mapping[str, Sequence[str]]


def decode_header_value(raw: str) -> str:
    """Trim optional whitespace, refuse control and non-ASCII characters, and decode the
    base64 sentinel (standard alphabet, padding required, UTF-8 payload).

    Raises ValueError with a client-safe reason when the value is malformed.
    """
    value = raw.strip(_OWS)
    if not _VISIBLE.fullmatch(value):
        raise ValueError("contains characters outside visible ASCII")
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    try:
        payload = base64.b64decode(match.group(1), validate=True)
        return payload.decode("utf-8")
    except (binascii.Error, ValueError):
        raise ValueError("has an invalid base64 value") from None


def check_headers(headers: HeaderValues, request: Request, meta: ClientMeta) -> None:
    """Raise HeaderMismatch (-32020) naming the first header that is missing, malformed or
    different from the body. `meta` is the shape-checked `_meta`, version not yet judged."""
    _expect(headers, VERSION_HEADER, "MCP-Protocol-Version", meta.protocol_version, raw=True)
    _expect(headers, METHOD_HEADER, "Mcp-Method", request.method, raw=True)
    source = NAME_SOURCES.get(request.method)
    if source is None:
        return
    body_value: Any = request.params.get(source)
    if not isinstance(body_value, str):
        # The params are invalid whatever the header says; the handler answers -32602.
        return
    _expect(headers, NAME_HEADER, "Mcp-Name", body_value, raw=False)


def _expect(headers: HeaderValues, key: str, label: str, body_value: str, *, raw: bool) -> None:
    values = headers.get(key) or ()
    if not values:
        raise HeaderMismatch(f"Header mismatch: missing required {label} header")
    if len(values) > 1:
        raise HeaderMismatch(f"Header mismatch: {label} header sent more than once")
    try:
        value = values[0].strip(_OWS) if raw else decode_header_value(values[0])
    except ValueError as exc:
        raise HeaderMismatch(f"Header mismatch: {label} header {exc}") from None
    if raw and not _VISIBLE.fullmatch(value):
        raise HeaderMismatch(f"Header mismatch: {label} header contains invalid characters")
    if value != body_value:
        raise HeaderMismatch(f"Header mismatch: {label} header does not match the request body")
