"""Links in a note body: ``[[Target]]`` (with ``#Heading`` and ``|shown text``) and markdown
links to ``.md`` files, never inside code; where each one's target text sits, so a rename can
rewrite it in place.

A wiki target is a workspace-relative path or a title (the store tries the path first); a
markdown target is a path relative to the linking note's folder, percent-decoded.
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

from notes_server.markup.code import mask_code

WIKI = "wiki"
MARKDOWN = "markdown"
MAX_TARGET = 1024
CONTEXT = 60  # characters of context on each side of a backlink
MAX_CONTEXT = 400  # a backlink's context at most (a link's own text can be long)

_WIKI = re.compile(r"\[\[([^\[\]\n|#]*)(?:#([^\[\]\n|]*))?(?:\|([^\[\]\n]*))?\]\]")
# [text](destination "optional title"); an image (a leading "!", checked by the caller: a
# lookbehind here would cost the search its literal prefix) is not a link to a note.
_MARKDOWN = re.compile(r"\[([^\[\]\n]*)\]\(([^()\s]+)((?:\s+\"[^\"\n]*\")?)\)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# What a rewritten wiki target may not contain, or the link would read differently.
_WIKI_UNSAFE = re.compile(r"[\[\]|#\n]")


class Link(NamedTuple):
    """One link: its kind, its target as written (a markdown target decoded), the heading
    after ``#`` (or None), the shown text (or None), and spans: the whole link, and the
    target text as it sits in the body (what a rewrite replaces)."""

    kind: str
    target: str
    heading: str | None
    label: str | None
    start: int
    end: int
    target_start: int
    target_end: int


def parse_links(body: str) -> list[Link]:
    """Every link of ``body`` outside code, in order of appearance."""
    if "[" not in body:
        return []
    masked = mask_code(body)
    # Without code the masked copy is the body itself: a match's groups are its text (else
    # the text is cut from the body, where code inside a link reads as written).
    plain = masked is body
    found: list[Link] = []
    if "[[" in masked:
        for match, raw, target in _wiki_matches(body, masked):
            start = match.start(1)
            if raw[0].isspace():
                start += len(raw) - len(raw.lstrip())
            heading = match.group(2)
            if heading is not None:
                text = heading if plain else body[match.start(2) : match.end(2)]
                heading = text.strip() or None
            label = match.group(3)
            if label is not None:
                text = label if plain else body[match.start(3) : match.end(3)]
                label = text.strip() or None
            found.append(
                Link(
                    WIKI,
                    target,
                    heading,
                    label,
                    match.start(),
                    match.end(),
                    start,
                    start + len(target),
                )
            )
    if "](" in masked:
        wiki = len(found)
        for match, destination, (path, heading) in _markdown_matches(body, masked):
            found.append(
                Link(
                    MARKDOWN,
                    path,
                    heading,
                    body[match.start(1) : match.end(1)],
                    match.start(),
                    match.end(),
                    match.start(2),
                    match.start(2) + len(destination.split("#", 1)[0]),
                )
            )
        if wiki and len(found) > wiki:
            found.sort(key=_start)
    return found


def _wiki_matches(body: str, masked: str) -> Iterator[tuple[re.Match[str], str, str]]:
    """The wiki links a body has outside code (``masked``: `mask_code` of it), in order: each
    one's match, raw target text and target. `parse_links` and `context_at` both see these."""
    plain = masked is body
    for match in _WIKI.finditer(masked):
        raw = match.group(1) if plain else body[match.start(1) : match.end(1)]
        target = raw.strip()
        if target and len(target) <= MAX_TARGET:  # [[#Heading]] points into the note itself
            yield match, raw, target


def _markdown_matches(
    body: str, masked: str
) -> Iterator[tuple[re.Match[str], str, tuple[str, str | None]]]:
    """The markdown links to notes a body has outside code, in order: each one's match,
    destination text and (path, heading). Images and links to anything else are not links."""
    for match in _MARKDOWN.finditer(masked):
        if match.start() > 0 and masked[match.start() - 1] == "!":
            continue
        destination = body[match.start(2) : match.end(2)]
        parsed = _markdown_target(destination)
        if parsed is not None:
            yield match, destination, parsed


