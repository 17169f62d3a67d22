"""The front matter keys a note keeps beyond id/title/created/updated (its "extra" lines,
stored verbatim): read as properties, and changed key by key without touching the others.

The lines form blocks: a top-level ``key:`` line and the indented or ``- item`` lines (and
comments, blank lines) under it. A block's value is read as a small YAML subset: a scalar
(quoted string, number, true/false, null, plain text), a flow list ``[a, b]`` or a block list
of ``- item`` scalars. A block that is none of these (a nested map, say) is not a property
anyone can read here; it stays in the file exactly as it was unless it is set or removed.
``tags`` is read by `front_matter_tags` (a list, or the comma form ``tags: a, b``).
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from notes_server.markup.tags import clean_tag, unique

RESERVED = frozenset({"id", "title", "created", "updated", "tags"})
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*?))?[ \t]*$")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LINE_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9 _./@+-]*")

Value = str | int | float | bool | None | list[Any]


class Block(NamedTuple):
    """One top-level key (None for leading comments) with its inline value and all its lines."""

    key: str | None
    inline: str
    lines: list[str]


class Unreadable(Exception):
    """The block's value is outside the subset read here."""


def blocks(extra: str) -> list[Block]:
    """``extra`` split into blocks, in order; joining their lines gives ``extra`` back."""
    found: list[Block] = []
    for line in extra.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        match = _KEY_LINE.match(bare) if bare[:1] not in (" ", "\t", "-", "#", "") else None
        if match is not None:
            found.append(Block(match.group(1), match.group(2) or "", [line]))
        elif found:
            found[-1].lines.append(line)
        else:
            found.append(Block(None, "", [line]))
    return found


def read_value(block: Block) -> Value:
    """The block's value; Unreadable if it is outside the subset."""
    inline = _strip_comment(block.inline)
    items = [
        line.strip()
        for line in block.lines[1:]
        if line.strip() and not line.strip().startswith("#")
    ]
    if inline:
        if items:
            raise Unreadable
        if inline.startswith("[") and inline.endswith("]"):
            inner = inline[1:-1].strip()
            return [_scalar(part.strip()) for part in inner.split(",")] if inner else []
        return _scalar(inline)
    if not items:
        return None
    if all(item.startswith("- ") or item == "-" for item in items):
        return [_scalar(item[1:].strip()) for item in items]
    raise Unreadable


def _strip_comment(value: str) -> str:
    if value[:1] in ("'", '"'):
        return value.strip()
    return re.sub(r"(^|\s+)#.*$", "", value).strip()


def _scalar(text: str) -> Value:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            decoded = json.loads(text)
        except ValueError:
            raise Unreadable from None
        if not isinstance(decoded, str):
            raise Unreadable
        return decoded
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if text[:1] in ("'", '"', "[", "{", "|", ">", "&", "*", "!", "%", "@", "`"):
        raise Unreadable
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _NUMBER.fullmatch(text):
        number = float(text)
        return int(text) if number.is_integer() and re.fullmatch(r"-?[0-9]+", text) else number
    return text


def properties(extra: str) -> dict[str, Value]:
    """The readable properties (every key but the reserved ones), in order."""
    found: dict[str, Value] = {}
    for block in blocks(extra):
        if block.key is None or block.key in RESERVED or block.key in found:
            continue
        try:
            found[block.key] = read_value(block)
        except Unreadable:
            continue
    return found


def front_matter_tags(extra: str) -> list[str]:
    """The tags a ``tags:`` key gives: a list, a flow list or the comma form."""
    for block in blocks(extra):
        if block.key != "tags":
            continue
        try:
            value = read_value(block)
        except Unreadable:
            return []
        if isinstance(value, str):
            value = [part for part in value.split(",")]
        if not isinstance(value, list):
            return []
        cleaned = (clean_tag(str(item)) for item in value if isinstance(item, str | int))
        return unique(tag for tag in cleaned if tag is not None)
    return []


def render_value(key: str, value: Value) -> str:
    """A block that `read_value` reads back as ``value``."""
    if isinstance(value, list):
        if not value:
            return f"{key}: []\n"
        return f"{key}:\n" + "".join(f"  - {_render_scalar(item)}\n" for item in value)
    return f"{key}: {_render_scalar(value)}\n"


def _render_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if _PLAIN_SAFE.fullmatch(text) and _scalar(text) == text and not text.endswith(" "):
        return text
    # Escaped: every character str.splitlines() breaks at, so the value stays on its line.
    return _LINE_BREAKS.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False)
    )


class _Remove:
    """The value of a key to remove, in `with_changes`."""


REMOVE: Any = _Remove()


def with_changes(extra: str, changes: dict[str, Any]) -> str:
    """``extra`` with each key of ``changes`` set (in place, or appended) or, for REMOVE,
    removed; every other line stays as it was."""
    remaining = dict(changes)
    out: list[str] = []
    for block in blocks(extra):
        if block.key is not None and block.key in remaining:
            value = remaining.pop(block.key)
            if value is not REMOVE:
                out.append(render_value(block.key, value))
            continue
        out.extend(block.lines)
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
    for key, value in remaining.items():
        if value is not REMOVE:
            out.append(render_value(key, value))
    return "".join(out)
