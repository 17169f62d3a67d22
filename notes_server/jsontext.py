"""Compact JSON encoding shared by the wire (protocol) and tool results (tools).

It sits below both layers so that tools can render their text content without importing the
protocol package.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# orjson writes compact UTF-8 JSON about 6x faster than the stdlib; for strings, integers,
# booleans, null, lists and dicts the bytes equal json.dumps(ensure_ascii=False, compact). What
# it refuses (integers beyond 64 bits, lone surrogates, non-string keys, and, by these options,
# datetimes and dataclasses) goes the stdlib way, which then decides exactly as it always did.
ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dump_text(value: Any) -> str:
    """Compact JSON text, for a tool result's text content."""
    try:
        return orjson.dumps(value, option=ORJSON_OPTIONS).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dump_bytes(message: Any) -> bytes:
    """Compact UTF-8. A lone surrogate (only reachable through a client's own `\\uD800`
    escape, e.g. in an id we echo) cannot be UTF-8 encoded; it is written back as that same
    JSON escape instead of crashing the transport."""
    try:
        return orjson.dumps(message, option=ORJSON_OPTIONS)
    except TypeError:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", "backslashreplace")