def _start(link: Link) -> int:
    return link.start


def _markdown_target(destination: str) -> tuple[str, str | None] | None:
    """(decoded path, heading) of a destination naming a ``.md`` file, else None (a URL, an
    anchor in this note, another kind of file)."""
    if _SCHEME.match(destination) or destination.startswith(("#", "//")):
        return None
    path, _, fragment = destination.partition("#")
    path = unquote(path)
    if not path.lower().endswith(".md") or len(path) > MAX_TARGET:
        return None
    heading = unquote(fragment).strip() or None
    return path, heading


def resolve_relative(source_path: str, target: str) -> str | None:
    """A markdown link's target as a workspace path, from the linking note's path: relative
    to its folder, or to the workspace with a leading ``/``; None if it climbs out."""
    base = [] if target.startswith("/") else source_path.split("/")[:-1]
    parts = list(base)
    for segment in target.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(segment)
    if not parts:
        return None
    return unicodedata.normalize("NFC", "/".join(parts))


def relative_path(source_path: str, target_path: str) -> str:
    """The relative path from the folder of ``source_path`` to ``target_path`` (both
    workspace paths), as a markdown link would write it (percent-encoded where needed)."""
    source = source_path.split("/")[:-1]
    target = target_path.split("/")
    common = 0
    while common < len(source) and common < len(target) - 1 and source[common] == target[common]:
        common += 1
    parts = [".."] * (len(source) - common) + target[common:]
    return quote("/".join(parts), safe="/-_.~!$&'*+,;=:@")


def wiki_target_for(title: str, path: str) -> str | None:
    """What a ``[[...]]`` rewritten to point at a note should say: its title, or its path
    when the title has a character a wiki link cannot hold, else None (left as it is)."""
    for candidate in (title, path):
        if candidate and not _WIKI_UNSAFE.search(candidate) and candidate == candidate.strip():
            return candidate
    return None


def context_of(body: str, link: Link, width: int = CONTEXT) -> str:
    """A short, one-line excerpt of ``body`` around ``link`` (for a backlink)."""
    return _excerpt(body, link.start, link.end, width)


def _excerpt(body: str, start: int, end: int, width: int = CONTEXT) -> str:
    start = max(0, start - width)
    end = min(len(body), end + width)
    excerpt = " ".join(body[start:end].split())
    return ("…" if start > 0 else "") + excerpt + ("…" if end < len(body) else "")


def context_at(body: str, position: int) -> str:
    """The backlink context of the link at ``position`` (its index among `parse_links`'s, as
    the link index numbers them) of ``body``; "" if there is none there. Finds the links as
    `parse_links` does, spans only, up to that one (a backlink read runs it per linking note)."""
    if position < 0 or "[" not in body:
        return ""
    masked = mask_code(body)
    wiki = _spans(_wiki_matches(body, masked)) if "[[" in masked else None
    markdown = _spans(_markdown_matches(body, masked)) if "](" in masked else None
    if wiki is not None and markdown is not None:
        spans: Iterator[tuple[int, int]] = heapq.merge(wiki, markdown)
    else:
        spans = wiki or markdown or iter(())
    for index, (start, end) in enumerate(spans):
        if index == position:
            return _excerpt(body, start, end)[:MAX_CONTEXT]
    return ""


def _spans(matches: Iterator[tuple[re.Match[str], Any, Any]]) -> Iterator[tuple[int, int]]:
    """(start, end) of each link match, in order."""
    for match, _text, _target in matches:
        yield match.start(), match.end()


def rewrite(body: str, replacements: list[tuple[int, int, str]]) -> str:
    """``body`` with each (start, end) span replaced by its text; spans must not overlap."""
    out: list[str] = []
    position = 0
    for start, end, text in sorted(replacements):
        out.append(body[position:start])
        out.append(text)
        position = end
    out.append(body[position:])
    return "".join(out)
