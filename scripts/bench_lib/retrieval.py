"""Retrieval quality of notes_search on text no one here wrote: Python's own documentation
topics (`pydoc_data.topics`, shipped with the interpreter), one note per topic.

Queries are derived mechanically, with a fixed seed, never written or tuned by hand:
- "title": the topic's name with '-' as a space (e.g. "atom identifiers"); relevant: that topic.
- "passage": from the topic's middle paragraph, 8 of its words (not stop words, in order, a
  seeded sample) plus 2 words from another topic (noise, so a search that needs every word
  finds nothing); relevant: that topic.
recall@10 (the relevant topic is in the first 10) and MRR@10, per mode and query kind, through
the store's search functions in-process on a fresh SQLite database, after the indexer embedded
every note.
"""

from __future__ import annotations

import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

SEED = 23


def corpus() -> dict[str, str]:
    import pydoc_data.topics as topics

    return {name: text for name, text in sorted(topics.topics.items()) if text.strip()}


def queries(docs: dict[str, str]) -> list[tuple[str, str, str]]:
    """(kind, query, relevant topic) for every topic."""
    from notes_server.store.search_terms import STOP_WORDS

    rng = random.Random(SEED)
    names = list(docs)
    out = []
    for name in names:
        out.append(("title", name.replace("-", " "), name))
        paragraphs = [p for p in re.split(r"\n\s*\n", docs[name]) if len(p.split()) >= 12]
        if not paragraphs:
            continue
        middle = paragraphs[len(paragraphs) // 2]
        words = [w for w in re.findall(r"[A-Za-z]{3,}", middle) if w.lower() not in STOP_WORDS]
        if len(words) < 8:
            continue
        picked = sorted(rng.sample(range(len(words)), 8))
        other = docs[rng.choice([n for n in names if n != name])]
        noise = rng.sample(re.findall(r"[A-Za-z]{4,}", other) or ["zzzz"], 2)
        out.append(("passage", " ".join([words[i] for i in picked] + noise), name))
    return out


def evaluate() -> dict[str, Any]:
    from notes_server.store import embedding, hybrid, indexer, migrate, notes, search
    from notes_server.store.engine import make_engine, read_tx, write_tx
    from notes_server.tools.services import utc_now

    docs = corpus()
    asked = queries(docs)
    workspace = "file:///bench/pydoc"
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'eval.db'}")
        migrate.upgrade(engine)
        ids = {}
        with write_tx(engine) as conn:
            for name, text in docs.items():
                note = notes.insert_note(
                    conn, workspace=workspace, path=f"{name}.md", title=name, body=text,
                    now=utc_now(),
                )  # fmt: skip
                ids[note.id] = name
        modes = ["keyword"]
        embedder = None
        stats: dict[str, Any] = {"notes": len(docs), "queries": len(asked)}
        if embedding.installed():
            embedder = embedding.Embedder()
            started = time.perf_counter()
            passages = indexer.drain(engine, embedder)
            stats["index_s"] = time.perf_counter() - started
            stats["passages"] = passages
            modes += ["semantic", "hybrid"]
        scores: dict[tuple[str, str], list[float]] = {}
        timings: dict[str, list[float]] = {}
        with read_tx(engine) as conn:
            for mode in modes:
                for kind, query, relevant in asked:
                    started = time.perf_counter()
                    if mode == "keyword":
                        found = search.search(
                            conn, workspace, query, include_archived=False, limit=10, offset=0
                        )
                        names = [ids[h.note.id] for h in found]
                    else:
                        fused = hybrid.search(
                            conn, workspace, query, mode, embedder,
                            include_archived=False, limit=10, offset=0,
                        )  # fmt: skip
                        names = [ids[h.hit.note.id] for h in fused]
                    timings.setdefault(mode, []).append(time.perf_counter() - started)
                    rank = names.index(relevant) + 1 if relevant in names else 0
                    scores.setdefault((mode, kind), []).append(1.0 / rank if rank else 0.0)
                    scores.setdefault((mode, "recall:" + kind), []).append(1.0 if rank else 0.0)
        engine.dispose()
    table = {}
    for mode in modes:
        for kind in ("title", "passage"):
            rr, hit = scores[(mode, kind)], scores[(mode, "recall:" + kind)]
            table[(mode, kind)] = (sum(hit) / len(hit), sum(rr) / len(rr), len(hit))
    stats["table"] = table
    stats["p50_ms"] = {m: sorted(t)[len(t) // 2] * 1000 for m, t in timings.items()}
    return stats


def markdown(stats: dict[str, Any]) -> str:
    lines = [
        f"{stats['notes']} notes (pydoc_data topics), {stats['queries']} queries",
        "",
        "| mode | query kind | queries | recall@10 | MRR@10 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (mode, kind), (recall, mrr, n) in stats["table"].items():
        lines.append(f"| {mode} | {kind} | {n} | {recall:.3f} | {mrr:.3f} |")
    p50 = stats["p50_ms"]
    lines += ["", "in-process search p50 (same run): " + ", ".join(
        f"{m} {v:.2f} ms ({v / p50['keyword']:.2f}x keyword)" for m, v in p50.items()
    )]  # fmt: skip
    if "index_s" in stats:
        rate = stats["passages"] / stats["index_s"]
        lines += ["", f"indexing: {stats['passages']} passages in {stats['index_s']:.2f} s "
                  f"({rate:,.0f} passages/s, including the model's first load)"]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(evaluate()))
