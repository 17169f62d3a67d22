"""Match keys shared by the notes table and the link index (a module of its own so that both
can import it without importing each other)."""

from __future__ import annotations

import unicodedata


def title_key(title: str) -> str:
    """Case-insensitive match key for titles: NFC, full Unicode case folding (NFC again, as
    folding can decompose), whitespace runs of any kind collapsed to one space."""
    if title.isascii():  # NFC leaves ASCII as it is, and its case folding is lower()
        return " ".join(title.lower().split())
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", title).casefold())
    return " ".join(folded.split())


def lookup_key(text: str) -> str:
    """The one key the link index looks links up by (migration 0024): `title_key` without
    leading slashes or spaces. A link keeps the lookup key of its target text (a markdown link:
    of its workspace path), a note is looked for by those of its path and its title, so every
    link a note can resolve (exactly by path or by title key) is among the links with one of
    them; the exact columns then decide. Wider than either match, never narrower: ``/a.md``
    and ``a.md`` share a key, as ``[[/a.md]]`` names the note at path ``a.md``."""
    return lookup_key_of(title_key(text))


def lookup_key_of(key: str) -> str:
    """`lookup_key` of a text whose `title_key` is ``key`` (already computed: a link's)."""
    return key.lstrip("/ ")
