"""Hybrid search: the keyword ranking and the semantic ranking of one scope, fused by
reciprocal rank fusion (score = sum of 1 / (RRF_K + rank) over the lists a note is in; ties by
seq), so the fused order is a pure function of the two lists; keyword hits holding the exact
phrase or every word of the query stay on top, as in keyword mode. Both lists are computed over the
scope alone (keyword.RankedSearch, semantic.semantic_ranked)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection

from notes_server.store import search as keyword
from notes_server.store import semantic
from notes_server.store.search_rank import complete, snippet
from notes_server.store.search_terms import parse

# Measured on the retrieval eval (scripts/bench_lib/retrieval.py, man pages, both halves of the
# queries): k=10 found more by description than the usual 60 (test half recall@10 0.688
# against 0.679, MRR 0.448 against 0.441; dev 0.699 against 0.688) and kept exact titles where
# keyword search has them. A semantic weight, a similarity floor or a confidence gate did not
# beat it on both halves (BENCHMARKS.md).
RRF_K = 10


class FusedHit(NamedTuple):
    hit: keyword.SearchHit
    matched_by: tuple[str, ...]


def fuse(
    keyword: list[int],
    semantic_: list[int],
    pinned: int = 0,
    *,
    semantic_weight: float = 1.0,
    k: int = RRF_K,
) -> list[tuple[int, float, tuple[str, ...]]]:
    """(seq, fused score, signals) best first, from two ranked lists of seqs. The first
    `pinned` keyword hits (the exact phrase or every word) stay first, in keyword order, their
    score raised by 1; the rest are in fused order."""
    scores: dict[int, float] = {}
    signals: dict[int, list[str]] = {}
    for name, ranked, weight in (
        ("keyword", keyword, 1.0),
        ("semantic", semantic_, semantic_weight),
    ):
        for rank, seq in enumerate(ranked, start=1):
            scores[seq] = scores.get(seq, 0.0) + weight / (k + rank)
            signals.setdefault(seq, []).append(name)
    top = {seq: i for i, seq in enumerate(keyword[:pinned])}
    fused = [
        (seq, round(score + (seq in top), 9), tuple(signals[seq])) for seq, score in scores.items()
    ]
    fused.sort(key=lambda f: (f[0] not in top, top.get(f[0], 0), -f[1], f[0]))
    return fused


def fuse_ranked(
    keyword: list[int], nearest: Sequence[tuple[int, float]], pinned: int
) -> list[tuple[int, float, tuple[str, ...]]]:
    """The server's fusion of a keyword list and a semantic (seq, similarity) list."""
    kept = [seq for seq, sim in nearest if sim >= semantic.MIN_SIMILARITY]
    return fuse(keyword, kept, pinned)


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
    ranked: list[Any] = []
    if mode == "hybrid" and parsed is not None and isinstance(store, keyword.RankedSearch):
        ranked = store.ranked(conn, workspace, parsed, include_archived=include_archived)
    vector = embedder.embed([query])[0]
    nearest = semantic.semantic_ranked(
        conn, workspace, vector, embedder.model, include_archived=include_archived
    )
    fused: list[tuple[int, float, tuple[str, ...]]]
    if mode == "semantic":
        fused = [(h.seq, h.similarity, ("semantic",)) for h in nearest]
    else:
        pinned = 0
        while pinned < len(ranked) and parsed is not None and complete(parsed, ranked[pinned]):
            pinned += 1
        fused = fuse_ranked(
            [r.seq for r in ranked], [(h.seq, h.similarity) for h in nearest], pinned
        )
    if tags:
        carrying = keyword.tagged_seqs(conn, workspace, include_archived, tags)
        fused = [f for f in fused if f[0] in carrying]
    page = fused[offset : offset + limit]
    if not page:
        return []
    records = keyword.notes_by_seq(conn, workspace, [f[0] for f in page])
    passages = {h.seq: h for h in nearest}
    hits = []
    for seq, score, signals in page:
        record = records[seq]
        if "keyword" in signals or seq not in passages:
            text_, section = snippet(record.body, parsed)
        else:
            best = passages[seq]
            text_, section = snippet(best.text, None)[0], best.section
        hits.append(FusedHit(keyword.SearchHit(record, text_, score, section), signals))
    return hits
