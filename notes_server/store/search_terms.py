"""A search query as terms: words (for the word indexes) and substrings (for scripts written
without spaces), which words are stop words, and the exact phrase.

Pure Python, no database: both backends and the snippet builder read the same `Query`, so
SQLite and PostgreSQL match, rank and highlight the same terms.

Words are runs of letters, marks and digits (so a Thai vowel sign or a combining accent stays
inside its word). Inside a word, runs of a script written without spaces (Han, kana, Hangul,
Thai, Lao, Khmer, Myanmar) become substring terms: a run of one or two characters is one term,
a longer run its overlapping trigrams (what a trigram index can answer; a note holding the run
holds every trigram, a note holding part of it some). Everything else is a word, matched as a
word prefix with diacritics folded (FTS5 `unicode61 remove_diacritics 2`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import NamedTuple

# At most this many distinct terms per query: an assistant's long query keeps its first ones.
MAX_TERMS = 16

# Common English function words: matched and counted, but weighed down in the ranking and
# never enough on their own to make a note a hit when the query has other words.
_STOP_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_SPACELESS = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3134F),  # CJK extensions B-G
)


class Term(NamedTuple):
    """One thing to look for. `text` is what the index is asked for: a lower-cased word, or
    a substring as written."""

    text: str
    substring: bool
    stop: bool


class Query(NamedTuple):
    terms: tuple[Term, ...]
    # The query's words in order, when it has two or more and nothing else: a note holding
    # them as a phrase ranks first.
    phrase: tuple[str, ...] | None

    @property
    def content(self) -> tuple[int, ...]:
        """Indexes of the terms that can make a note a hit on their own: the non-stop terms,
        or every term when the query is only stop words."""
        kept = tuple(i for i, t in enumerate(self.terms) if not t.stop)
        return kept or tuple(range(len(self.terms)))


_SPACELESS_RUN = re.compile(
    "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _SPACELESS) + "]+"
)


def spaceless_runs(text: str) -> str:
    """The runs of spaceless-script text in ``text``, one a line: all the trigram index needs,
    since a substring term is made of spaceless characters only and so never spans a line
    break (an English note indexes as empty, which makes its writes cheap). ASCII text has
    none (every spaceless script lies above U+0E00), and `isascii` answers without a scan."""
    if text.isascii():
        return ""
    return "\n".join(_SPACELESS_RUN.findall(text))


def spaceless(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _SPACELESS)


def _word_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LMN"


def words(text: str) -> list[str]:
    """Runs of letters, marks and digits (a lone surrogate, NUL or emoji is a separator)."""
    found: list[str] = []
    start = -1
    for i, char in enumerate(text):
        if _word_char(char):
            if start < 0:
                start = i
        elif start >= 0:
            found.append(text[start:i])
            start = -1
    if start >= 0:
        found.append(text[start:])
    return found


def _runs(word: str) -> list[tuple[str, bool]]:
    """The word cut where it passes in or out of a spaceless script: (run, spaceless)."""
    runs: list[tuple[str, bool]] = []
    for char in word:
        kind = spaceless(char)
        if runs and runs[-1][1] == kind:
            runs[-1] = (runs[-1][0] + char, kind)
        else:
            runs.append((char, kind))
    return runs


def _pieces(run: str) -> list[str]:
    if len(run) <= 2:
        return [run]
    return [run[i : i + 3] for i in range(len(run) - 2)]


def parse(text: str) -> Query | None:
    """The query's terms, or None when it has nothing to look for (only punctuation, emoji)."""
    terms: list[Term] = []
    seen: set[str] = set()
    plain: list[str] = []
    mixed = False
    for word in words(text):
        for run, is_spaceless in _runs(word):
            if is_spaceless:
                mixed = True
                candidates = [Term(p, True, False) for p in _pieces(run)]
            else:
                lowered = unicodedata.normalize("NFC", run.casefold())
                plain.append(lowered)
                candidates = [Term(lowered, False, lowered in STOP_WORDS)]
            for term in candidates:
                key = f"{term.substring}:{term.text}"
                if key not in seen and len(terms) < MAX_TERMS:
                    seen.add(key)
                    terms.append(term)
    if not terms:
        return None
    phrase = tuple(plain[:MAX_TERMS]) if len(plain) >= 2 and not mixed else None
    return Query(tuple(terms), phrase)


@functools.lru_cache(maxsize=4096)
def fold(text: str) -> str:
    """Case and diacritics folded, as the word index compares words."""
    if text.isascii():  # nothing to decompose, and casefold is lower for ASCII
        return text.lower()
    decomposed = unicodedata.normalize("NFD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))
