"""Whether an edit leaves a body's links and tags as they were, without parsing either body.

Most edits of a note are nowhere near a link or a tag (a sentence added, a paragraph
reworded), and parsing a long body again costs far more than looking at what changed. The test
here is conservative: it answers True only when the parsers (`links.parse_links` with
`links.context_of`, `tags.body_tags`, over `code.mask_code`) must read the same from both
bodies, and False whenever it cannot tell (the caller then parses).

The changed span is what lies between the common head and the common tail of the two bodies.
It leaves every link and tag as it was when

- the lines it touches, in both bodies, hold none of ``[ ] ( ) ` ~ "`` and no ``#`` before a
  word character: no link, tag, code span or fence can start, end or sit on them (a wiki link
  and a link text never cross a line; a markdown link's title can follow its destination on a
  later line, after blank lines, which is why ``"`` does not qualify, nor a blank line whose
  last word before it holds a ``(``), so no match elsewhere reads differently;
- and no ``[ ] ( )`` lies within `links.CONTEXT` (+2) characters of it, in either body: every
  link's backlink context (the characters around it, and whether it reaches either end of the
  body) stays the same text.
"""

from __future__ import annotations

import re

from notes_server.markup.links import CONTEXT

# The unsafe characters are looked for one by one with `in` (`re` searching for a character
# class, or an alternation, costs ~10 ns a character: more than parsing a short body). A "#"
# followed by a word character could be a tag (one before a space, another "#" or the line's
# end starts none, wherever the text before it changes: a heading's "## " is safe).
_TAG_START = re.compile(r"#\w")
_MARGIN = CONTEXT + 2
_LOOK_BACK = 2048


def common_head(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (comparisons of halving
    chunks: about one pass over it, in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a.startswith(b[low:middle], low):
            low = middle
        else:
            high = middle - 1
    return low


def common_tail(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    low, high = 0, min(len(a), len(b), limit)
    end_a, end_b = len(a), len(b)
    while low < high:
        middle = (low + high + 1) // 2
        if a.endswith(b[end_b - middle : end_b - low], 0, end_a - low):
            low = middle
        else:
            high = middle - 1
    return low


def _line_unsafe(text: str) -> bool:
    return (
        "[" in text
        or "]" in text
        or "(" in text
        or ")" in text
        or "`" in text
        or "~" in text
        or '"' in text
        or ("#" in text and _TAG_START.search(text) is not None)
    )


def _near_unsafe(text: str) -> bool:
    return "[" in text or "]" in text or "(" in text or ")" in text


def _touched_lines_safe(text: str, start: int, end: int) -> bool:
    first = text.rfind("\n", 0, start) + 1
    last = text.find("\n", end)
    lines = text[first : len(text) if last < 0 else last]
    if _line_unsafe(lines):
        return False
    start = first
    for line in lines.split("\n"):
        if not line.strip() and _after_destination(text, start):
            return False
        start += len(line) + 1
    return True


def _after_destination(text: str, position: int) -> bool:
    """Whether the blank stretch at ``position`` could be the gap between a markdown link's
    destination and its title on a later line: the last word before it holds a "(" (or the
    stretch is too long to look back over)."""
    index = position - 1
    while index >= 0 and text[index].isspace():
        index -= 1
        if position - index > _LOOK_BACK:
            return True
    word_end = index + 1
    while index >= 0 and not text[index].isspace():
        index -= 1
        if word_end - index > _LOOK_BACK:
            return True
    return "(" in text[index + 1 : word_end]


def same_links_and_tags(old: str, new: str) -> bool:
    """True only if ``new`` has exactly the links (targets, order, contexts) and the body
    tags of ``old``; False when that cannot be told without parsing."""
    if old == new:
        return True
    head = common_head(old, new)
    tail = common_tail(old, new, min(len(old), len(new)) - head)
    old_end, new_end = len(old) - tail, len(new) - tail
    for text, end in ((old, old_end), (new, new_end)):
        if not _touched_lines_safe(text, head, end):
            return False
        near = text[max(0, head - _MARGIN) : end + _MARGIN]
        if _near_unsafe(near):
            return False
    return True
