"""Front matter: the simple ``key: value`` subset of YAML between ``---`` lines.

Deliberately small (no YAML library): known keys (id, title, created, updated) are read as
scalars; every other line is kept verbatim, in order, and written back on export, so nested
YAML an editor put there survives a round trip without being interpreted. Anything that is not
this subset is refused with a reason instead of being guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime

KNOWN = ("id", "title", "created", "updated")
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*))?$")
MAX_LINES = 1000


class FrontMatterError(ValueError):
    """The file starts a front matter block that is not the supported subset."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """A note file split into its known keys, the other front matter lines and the body."""

    known: dict[str, str]
    extra: str
    body: str


def split(text: str) -> Parsed:
    """Split ``text``; a file without a leading ``---`` line has no front matter."""
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return Parsed({}, "", text)
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip("\r\n") in ("---", "..."):
            known, extra = _parse_block(lines[1:index])
            return Parsed(known, extra, "".join(lines[index + 1 :]))
        if index > MAX_LINES:
            break
    raise FrontMatterError("front matter has no closing '---' line")


def _parse_block(lines: list[str]) -> tuple[dict[str, str], str]:
    known: dict[str, str] = {}
    extra: list[str] = []
    owner = ""
    for number, raw in enumerate(lines, start=2):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            extra.append(line + "\n")
            continue
        if line[0] in " \t-":
            if owner in KNOWN or not owner:
                raise FrontMatterError(f"line {number}: nested value where none is allowed")
            extra.append(line + "\n")
            continue
        match = _KEY_LINE.match(line)
        if match is None:
            raise FrontMatterError(f"line {number}: expected 'key: value'")
        owner = match.group(1)
        if owner in KNOWN:
            if owner in known:
                raise FrontMatterError(f"line {number}: {owner!r} given twice")
            known[owner] = _scalar(match.group(2) or "", number)
        else:
            extra.append(line + "\n")
    return known, "".join(extra)


def _scalar(value: str, number: int) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] == "'":
            return inner.replace("''", "'")
        return _unescape(inner, number)
    if value[:1] in ("'", '"', "[", "{", "|", ">", "&", "*", "!"):
        raise FrontMatterError(f"line {number}: unsupported YAML value {value[:20]!r}")
    return re.sub(r"\s+#.*$", "", value)


def _unescape(inner: str, number: int) -> str:
    out: list[str] = []
    chars = iter(inner)
    for ch in chars:
        if ch != "\\":
            out.append(ch)
            continue
        nxt = next(chars, "")
        mapped = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "/": "/"}.get(nxt)
        if mapped is None:
            raise FrontMatterError(f"line {number}: unsupported escape '\\{nxt}'")
        out.append(mapped)
    return "".join(out)


def parse_time(value: str, key: str) -> datetime:
    """An ISO 8601 date or date-time as aware UTC (what the store keeps); no zone means UTC."""
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise FrontMatterError(f"{key!r} is not an ISO 8601 date or time: {value!r}") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_time(moment: datetime) -> str:
    """UTC as ISO 8601 with ``Z`` (a naive value is taken as UTC); parse_time reads it back to
    the same value."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None).isoformat() + "Z"


def quote(value: str) -> str:
    """A scalar that _scalar reads back exactly: double-quoted with the supported escapes."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\t", "\\t") + '"'


def render(note_id: str, title: str, created: datetime, updated: datetime, extra: str) -> str:
    """The front matter block export writes (ending with the closing ``---`` line)."""
    head = (
        f"---\nid: {note_id}\ntitle: {quote(title)}\n"
        f"created: {format_time(created)}\nupdated: {format_time(updated)}\n"
    )
    return head + extra + "---\n"
