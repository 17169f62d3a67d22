"""Match keys shared by the notes table and the link index (a module of its own so that both
can import it without importing each other)."""

from __future__ import annotations

import unicodedata


def title_key(title: str) -> str:
    """Case-insensitive match key for titles: NFC, full Unicode case folding (NFC again, as
    folding can decompose), whitespace runs of any kind collapsed to one space."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", title).casefold())
    return " ".join(folded.split())
