"""The compiled schema checks (`tools.schema.validate`) give exactly the verdicts and messages of
the keyword-by-keyword reading they replaced (kept here as the reference), for every shipped
tool's input schema and the edit shapes, on generated arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notes_server.tools.edit import SECTION_EDIT, TEXT_EDIT
from notes_server.tools.registry import SHIPPED
from notes_server.tools.schema import _type_ok, validate
from notes_server.values import surrogate_problem


def _reference(value: Any, schema: dict[str, Any], where: str) -> str | None:
    expected = schema.get("type")
    if expected is not None and not _type_ok(value, expected):
        return f"{where} must be of type {expected}"
    if "const" in schema and value != schema["const"]:
        return f"{where} has an unexpected value"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of the allowed values"
    if "oneOf" in schema and not any(
        _reference(value, option, where) is None for option in schema["oneOf"]
    ):
        return f"{where} must be one of the allowed values"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} must be at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} must be at most {schema['maxLength']} characters"
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be >= {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be <= {schema['maximum']}"
        return None
    if isinstance(value, dict):
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
                problem = _reference(item, properties[name], f"{where}.{name}")
                if problem is not None:
                    return problem
    return None


SCHEMAS = [tool.input_schema for tool in SHIPPED] + [TEXT_EDIT, SECTION_EDIT]
_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=2_000_000)
    | st.floats(allow_nan=False, min_value=-3, max_value=3)
    | st.text(max_size=3)
    | st.sampled_from(["file:///home/alice/notes", "x" * 2100, "replace", "wiki", ""])
)
_value = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    names = [*sorted(schema.get("properties", {})), "unknown"]
    return st.dictionaries(st.sampled_from(names), _value, max_size=len(names))


@pytest.mark.parametrize(
    "schema", SCHEMAS, ids=lambda s: ",".join(sorted(s.get("properties", {})))[:40]
)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_compiled_check_says_what_the_keywords_say(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    arguments = data.draw(_arguments(schema))
    expected = _reference(arguments, schema, "arguments") or surrogate_problem(
        arguments, "arguments"
    )
    assert validate(arguments, schema) == expected


def test_a_missing_required_argument_and_a_bound_are_named() -> None:
    schema = SHIPPED[0].input_schema
    assert validate({}, schema) == _reference({}, schema, "arguments") is not None
    assert validate(
        {"noteId": 5}, {"type": "object", "properties": {"noteId": {"type": "string"}}}
    ) == ("arguments.noteId must be of type string")
    assert validate(0, {"type": "integer", "minimum": 1}, "x") == "x must be >= 1"
