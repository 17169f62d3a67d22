"""Tags: ``#tag`` and ``#nested/tag`` in a body (outside code), and a front matter ``tags:``
value. A tag is matched case-insensitively (`tag_key`) and shown as first written.

In a body a tag starts at the beginning of a line or after whitespace (so a URL's
``page#fragment``, ``&#123;`` and ``](#anchor)`` are not tags), is not all digits (``#123``
is an issue number) and cannot start with a space (``# Heading`` is a heading).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from notes_server.markup.code import mask_code

MAX_TAG = 100
# A tag: word characters, "-" and "/" (nesting), starting with a word character.
# (Only after whitespace or at the start: checked by the caller, since a lookbehind would cost
# the search its literal prefix.)
_BODY_TAG = re.compile(r"#(\w[\w/-]*)")
_TAG = re.compile(r"\w[\w/-]*")


def tag_key(tag: str) -> str:
    """What makes two spellings the same tag: NFC and full case folding."""
    if tag.isascii():  # NFC leaves ASCII as it is, and its case folding is lower()
        return tag.lower()
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", tag).casefold())


def clean_tag(raw: str) -> str | None:
    """A tag as it may be stored (a leading ``#`` dropped, NFC, trailing ``/`` trimmed), or
    None if ``raw`` is not one (empty, all digits, a space inside, ``//``, too long)."""
    text = raw.strip()
    if not text.isascii():  # NFC leaves ASCII as it is
        text = unicodedata.normalize("NFC", text)
    text = text.removeprefix("#").rstrip("/")
    if not text or _TAG.fullmatch(text) is None:
        return None
    return _within_rules(text)


def _within_rules(text: str) -> str | None:
    """``text`` (the shape of a tag, trimmed) if no other rule refuses it: not too long, not
    all digits (an issue number), no empty nesting level."""
    if len(text) > MAX_TAG or text.isdigit() or "//" in text:
        return None
    return text


def body_tags(body: str) -> list[str]:
    """The tags of ``body`` outside code, each once (by key), as first written."""
    if "#" not in body:
        return []
    masked = mask_code(body)
    seen: set[str] = set()
    kept: list[str] = []
    for match in _BODY_TAG.finditer(masked):
        start = match.start()
        if start and not masked[start - 1].isspace():
            continue
        tag = _body_tag(match.group(1))
        if tag is not None and (key := tag_key(tag)) not in seen:
            seen.add(key)
            kept.append(tag)
    return kept


def _body_tag(text: str) -> str | None:
    """`clean_tag` of what `_BODY_TAG` matched. ASCII (most tags) needs fewer steps: NFC
    leaves it as it is, and the match already has the shape of a tag."""
    if not text.isascii():
        return clean_tag(text)
    return _within_rules(text.rstrip("/"))


def unique(tags: Iterable[str]) -> list[str]:
    """``tags`` (an iterable of cleaned tags) without repeats by key, first spelling kept."""
    seen: set[str] = set()
    kept: list[str] = []
    for tag in tags:
        key = tag_key(tag)
        if key not in seen:
            seen.add(key)
            kept.append(tag)
    return kept
