"""`call --arg KEY=VALUE`: turn command-line text into a tool argument by the tool's own
`inputSchema`, never by how the text looks.

A string property keeps the text as it is (`title=2024` is the title "2024"); integer, number,
boolean and null properties are parsed strictly (JSON spelling: `42`, `-1.5e3`, `true`,
`null`), and arrays and objects must be written as JSON. A key the schema does not describe
(or describes without a type) stays a string, and the server's schema check has the last word.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_JSON_KINDS = {"array": list, "object": dict}
_A = {"integer": "an integer", "number": "a number", "boolean": "true or false", "null": "null"}


class ArgumentTypeError(ValueError):
    """An `--arg` value that cannot be what the tool's schema says; the message names it."""


def property_types(schema: Mapping[str, Any], key: str) -> list[str]:
    """The JSON types the tool's input schema allows for `key` (empty: not described)."""
    properties = schema.get("properties")
    prop = properties.get(key) if isinstance(properties, Mapping) else None
    if not isinstance(prop, Mapping):
        return []
    kind = prop.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def convert(key: str, text: str, types: list[str]) -> Any:
    """`text` as the first of `types` it can be; a string property takes it as it is."""
    if not types or "string" in types:
        return text
    for kind in types:
        try:
            return _parse(kind, text)
        except ArgumentTypeError:
            continue
    wanted = " or ".join(_describe(kind) for kind in types)
    raise ArgumentTypeError(f"{key} must be {wanted}, got {text!r}")


def _describe(kind: str) -> str:
    if kind in _JSON_KINDS:
        return f"a JSON {kind}"
    return _A.get(kind, kind)


def _parse(kind: str, text: str) -> Any:
    if kind == "integer" and _INTEGER.fullmatch(text):
        return int(text)
    if kind == "number" and _NUMBER.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return int(text) if _INTEGER.fullmatch(text) else value
    if kind == "boolean" and text in ("true", "false"):
        return text == "true"
    if kind == "null" and text == "null":
        return None
    if kind in _JSON_KINDS:
        try:
            value = json.loads(text)
        except ValueError:
            raise ArgumentTypeError(kind) from None
        if isinstance(value, _JSON_KINDS[kind]):
            return value
    raise ArgumentTypeError(kind)


def convert_arguments(pairs: Mapping[str, str], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Every `--arg` converted by `schema` (the tool's inputSchema)."""
    return {key: convert(key, text, property_types(schema, key)) for key, text in pairs.items()}
