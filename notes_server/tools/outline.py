"""The outline of a markdown note, and sections addressed by heading path.

Headings are ATX headings (`#` to `######`, at most three spaces of indentation, then a space,
a tab or the end of the line; an optional closing run of `#` is dropped), never inside fenced
code (``` or ~~~, closed by a fence of the same character at least as long; an unclosed fence
runs to the end). Setext headings (underlined with `===`) are not sections.

A heading's section runs from the start of its line to the next heading of the same or a
higher level (a smaller number), or to the end of the note: subsections are part of it.

Addresses: the heading texts from the top down, joined with `/`: `Plan/Risks` is the heading
"Risks" whose nearest enclosing heading is "Plan", itself at the top (no enclosing heading).
Among siblings with the same text, `Risks#2` is the second one (`Risks` and `Risks#1` the first).
In a text, `\\/`, `\\#` and `\\\\` stand for a literal `/`, `#` and backslash. Every outline
entry carries the exact address that selects it, so a client never has to build one.

Offsets and lengths count Unicode code points (Python string indices), like `offset`/`limit`.
A hand-written scanner rather than a markdown library: it finds the candidate lines with one
regular expression pass, which keeps a section edit of a 100 KB note within milliseconds.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Lines that may open a heading or a fence, found in "\n" + body: a pattern that starts with
# a literal newline is searched for in C, where `^` with MULTILINE tries every position.
_CANDIDATE = re.compile(r"\n {0,3}(?:#{1,6}(?=[ \t\r\n]|\Z)|`{3,}|~{3,})")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_ESCAPED = re.compile(r"\\(.)")


class Heading(NamedTuple):
    level: int
    text: str
    # Where the heading line starts, and how long its whole section is.
    offset: int
    length: int
    # Where the section's content starts (after the heading line and its newline).
    content_offset: int
    address: str

    @property
    def end(self) -> int:
        return self.offset + self.length

    def as_json(self) -> dict[str, object]:
        return {
            "level": self.level,
            "text": self.text,
            "offset": self.offset,
            "length": self.length,
            "address": self.address,
        }


class _Raw(NamedTuple):
    level: int
    text: str
    offset: int
    content_offset: int


def _line_end(body: str, start: int) -> int:
    end = body.find("\n", start)
    return len(body) if end < 0 else end


def _scan(body: str) -> list[_Raw]:
    found: list[_Raw] = []
    fence: tuple[str, int] | None = None
    for match in _CANDIDATE.finditer("\n" + body):
        start = match.start()  # in the body: where the line starts (after the newline)
        marker = match.group(0)[1:].lstrip(" ")
        end = _line_end(body, start)
        rest = body[match.end() - 1 : end]
        if fence is not None:
            char, size = fence
            if marker[0] == char and len(marker) >= size and not rest.strip():
                fence = None
            continue
        if marker[0] in "`~":
            if marker[0] == "`" and "`" in rest:
                continue  # not a fence: a backtick fence's info string has no backtick
            fence = (marker[0], len(marker))
            continue
        text = " ".join(_CLOSING_HASHES.sub("", rest.strip(" \t\r"), count=1).split())
        found.append(_Raw(len(marker), text, start, min(end + 1, len(body))))
    return found


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("/", "\\/").replace("#", "\\#")


def outline(body: str) -> list[Heading]:
    """Every heading of the body in order, with its section's extent and its address."""
    if "#" not in body:
        return []
    raw = _scan(body)
    headings: list[Heading] = []
    # The chain of open headings (index into raw), and per parent the count of each text.
    chain: list[int] = []
    seen: dict[tuple[int, str], int] = {}
    addresses: list[str] = []
    for i, item in enumerate(raw):
        while chain and raw[chain[-1]].level >= item.level:
            chain.pop()
        parent = chain[-1] if chain else -1
        n = seen[(parent, item.text)] = seen.get((parent, item.text), 0) + 1
        own = _escape(item.text) + ("" if n == 1 else f"#{n}")
        addresses.append(own if parent < 0 else f"{addresses[parent]}/{own}")
        chain.append(i)
    for i, item in enumerate(raw):
        end = len(body)
        for later in raw[i + 1 :]:
            if later.level <= item.level:
                end = later.offset
                break
        headings.append(
            Heading(
                item.level,
                item.text,
                item.offset,
                end - item.offset,
                item.content_offset,
                addresses[i],
            )
        )
    return headings


class BadAddress(ValueError):
    """A section address that cannot be read (an empty part, a bad `#n`)."""


def _parts(address: str) -> list[tuple[str, int]]:
    """`a\\/b/c#2` -> [("a/b", 1), ("c", 2)]."""
    parts: list[tuple[str, int]] = []
    current: list[str] = []
    index: str | None = None
    i = 0
    while i <= len(address):
        ch = address[i] if i < len(address) else "/"
        if ch == "\\" and i + 1 < len(address):
            (current if index is None else []).append(address[i + 1])
            i += 2
            continue
        if ch == "/":
            text = " ".join("".join(current).split())
            if not text:
                raise BadAddress("a part of the section address is empty")
            n = 1
            if index is not None:
                if not index.isdigit() or int(index) < 1:
                    raise BadAddress(f"`#{index}` must be a number from 1")
                n = int(index)
            parts.append((text, n))
            current, index = [], None
        elif ch == "#" and index is None:
            index = ""
        elif index is not None:
            index += ch
        else:
            current.append(ch)
        i += 1
    return parts


def canonical(address: str) -> str:
    """The one spelling of an address (`Risks#1` is `Risks`), for comparing two of them."""
    return "/".join(_escape(text) + ("" if n == 1 else f"#{n}") for text, n in _parts(address))


def find_section(headings: list[Heading], address: str) -> Heading | None:
    """The heading an address selects, or None. BadAddress if it cannot be read."""
    wanted = canonical(address)
    for heading in headings:
        if heading.address == wanted:
            return heading
    return None


def line_of(body: str, offset: int) -> int:
    """The 1-based line number of a character offset."""
    return body.count("\n", 0, offset) + 1
