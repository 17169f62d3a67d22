"""Ranking keyword candidates, and the passage (snippet and section) a hit shows.

The backends only say, for the notes of the scope that hold at least one content term, which
terms each holds (anywhere, and in the title) and whether it holds the exact phrase, as one
bit mask per note (`mask_bits`), grouped: one `Group` per distinct mask, with how many notes
have it and their seqs. The ranking is computed here, the same on both, from statistics of the
scope alone (how many notes of the scope there are and how many hold each term). Nothing
outside the caller's scope can change a score or an order.

Order: the exact phrase first, then more content terms matched, then more stop words
matched, then the BM25 weight of the matched terms (inverse document frequency within the
scope, a title match counting twice; term frequency is not used, i.e. BM25 with k1 = 0), then
the oldest note. The score is one number with that order: tier + weight / (1 + weight), the
tier an integer and the second part below 1.

Notes with the same mask have the same score, so the work here is per mask, not per note: the
masks are scored and ordered, and only the seqs of the groups that reach the page asked for
are read and sorted (`rank(..., keep=offset + limit)`). The page is exact, and so is every
page after it: no note is left out or reordered by a bound.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import NamedTuple

from notes_server.store.search_terms import Query, fold

STOP_WEIGHT = 0.1
TITLE_WEIGHT = 1.0


def mask_bits(count: int) -> tuple[list[int], list[int], int]:
    """The bit of each term's "held" flag, of each term's "in the title" flag, and of the
    phrase flag, for a query of `count` terms (at most 16: 33 bits, a 64-bit integer)."""
    return (
        [1 << i for i in range(count)],
        [1 << (count + i) for i in range(count)],
        1 << (2 * count),
    )


class Group(NamedTuple):
    """The scope's notes holding exactly this combination of terms (a `mask_bits` mask)."""

    mask: int
    size: int
    # The seqs, in any order, read only when the group reaches the page.
    seqs: Callable[[], list[int]]


class Ranked(NamedTuple):
    seq: int
    score: float


def rank(
    query: Query,
    groups: Sequence[Group],
    total: int,
    *,
    keep: int | None = None,
    allowed: Collection[int] | None = None,
) -> list[Ranked]:
    """The candidates best first (ties by seq): `total` is the number of notes in scope. With
    `keep`, only the first `keep` (whole groups are scored, so those are exactly the first
    `keep` of the full list); with `allowed`, only those seqs (the statistics stay the
    scope's)."""
    count = len(query.terms)
    held_bits, title_bits, phrase_bit = mask_bits(count)
    held_by = [sum(g.size for g in groups if g.mask & bit) for bit in held_bits]
    total = max(total, sum(g.size for g in groups))
    weights = []
    for i, term in enumerate(query.terms):
        df = held_by[i]
        idf = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
        weights.append(idf * (STOP_WEIGHT if term.stop else 1.0))
    content = set(query.content)
    by_score: dict[float, list[Group]] = {}
    for group in groups:
        held = [bool(group.mask & bit) for bit in held_bits]
        matched_content = sum(1 for i in content if held[i])
        if not matched_content:
            continue
        matched_other = sum(1 for i in range(count) if i not in content and held[i])
        weight = sum(
            weights[i] * (1.0 + TITLE_WEIGHT * bool(group.mask & title_bits[i]))
            for i in range(count)
            if held[i]
        )
        tier = 1000 * bool(group.mask & phrase_bit) + 20 * matched_content + matched_other
        by_score.setdefault(round(tier + weight / (1.0 + weight), 9), []).append(group)
    ranked: list[Ranked] = []
    for score in sorted(by_score, reverse=True):
        if keep is not None and len(ranked) >= keep:
            break
        seqs = sorted(seq for group in by_score[score] for seq in group.seqs())
        if allowed is not None:
            seqs = [seq for seq in seqs if seq in allowed]
        if keep is not None:
            # Only the seqs that reach the page become `Ranked`: a group of 60,000 notes whose
            # first 20 are the page cost 10 ms of tuples at 1M notes.
            seqs = seqs[: keep - len(ranked)]
        ranked.extend(Ranked(seq, score) for seq in seqs)
    return ranked if keep is None else ranked[:keep]


def complete(query: Query, ranked: Ranked) -> bool:
    """Whether the note holds the exact phrase or every content term (the top tiers)."""
    return ranked.score >= 1000 or int(ranked.score % 1000) // 20 >= len(query.content)


_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_TOKEN = re.compile(r"[^\W_]+|\S", re.UNICODE)
SNIPPET_WORDS = 24
SNIPPET_CHARS = 200


