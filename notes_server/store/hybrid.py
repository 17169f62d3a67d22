"""Hybrid search: the keyword ranking and the semantic ranking of one scope, fused by
reciprocal rank fusion (score = sum of 1 / (RRF_K + rank) over the lists a note is in; ties by
seq), so the fused order is a pure function of the two lists. Only keyword hits whose *title*
holds every word of the query (or is the query) stay on top, in keyword order: a note that merely
mentions every word somewhere in its body is fused like any other, since pinning those buried
what the semantic list found (BENCHMARKS.md, retrieval). Both lists are computed over the scope
alone (keyword.RankedSearch, semantic.semantic_ranked)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, bindparam, select

from notes_server.store import search as keyword
from notes_server.store import semantic
from notes_server.store.engine import DriverRead, read_all
from notes_server.store.models import notes_table as notes
from notes_server.store.search_rank import complete, snippet
from notes_server.store.search_terms import Query, fold, parse, words

# Measured on the retrieval eval (scripts/bench_lib/retrieval.py, man pages; chosen on the dev
# half of the queries, quoted on the test half; BENCHMARKS.md): with the feedback below, k=20
# found the most by description on dev (recall@10 0.784 against keyword's 0.684; test 0.799
# against 0.692; on a second draw of the corpus test 0.760 against 0.666) and kept exact titles.
RRF_K = 20
# The title rule looks at this many of the keyword hits that hold every word (the top tier),
# so that a one-word query matching thousands of notes reads a bounded number of titles.
TITLE_CHECK = 200
# Each list is fused from its best DEPTH notes (the depth the retrieval eval measured, both
# lists cut there): a note ranked lower in both adds under 2/(RRF_K + DEPTH) to a fused score.
DEPTH = max(semantic.DEPTH, TITLE_CHECK)
# Hybrid's semantic list is ranked from the query moved toward the best passages of the first
# FEEDBACK_DEPTH keyword hits (semantic.moved_toward), weighted FEEDBACK_WEIGHT: the keyword
# hits say which sense of the words the caller's notes use, and the neighbours of that find
# notes that say it in other words. Chosen on the retrieval eval's dev half (BENCHMARKS.md).
FEEDBACK_DEPTH = 3
FEEDBACK_WEIGHT = 0.5


class FusedHit(NamedTuple):
    hit: keyword.SearchHit
    matched_by: tuple[str, ...]


def fuse(
    keyword: list[int],
    semantic_: list[int],
    pinned: int | Sequence[int] = 0,
    *,
    semantic_weight: float = 1.0,
    k: int = RRF_K,
) -> list[tuple[int, float, tuple[str, ...]]]:
    """(seq, fused score, signals) best first, from two ranked lists of seqs. `pinned`: a
    count pins that many first keyword hits, a sequence pins those keyword hits, in its order;
    pinned hits stay first, their score raised by 1; the rest are in fused order."""
    scores: dict[int, float] = {}
    signals: dict[int, list[str]] = {}
    for name, ranked, weight in (
        ("keyword", keyword, 1.0),
        ("semantic", semantic_, semantic_weight),
    ):
        for rank, seq in enumerate(ranked, start=1):
            scores[seq] = scores.get(seq, 0.0) + weight / (k + rank)
            signals.setdefault(seq, []).append(name)
    pins = keyword[:pinned] if isinstance(pinned, int) else [s for s in pinned if s in scores]
    top = {seq: i for i, seq in enumerate(pins)}
    fused = [
        (seq, round(score + (seq in top), 9), tuple(signals[seq])) for seq, score in scores.items()
    ]
    fused.sort(key=lambda f: (f[0] not in top, top.get(f[0], 0), -f[1], f[0]))
    return fused


def title_holds(query: Query, text: str, title: str) -> bool:
    """Whether the title is the query, or holds every content word of it (whole words, case
    and diacritics folded; a spaceless-script piece as a substring)."""
    folded = fold(title)
    # Either rule needs every content term somewhere in the title: most titles fail this
    # substring test, before their words are split.
    if any(fold(query.terms[i].text) not in folded for i in query.content):
        return False
    if " ".join(words(folded)) == " ".join(words(fold(text))):
        return True
    held = {fold(w) for w in words(title)}
    for i in query.content:
        term = query.terms[i]
        if fold(term.text) not in (folded if term.substring else held):
            return False
    return True


def title_pins(
    query: Query, text: str, complete: Sequence[int], titles: Mapping[int, str]
) -> list[int]:
    """The keyword hits to pin, in keyword order: of the top-tier hits `complete` (every word
    or the phrase), the first TITLE_CHECK, those whose title holds the query."""
    return [
        seq
        for seq in complete[:TITLE_CHECK]
        if seq in titles and title_holds(query, text, titles[seq])
    ]


def fuse_ranked(
    keyword: list[int], nearest: Sequence[tuple[int, float]], pinned: int | Sequence[int]
) -> list[tuple[int, float, tuple[str, ...]]]:
    """The server's fusion of a keyword list and a semantic (seq, similarity) list."""
    kept = [seq for seq, sim in nearest if sim >= semantic.MIN_SIMILARITY]
    return fuse(keyword, kept, pinned)


