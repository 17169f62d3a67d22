"""Section reads and precise edits of a note body: what notes_read and notes_edit do to the
text, kept apart from the tools so that it (and difflib) loads on first use, not at start."""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple

from notes_server.errors import ToolFailure
from notes_server.tools.outline import BadAddress, Heading, find_section, line_of, outline
from notes_server.tools.titles import argument_error


class TextEdit(NamedTuple):
    old: str
    new: str


class SectionEdit(NamedTuple):
    section: str
    action: str
    text: str


Edit = TextEdit | SectionEdit


def headings_listed(headings: list[Heading]) -> str:
    if not headings:
        return "The note has no headings."
    shown = ", ".join(repr(h.address) for h in headings[:50])
    more = "" if len(headings) <= 50 else f" and {len(headings) - 50} more"
    return f"Its headings: {shown}{more}."


def select_section(tool: str, body: str, headings: list[Heading], address: str) -> Heading:
    """The section an address names; -32602 for an unreadable address, isError (listing the
    headings) for one the note does not have."""
    try:
        found = find_section(headings, address)
    except BadAddress as exc:
        raise argument_error(tool, "section", f"is not a section address: {exc}") from None
    if found is None:
        raise ToolFailure(
            f"No section {address!r} in this note. {headings_listed(headings)}",
            {"headings": [h.as_json() for h in headings]},
        )
    return found


def occurrences(body: str, text: str, cap: int = 1000) -> list[int]:
    """Start offsets of every (possibly overlapping) occurrence, at most `cap`."""
    found: list[int] = []
    at = body.find(text)
    while at >= 0 and len(found) < cap:
        found.append(at)
        at = body.find(text, at + 1)
    return found


def _block(body: str, at: int, end: int, text: str) -> str:
    """body[:at] + text + body[end:], the text on lines of its own."""
    if not text:
        return body[:at] + body[end:]
    if at > 0 and body[at - 1] != "\n":
        text = "\n" + text
    # A line of its own before what follows; at the end, as the note ended (newline or not).
    if not text.endswith("\n") and (end < len(body) or body.endswith("\n")):
        text += "\n"
    return body[:at] + text + body[end:]


def apply_section(body: str, heading: Heading, action: str, text: str) -> str:
    if action == "replace":
        return _block(body, heading.content_offset, heading.end, text)
    if action == "prepend":
        return _block(body, heading.content_offset, heading.content_offset, text)
    # append: after the section's last non-blank line, before its trailing blank lines
    content = body[heading.content_offset : heading.end]
    at = heading.content_offset + len(content.rstrip())
    if at < heading.end and body[at] == "\n":
        at += 1
    return _block(body, at, at, text)


def apply_edits(
    tool: str, body: str, edits: list[Edit], base: str | None, versions: tuple[int, int]
) -> str:
    """The body after every edit, in order; `base` (the body at expectedVersion, when others
    wrote since) must agree with `body` on every section edited."""
    for number, edit in enumerate(edits, start=1):
        if isinstance(edit, TextEdit):
            body = _apply_text(body, edit, number)
            continue
        headings = outline(body)
        heading = select_section(tool, body, headings, edit.section)
        if base is not None:
            _check_unchanged(base, body, heading, edit.section, versions)
        body = apply_section(body, heading, edit.action, edit.text)
    return body


def _apply_text(body: str, edit: TextEdit, number: int) -> str:
    found = occurrences(body, edit.old)
    if len(found) != 1:
        lines = sorted({line_of(body, at) for at in found})
        where = "" if not lines else " (lines " + ", ".join(map(str, lines[:50])) + ")"
        raise ToolFailure(
            f"Edit {number}: oldText occurs {len(found)} times{where}; it must occur exactly "
            "once. Nothing was changed: "
            + (
                "read the note again and copy the text exactly."
                if not found
                else "include more of the surrounding text to make it unique."
            ),
            {"edit": number, "occurrences": len(found), "lines": lines},
        )
    at = found[0]
    return body[:at] + edit.new + body[at + len(edit.old) :]


def _check_unchanged(
    base: str, body: str, heading: Heading, section: str, versions: tuple[int, int]
) -> None:
    expected, current = versions
    before = next((h for h in outline(base) if h.address == heading.address), None)
    if before is None or base[before.offset : before.end] != body[heading.offset : heading.end]:
        raise ToolFailure(
            f"Edit conflict: section {section!r} changed after version {expected} (the note "
            f"is at version {current}). Nothing was changed: read it again and retry with "
            f"expectedVersion {current}.",
            {"conflict": section, "currentVersion": current},
        )


def unified_diff(path: str, old: str, new: str, versions: tuple[int, int]) -> str:
    """difflib's unified diff, run only on the lines between the common head and tail (plus
    the context lines): one section changed in a 100 KB note costs what that section costs."""
    before = old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    shortest = min(len(before), len(after))
    head = 0
    while head < shortest and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < shortest - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    skip = max(0, head - CONTEXT)
    keep_tail = max(0, tail - CONTEXT)
    lines = list(
        difflib.unified_diff(
            before[skip : len(before) - keep_tail],
            after[skip : len(after) - keep_tail],
            fromfile=f"a/{path}@{versions[0]}",
            tofile=f"b/{path}@{versions[1]}",
            n=CONTEXT,
        )
    )
    if skip:
        lines = [_HUNK.sub(lambda m: _shifted(m, skip), line, count=1) for line in lines]
    return "".join(lines)


CONTEXT = 3
_HUNK = re.compile(r"^@@ -(\d+)((?:,\d+)?) \+(\d+)((?:,\d+)?) @@")


def _shifted(match: re.Match[str], by: int) -> str:
    old_start, old_len, new_start, new_len = match.groups()
    return f"@@ -{int(old_start) + by}{old_len} +{int(new_start) + by}{new_len} @@"
