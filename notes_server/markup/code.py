"""Where a markdown body has code: fenced blocks and inline code spans, masked out.

Links and tags are never read inside code. Rather than teach every reader about code, they all
read a masked copy of the body: every character inside code replaced by a space (line breaks
kept), so offsets in the copy are offsets in the original.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

# A fence opens a line (at most three spaces in): three or more backticks or tildes.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")


@lru_cache(maxsize=4)
def mask_code(text: str) -> str:
    """``text`` with fenced code blocks and inline code spans blanked (same length). Cached:
    one write reads the same body for links and for tags (looking for code is two scans)."""
    if "`" not in text and "~~~" not in text:
        return text  # no code at all: most notes
    return _masked(text)


def _masked(text: str) -> str:
    chars = list(text)
    _blank_fences(text, chars)
    _blank_spans("".join(chars), chars)
    return "".join(chars)


def _blank(chars: list[str], start: int, end: int) -> None:
    for index in range(start, end):
        if chars[index] != "\n":
            chars[index] = " "


def _blank_fences(text: str, chars: list[str]) -> None:
    """A fence runs to a closing line of the same character, at least as long, with nothing
    after it but spaces; an unclosed fence runs to the end (as CommonMark says)."""
    position = 0
    while (opening := _FENCE.search(text, position)) is not None:
        marker = opening.group(1)
        if marker[0] == "`" and "`" in text[opening.end() : _line_end(text, opening.end())]:
            position = _line_end(text, opening.end())  # a backtick info string: not a fence
            continue
        closing = re.compile(
            rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$", re.MULTILINE
        )
        found = closing.search(text, _line_end(text, opening.end()))
        end = len(text) if found is None else found.end()
        _blank(chars, opening.start(), end)
        position = end


def _line_end(text: str, position: int) -> int:
    newline = text.find("\n", position)
    return len(text) if newline < 0 else newline


def _blank_spans(text: str, chars: list[str]) -> None:
    """A run of n backticks opens a span closed by the next run of exactly n; a run without
    a closer is literal text."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    by_width: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_width.setdefault(end - start, []).append(index)
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = by_width[end - start]
        after = bisect_right(same, index)
        if after == len(same):
            index += 1
            continue
        closer = same[after]
        _blank(chars, start, runs[closer][1])
        index = closer + 1