_TITLES = DriverRead(
    select(notes.c.seq, notes.c.workspace, notes.c.title).where(
        notes.c.seq.in_(bindparam("seqs", expanding=True))
    )
)


def _titles(conn: Connection, workspace: str, seqs: list[int]) -> dict[int, str]:
    """The titles of these notes (only titles: the rule needs no body). Read by primary key,
    the workspace checked on the rows (as `keyword.notes_by_seq`: in the WHERE, SQLite walks
    the workspace's index, ~45 ms at 100k notes)."""
    if not seqs:
        return {}
    rows = read_all(_TITLES, conn, {"seqs": seqs})
    return {int(r[0]): str(r[2]) for r in rows if r[1] == workspace}


def search(
    conn: Connection,
    workspace: str,
    query: str,
    mode: str,
    embedder: Any,
    *,
    include_archived: bool,
    limit: int,
    offset: int,
    tags: Sequence[str] = (),
) -> list[FusedHit]:
    parsed = parse(query)
    store = keyword.store(conn)
    carrying = keyword.tagged_seqs(conn, workspace, include_archived, tags) if tags else None
    ranked: list[Any] = []
    if mode == "hybrid" and parsed is not None and isinstance(store, keyword.RankedSearch):
        ranked = store.ranked(
            conn,
            workspace,
            parsed,
            include_archived=include_archived,
            keep=DEPTH,
            allowed=carrying,
        )
    vector = embedder.embed([query])[0]
    if ranked:
        vector = semantic.moved_toward(
            conn,
            workspace,
            vector,
            embedder.model,
            [r.seq for r in ranked[:FEEDBACK_DEPTH]],
            FEEDBACK_WEIGHT,
        )
    nearest = semantic.semantic_ranked(
        conn,
        workspace,
        vector,
        embedder.model,
        include_archived=include_archived,
        allowed=carrying,
    )
    fused: list[tuple[int, float, tuple[str, ...]]]
    if mode == "semantic":
        fused = [(h.seq, h.similarity, ("semantic",)) for h in nearest]
    else:
        top = 0
        while top < len(ranked) and parsed is not None and complete(parsed, ranked[top]):
            top += 1
        pins: list[int] = []
        if parsed is not None and top:
            tops = [r.seq for r in ranked[: min(top, TITLE_CHECK)]]
            titles = _titles(conn, workspace, tops)
            pins = title_pins(parsed, query, tops, titles)
        fused = fuse_ranked([r.seq for r in ranked], [(h.seq, h.similarity) for h in nearest], pins)
    page = fused[offset : offset + limit]
    if not page:
        return []
    records = store.records(conn, workspace, [f[0] for f in page])
    best_of = {h.seq: h.passage for h in nearest}
    texts = semantic.passage_texts(
        conn, [best_of[f[0]] for f in page if "keyword" not in f[2] and f[0] in best_of]
    )
    hits = []
    for seq, score, signals in page:
        record = records[seq]
        passage = texts.get(best_of.get(seq, -1))
        if "keyword" in signals or passage is None:
            text_, section = snippet(record.body, parsed)
        else:
            text_, section = snippet(passage[1], None)[0], passage[0]
        hits.append(FusedHit(keyword.SearchHit(record, text_, score, section), signals))
    return hits