class Passage(NamedTuple):
    section: str | None
    text: str


def passages(body: str, max_chars: int = 1200) -> list[Passage]:
    """The body cut by heading and blank line, each passage at most `max_chars` (a longer
    paragraph is cut at word boundaries), each with the nearest heading above it."""
    found: list[Passage] = []
    section: str | None = None
    para: list[str] = []

    def flush() -> None:
        text = " ".join(" ".join(para).split())
        para.clear()
        while text:
            if len(text) <= max_chars:
                found.append(Passage(section, text))
                break
            cut = text.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            found.append(Passage(section, text[:cut]))
            text = text[cut:].lstrip()

    for line in body.splitlines():
        heading = _HEADING.match(line)
        if heading:
            flush()
            section = heading.group(2).strip()[:200]
        elif not line.strip():
            flush()
        else:
            para.append(line)
    flush()
    return found


def _marks(text: str, query: Query) -> list[tuple[int, int]]:
    """Spans of `text` that match a term: word-prefix matches (folded) and substrings; only
    those that can fall in the window around the first match (`_window` drops the rest)."""
    spans: list[tuple[int, int]] = []
    prefixes = tuple(fold(t.text) for t in query.terms if not t.substring)
    subs = [t.text for t in query.terms if t.substring]
    for sub in subs:
        start = text.find(sub)
        while start >= 0:
            spans.append((start, start + len(sub)))
            start = text.find(sub, start + 1)
    if prefixes:
        limit = min(spans)[0] + SNIPPET_CHARS if spans else len(text)
        for start, end in _word_matches(text, prefixes):
            if start > limit:
                break
            if start + SNIPPET_CHARS < limit:
                limit = start + SNIPPET_CHARS
            spans.append((start, end))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _word_matches(text: str, prefixes: tuple[str, ...]) -> Iterator[tuple[int, int]]:
    """Spans of the words of `text` that start with one of `prefixes` (folded), in order. ASCII
    text and word-character prefixes (most notes and queries) are matched by one compiled
    pattern; anything else token by token, folding each word. The per-token Python loop was
    half of a search's time at 10,000 notes (bench queries: 58 tokens per snippet)."""
    if text.isascii() and all(_WORD.fullmatch(prefix) for prefix in prefixes):
        for m in _prefix_pattern(prefixes).finditer(text):
            yield m.span()
        return
    for m in _TOKEN.finditer(text):
        word = m.group()
        # ASCII folds to its lower case: no need for the Unicode decomposition.
        if (word.lower() if word.isascii() else fold(word)).startswith(prefixes):
            yield m.span()


_WORD = re.compile(r"[^\W_]+")


@functools.lru_cache(maxsize=256)
def _prefix_pattern(prefixes: tuple[str, ...]) -> re.Pattern[str]:
    """A word (a run of `_TOKEN`'s word characters) that starts with one of `prefixes`, case
    ignored: on ASCII text, the same test as folding each word."""
    alternatives = "|".join(re.escape(p) for p in sorted(set(prefixes), key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alternatives})[^\W_]*", re.IGNORECASE)


def snippet(body: str, query: Query | None) -> tuple[str, str | None]:
    """(snippet, section): the passage of the body that holds the most terms (a quick
    case-folded substring count picks it), cut around its first match, the matches marked
    `**`; without a query or a match, the start."""
    parts = passages(body) or [Passage(None, "")]
    best = parts[0]
    if query is not None:
        needles = {t.text for t in query.terms} | {fold(t.text) for t in query.terms}
        best_count = 0
        for part in parts:
            lowered = part.text.casefold()
            count = sum(1 for n in needles if n in lowered)
            if count > best_count:
                best, best_count = part, count
    marks = _marks(best.text, query) if query is not None else []
    return _window(best.text, marks), best.section


def _window(text: str, marks: list[tuple[int, int]]) -> str:
    if not marks:
        return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"
    first = marks[0][0]
    start = max(0, first - SNIPPET_CHARS // 3)
    if start:
        space = text.find(" ", start, first)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + SNIPPET_CHARS)
    if end < len(text):
        space = text.rfind(" ", max(first + 1, end - 40), end)
        end = space if space > first else end
    out: list[str] = ["…" if start else ""]
    pos = start
    for m_start, m_end in marks:
        if m_end <= start or m_start >= end:
            continue
        m_start, m_end = max(m_start, start), min(m_end, end)
        out.append(text[pos:m_start])
        out.append(f"**{text[m_start:m_end]}**")
        pos = m_end
    out.append(text[pos:end])
    out.append("…" if end < len(text) else "")
    return "".join(out)
