"""A small validator for the JSON Schema subset our tool and form schemas use.

Tool arguments that violate the declared schema are a protocol error (-32602); this keeps that
check exact without a general JSON Schema dependency on the hot path.
"""

from __future__ import annotations

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


def validate(value: Any, schema: dict[str, Any], where: str = "arguments") -> str | None:
    """Return None if `value` satisfies `schema`, else one sentence naming the first problem.

    Every string, declared or not, must also be storable: a lone surrogate (from a `\\uD800`
    escape) has no UTF-8 form, so the database and the encoder would fail on it later."""
    return _validate(value, schema, where) or surrogate_problem(value, where)


def _validate(value: Any, schema: dict[str, Any], where: str) -> str | None:
    expected = schema.get("type")
    if expected is not None and not _type_ok(value, expected):
        return f"{where} must be of type {expected}"
    if "const" in schema and value != schema["const"]:
        return f"{where} has an unexpected value"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of the allowed values"
    if "oneOf" in schema and not any(
        _validate(value, option, where) is None for option in schema["oneOf"]
    ):
        return f"{where} must be one of the allowed values"
    if isinstance(value, str):
        return _validate_string(value, schema, where)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _validate_number(value, schema, where)
    if isinstance(value, dict):
        return _validate_object(value, schema, where)
    return None


def _validate_string(value: str, schema: dict[str, Any], where: str) -> str | None:
    if len(value) < schema.get("minLength", 0):
        return f"{where} must be at least {schema['minLength']} characters"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return f"{where} must be at most {schema['maxLength']} characters"
    return None


def _validate_number(value: float, schema: dict[str, Any], where: str) -> str | None:
    if "minimum" in schema and value < schema["minimum"]:
        return f"{where} must be >= {schema['minimum']}"
    if "maximum" in schema and value > schema["maximum"]:
        return f"{where} must be <= {schema['maximum']}"
    return None


def _validate_object(value: dict[str, Any], schema: dict[str, Any], where: str) -> str | None:
    properties: dict[str, Any] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            return f"{where}.{name} is required"
    if schema.get("additionalProperties") is False:
        for name in value:
            if name not in properties:
                return f"{where}.{name} is not an accepted property"
    for name, item in value.items():
        if name in properties:
            problem = _validate(item, properties[name], f"{where}.{name}")
            if problem is not None:
                return problem
    return None
