"""Answer a form elicitation: from scripted `--answer` values, or by asking in the terminal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Prompt = Callable[[str], str]


class AnswerError(ValueError):
    """A scripted or typed answer that does not fit the form."""


def choices(prop: dict[str, Any]) -> list[tuple[str, str]]:
    """(value, label) pairs of a single-select enum, titled or untitled."""
    if "oneOf" in prop:
        return [(c["const"], c.get("title", c["const"])) for c in prop["oneOf"]]
    return [(v, v) for v in prop.get("enum", [])]


def coerce(name: str, prop: dict[str, Any], raw: str) -> Any:
    """Turn text into the property's type; enums accept the value or its 1-based number."""
    options = choices(prop)
    if options:
        values = [value for value, _ in options]
        if raw in values:
            return raw
        if raw.isascii() and raw.isdigit() and len(raw) < 10 and 1 <= int(raw) <= len(values):
            return values[int(raw) - 1]
        raise AnswerError(f"{name}: choose 1-{len(values)} or one of the listed values")
    kind = prop.get("type")
    if kind == "boolean":
        lowered = raw.strip().lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise AnswerError(f"{name}: answer y or n")
    if kind in ("integer", "number"):
        try:
            return int(raw) if kind == "integer" else float(raw)
        except ValueError:
            raise AnswerError(f"{name}: expected a number") from None
    return raw


def _yes_no_last(properties: dict[str, Any]) -> list[tuple[str, Any]]:
    """Fields in form order, except that yes/no questions come after everything else: a
    confirmation is asked about what was already chosen, never before it."""
    return sorted(properties.items(), key=lambda item: item[1].get("type") == "boolean")


def fill_form(
    schema: dict[str, Any],
    scripted: Mapping[str, str],
    prompt: Prompt | None,
    show: Callable[[str], None],
) -> dict[str, Any]:
    """Build `content` for an accepted form; ask for what was not scripted, if we may."""
    content: dict[str, Any] = {}
    for name, prop in _yes_no_last(schema.get("properties", {})):
        label = prop.get("title", name)
        if name in scripted:
            content[name] = coerce(name, prop, scripted[name])
            continue
        if prompt is None:
            if name in schema.get("required", []):
                raise AnswerError(f"no answer for {name!r}: pass --answer {name}=VALUE")
            continue
        for number, (_, text) in enumerate(choices(prop), start=1):
            show(f"  {number}. {text}")
        suffix = " [y/n]" if prop.get("type") == "boolean" else ""
        while True:
            try:
                content[name] = coerce(name, prop, prompt(f"{label}{suffix}"))
                break
            except AnswerError as exc:
                show(str(exc))
    return content
