"""A small validator for the JSON Schema subset our tool and form schemas use.

Tool arguments that violate the declared schema are a protocol error (-32602); this keeps that
check exact without a general JSON Schema dependency on the hot path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from notes_server.values import surrogate_problem

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
}


def _type_ok(value: Any, expected: str) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[expected])


# A schema compiled to a check: (value, where) -> the first problem, or None.
Check = Callable[[Any, str], "str | None"]
MAX_COMPILED = 256
# id(schema) -> (the schema, its check). The schema is kept, so its id cannot be reused while
# its entry lives; the bound keeps schemas built per call (none today) from growing it.
_COMPILED: dict[int, tuple[dict[str, Any], Check]] = {}
_COMPILED_LOCK = threading.Lock()


def validate(value: Any, schema: dict[str, Any], where: str = "arguments") -> str | None:
    """Return None if `value` satisfies `schema`, else one sentence naming the first problem.

    Every string, declared or not, must also be storable: a lone surrogate (from a `\\uD800`
    escape) has no UTF-8 form, so the database and the encoder would fail on it later.

    Schemas are constants (a tool's input, an edit's shape), so each is compiled once into
    nested closures that hold its keywords: a call looks no keyword up in the schema's dicts.
    A schema must not change once used here."""
    return _compiled(schema)(value, where) or surrogate_problem(value, where)


def _compiled(schema: dict[str, Any]) -> Check:
    entry = _COMPILED.get(id(schema))  # one dict read: atomic
    if entry is not None and entry[0] is schema:
        return entry[1]
    check = _compile(schema)
    with _COMPILED_LOCK:
        if len(_COMPILED) >= MAX_COMPILED:
            _COMPILED.clear()
        _COMPILED[id(schema)] = (schema, check)
    return check


def _compile(schema: dict[str, Any]) -> Check:
    """The check of one schema, in the order the subset is defined: type, const, enum, oneOf,
    then the keywords of the value's own kind (string lengths, number bounds, members)."""
    expected = schema.get("type")
    has_const, const = "const" in schema, schema.get("const")
    has_enum, allowed = "enum" in schema, schema.get("enum")
    options = [_compile(option) for option in schema["oneOf"]] if "oneOf" in schema else None
    text = _string_check(schema)
    number = _number_check(schema)
    members = _object_check(schema)

    def check(value: Any, where: str) -> str | None:
        if expected is not None and not _type_ok(value, expected):
            return f"{where} must be of type {expected}"
        if has_const and value != const:
            return f"{where} has an unexpected value"
        if has_enum and value not in allowed:  # type: ignore[operator]
            return f"{where} must be one of the allowed values"
        if options is not None and not any(option(value, where) is None for option in options):
            return f"{where} must be one of the allowed values"
        if isinstance(value, str):
            return text(value, where)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return number(value, where)
        if isinstance(value, dict):
            return members(value, where)
        return None

    return check


def _string_check(schema: dict[str, Any]) -> Callable[[str, str], str | None]:
    shortest = schema.get("minLength", 0)
    longest = schema.get("maxLength")

    def check(value: str, where: str) -> str | None:
        if len(value) < shortest:
            return f"{where} must be at least {shortest} characters"
        if longest is not None and len(value) > longest:
            return f"{where} must be at most {longest} characters"
        return None

    return check


def _number_check(schema: dict[str, Any]) -> Callable[[float, str], str | None]:
    has_minimum, minimum = "minimum" in schema, schema.get("minimum")
    has_maximum, maximum = "maximum" in schema, schema.get("maximum")

    def check(value: float, where: str) -> str | None:
        if has_minimum and value < minimum:  # type: ignore[operator]
            return f"{where} must be >= {minimum}"
        if has_maximum and value > maximum:  # type: ignore[operator]
            return f"{where} must be <= {maximum}"
        return None

    return check


def _object_check(schema: dict[str, Any]) -> Callable[[dict[str, Any], str], str | None]:
    properties: dict[str, Check] = {
        name: _compile(item) for name, item in schema.get("properties", {}).items()
    }
    required = tuple(schema.get("required", ()))
    closed = schema.get("additionalProperties") is False

    def check(value: dict[str, Any], where: str) -> str | None:
        for name in required:
            if name not in value:
                return f"{where}.{name} is required"
        if closed:
            for name in value:
                if name not in properties:
                    return f"{where}.{name} is not an accepted property"
        for name, item in value.items():
            member = properties.get(name)
            if member is not None:
                problem = member(item, f"{where}.{name}")
                if problem is not None:
                    return problem
        return None

    return check
