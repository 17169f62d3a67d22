"""Retrieval quality of notes_search on text no one here wrote.

Corpus `man` (the default where /usr/share/man is there): the machine's manual pages of
sections 1, 5, 7 and 8 (gcloud's 16k generated pages left out), rendered to text by groff once
and cached; one note per page, its title the names of the NAME line ("gzip, gunzip, zcat"), its
body the page without the NAME section (headings as `##`). Corpus `pydoc`: Python's
documentation topics (`pydoc_data.topics`), one note per topic, titled by the topic's key, the
body without its heading line.

Queries are derived mechanically, never written or tuned by hand:
- "description": what the page says it is for, which the note itself no longer holds: the
  NAME line's description ("list directory contents"; pydoc: the topic's heading, "Customizing
  attribute access"); relevant: that note. This is how people ask ("what lists directory
  contents"); the words have to be found in the body, where the page explains itself in its own
  words. A description shared by two pages is not asked (its relevance would be ambiguous).
- "title": the note's exact title; relevant: that note (the "never below keyword" check).
- "passage words" (the previous derivation, still reported beside the others, not used to
  choose anything): 8 words (3+ letters, not stop words) sampled from the middle paragraph of
  the indexed body plus 2 words of another note. The target holds 8 of its 10 words, so this
  set measures lexical overlap: keyword search gets its own words back (recall@10 0.987 on the
  79 pydoc notes), and no fusion can show a large gain over it.

Besides the server's fusion ("hybrid") the same ranked lists are fused other ways side by side
(which keyword hits are pinned, RRF k, a semantic weight, a similarity floor, a note scored by
its best passage or by the mean over its passages). Fusion choices are made on the `dev` half
of the queries (a seeded split) and reported on both halves; the `test` half is the one to
quote. recall@10 (the relevant note is in the first 10) and MRR@10, per mode and query kind,
through the store's ranking functions in-process on a fresh SQLite database, after the indexer
embedded every note. Run from the repository root:
`.venv/bin/python -m scripts.bench_lib.retrieval [man|pydoc]`.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

SEED = 23
LIST_DEPTH = 200
MAN_ROOT = Path("/usr/share/man")
MAN_SECTIONS = ("1", "5", "7", "8")
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "notes-server-bench"


class Doc(NamedTuple):
    title: str
    body: str
    description: str


def _render(page: Path) -> str:
    """The page as plain text (groff, 100 columns), cached by file name."""
    out = CACHE / "man" / f"{page.name}.txt"
    if out.exists():
        return out.read_text(encoding="utf-8", errors="replace")
    raw = page.read_bytes()
    source = gzip.decompress(raw) if page.suffix == ".gz" else raw
    text = ""
    if not source.lstrip().startswith(b".so "):  # a redirect to another page
        done = subprocess.run(
            ["groff", "-mandoc", "-Tutf8", "-P-cbou", "-rLL=100n"],
            input=source,
            capture_output=True,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
            check=False,
        )
        text = done.stdout.decode("utf-8", "replace")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return text


_HEADING = re.compile(r"^[A-Z][A-Z0-9 ,/&()-]+$")
_DASH = re.compile(r"\s[-\u2212\u2010\u2013\u2014]+\s")


def _man_doc(text: str) -> Doc | None:
    """Title, body and description of one rendered page, or None when it has no usable
    NAME line."""
    text = re.sub(r"(\w)\u2010\n\s*(\w)", r"\1\2", text)  # groff's end-of-line hyphenation
    lines = [line.rstrip() for line in text.splitlines()]
    content = [i for i, line in enumerate(lines) if line.strip()]
    if len(content) < 4:
        return None
    lines = lines[content[0] + 1 : content[-1]]  # the running header and footer
    body: list[str] = []
    name: list[str] = []
    section = None
    for line in lines:
        if line and not line[0].isspace() and _HEADING.match(line):
            section = line.strip()
            if section != "NAME":
                body.append(f"\n## {section.title()}\n")
            continue
        if section == "NAME":
            name.append(line.strip())
        else:
            body.append(line.strip())
    joined = " ".join(part for part in name if part)
    split = _DASH.split(joined, maxsplit=1)
    if len(split) != 2 or len(split[1].split()) < 2:
        return None
    title, description = split[0].strip(), split[1].strip().rstrip(".")
    text_body = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip()
    if len(text_body) < 200 or not title:
        return None
    return Doc(title[:200], text_body, description)


def man_corpus() -> list[Doc]:
    pages = [
        page
        for section in MAN_SECTIONS
        for page in sorted((MAN_ROOT / f"man{section}").glob("*"))
        if page.is_file() and not page.is_symlink() and not page.name.startswith("gcloud")
    ]
    with ThreadPoolExecutor(2) as pool:
        texts = list(pool.map(_render, pages))
    docs = [doc for doc in map(_man_doc, texts) if doc is not None]
    seen: set[str] = set()
    unique = []
    for doc in docs:  # the same page installed twice (e.g. under two names)
        if doc.body not in seen:
            seen.add(doc.body)
            unique.append(doc)
    return unique


def pydoc_corpus() -> list[Doc]:
    import pydoc_data.topics as topics

    docs = []
    for name, text in sorted(topics.topics.items()):
        lines = text.strip().splitlines()
        if len(lines) < 3:
            continue
        heading = lines[0].replace('"', "").strip()
        docs.append(Doc(name, "\n".join(lines[2:]).strip(), heading))
    return docs


class Asked(NamedTuple):
    kind: str
    query: str
    relevant: int  # index into the corpus
    half: str  # "dev" or "test"


def queries(docs: list[Doc], per_kind: int | None = None) -> list[Asked]:
    """Every description asked once (unless shared) and every title; `per_kind` keeps a
    seeded sample of that many of each."""
    rng = random.Random(SEED)
    counts: dict[str, int] = {}
    for doc in docs:
        key = doc.description.casefold()
        counts[key] = counts.get(key, 0) + 1
    titles: dict[str, int] = {}
    for doc in docs:
        titles[doc.title.casefold()] = titles.get(doc.title.casefold(), 0) + 1
    asked: list[Asked] = []
    for kind in ("description", "title", "passage words"):
        picked = []
        for i, doc in enumerate(docs):
            if kind == "description" and counts[doc.description.casefold()] == 1:
                picked.append((doc.description, i))
            elif kind == "title" and titles[doc.title.casefold()] == 1:
                picked.append((doc.title, i))
            elif kind == "passage words":
                sampled = _passage_words(docs, i, rng)
                if sampled is not None:
                    picked.append((sampled, i))
        if per_kind is not None and len(picked) > per_kind:
            picked = sorted(rng.sample(picked, per_kind), key=lambda p: p[1])
        for query, i in picked:
            asked.append(Asked(kind, query, i, "dev" if rng.random() < 0.5 else "test"))
    return asked


def _passage_words(docs: list[Doc], i: int, rng: random.Random) -> str | None:
    """The previous derivation: 8 words of the middle paragraph (of 12+ words) of the note's
    own body, in order, then 2 words of another note; None when the note has no such
    paragraph."""
    from notes_server.store.search_terms import STOP_WORDS

    paragraphs = [p for p in re.split(r"\n\s*\n", docs[i].body) if len(p.split()) >= 12]
    if not paragraphs:
        return None
    middle = paragraphs[len(paragraphs) // 2]
    found = [w for w in re.findall(r"[A-Za-z]{3,}", middle) if w.lower() not in STOP_WORDS]
    if len(found) < 8:
        return None
    picked = sorted(rng.sample(range(len(found)), 8))
    other = docs[rng.choice([j for j in range(len(docs)) if j != i])].body
    noise = rng.sample(re.findall(r"[A-Za-z]{4,}", other) or ["zzzz"], 2)
    return " ".join([found[j] for j in picked] + noise)


class Lists(NamedTuple):
    """One query's ranked lists, cut at LIST_DEPTH: keyword seqs, semantic (seq, similarity)
    by best passage (max) and by the mean over the note's passages, how many first keyword hits
    hold every word, and the server's title pins."""

    kw: list[int]
    sem: list[tuple[int, float]]
    mean: list[tuple[int, float]]
    top2: list[tuple[int, float]]  # the mean of the note's two best passages
    pinned: int
    pins: list[int]
    kw_matched: list[float]  # per keyword hit: how many of the query's content words it holds
    kw_share: list[float]  # the same as a share of the query's content words
    # Semantic lists from the query moved toward feedback passages (pseudo-relevance feedback):
    # variant name -> (seq, similarity) by best passage.
    feedback: dict[str, list[tuple[int, float]]]
    server: list[int]  # the first 10 of the server's own hybrid.search


# Fusion strategies measured side by side on the same ranked lists: name -> f(lists) -> fused
# seqs. "hybrid" is the server's own.
Strategy = Callable[[Lists], list[int]]


def _strategies() -> dict[str, Strategy]:
    from notes_server.store import hybrid, semantic

    floor = semantic.MIN_SIMILARITY

    def server(q: Lists) -> list[int]:
        return q.server

    def rrf(
        pin: str,
        weight: float = 1.0,
        k: int = 10,
        pool: str = "max",
        cut: float = floor,
        depth: int = LIST_DEPTH,
    ) -> Strategy:
        def run(q: Lists) -> list[int]:
            near = {"max": q.sem, "mean": q.mean, "top2": q.top2}[pool]
            kept = [s for s, sim in near if sim >= cut]
            pinned: int | list[int] = {"all-word": q.pinned, "title": q.pins, "none": 0}[pin]
            fused = hybrid.fuse(q.kw[:depth], kept, pinned, semantic_weight=weight, k=k)
            return [f[0] for f in fused]

        return run

    def union(q: Lists) -> list[int]:
        """Not a fusion: both top 10s, to say what any fusion of these lists could find."""
        both = q.kw[:10] + [s for s, sim in q.sem[:10] if sim >= floor]
        return list(dict.fromkeys(both))

    def lead(gap: int) -> Strategy:
        """Title pins, plus the first keyword hit when it holds `gap` or more content words
        than the second (a clear lexical winner); the rest by RRF k=10."""

        def run(q: Lists) -> list[int]:
            pins = list(q.pins)
            if q.kw and q.kw[0] not in pins:
                first = q.kw_matched[0]
                second = q.kw_matched[1] if len(q.kw) > 1 else 0.0
                if first - second >= gap - 1e-9:
                    pins.append(q.kw[0])
            kept = [s for s, sim in q.sem if sim >= floor]
            return [f[0] for f in hybrid.fuse(q.kw, kept, pins)]

        return run

    def coverage_rrf(q: Lists) -> list[int]:
        """RRF k=10 with each keyword hit weighted by its share of the query's words."""
        scores: dict[int, float] = {}
        for rank, (seq, share) in enumerate(zip(q.kw, q.kw_share, strict=True), start=1):
            scores[seq] = scores.get(seq, 0.0) + share / (10 + rank)
        for rank, (seq, _sim) in enumerate([n for n in q.sem if n[1] >= floor], start=1):
            scores[seq] = scores.get(seq, 0.0) + 1.0 / (10 + rank)
        order = sorted(scores, key=lambda s: (-scores[s], s))
        top = [s for s in q.pins if s in scores]
        return top + [s for s in order if s not in set(top)]

    def convex(weight: float) -> Strategy:
        """Title pins, then share of the query's words held + weight x the semantic
        similarity rescaled from [floor, 1] to [0, 1] (0 when below the floor)."""

        def run(q: Lists) -> list[int]:
            scores = dict(zip(q.kw, q.kw_share, strict=True))
            for seq, sim in q.sem:
                if sim >= floor:
                    scores[seq] = scores.get(seq, 0.0) + weight * (sim - floor) / (1 - floor)
            order = sorted(scores, key=lambda s: (-scores[s], s))
            top = [s for s in q.pins if s in scores]
            return top + [s for s in order if s not in set(top)]

        return run

    out: dict[str, Strategy] = {"hybrid": server}
    out["(not a fusion) either top 10"] = union
    for gap in (1, 2, 3):
        out[f"rrf k=10 title pin + lead pin gap {gap}"] = lead(gap)
    out["rrf k=10 coverage-weighted keyword, title pin"] = coverage_rrf
    for weight in (0.25, 0.5, 1.0):
        out[f"convex share + {weight} x semantic, title pin"] = convex(weight)
    out["rrf k=10 all-word pinned (before)"] = rrf("all-word")
    out["rrf k=10 unpinned"] = rrf("none")
    for k in (10, 30, 60):
        out[f"rrf k={k} title pinned"] = rrf("title", k=k)
    for weight in (0.5, 0.75, 1.25, 1.5, 2.0):
        out[f"rrf k=10 title pinned semantic x{weight}"] = rrf("title", weight)
    for cut in (0.0, 0.2):
        out[f"rrf k=10 title pinned mean-pooled floor {cut}"] = rrf("title", pool="mean", cut=cut)
        out[f"rrf k=10 title pinned max-pooled floor {cut}"] = rrf("title", cut=cut)
    for weight in (0.75, 1.5):
        out[f"rrf k=10 title pinned mean-pooled floor 0.0 x{weight}"] = rrf(
            "title", weight, pool="mean", cut=0.0
        )
    for cut in (0.0, 0.35):
        out[f"rrf k=10 title pinned top-2-passage mean floor {cut}"] = rrf(
            "title", pool="top2", cut=cut
        )
    for cut_at in (20, 50):
        out[f"rrf k=10 title pinned keyword cut at {cut_at}"] = rrf("title", depth=cut_at)

    def feedback(name: str, k: int = 10, three: bool = False) -> Strategy:
        """Title pins, then RRF of the keyword list and the feedback list (`three`: and the
        plain semantic list too)."""

        def run(q: Lists) -> list[int]:
            moved = [s for s, sim in q.feedback.get(name, q.sem) if sim >= floor]
            if not three:
                return [f[0] for f in hybrid.fuse(q.kw, moved, q.pins, k=k)]
            plain = [s for s, sim in q.sem if sim >= floor]
            scores: dict[int, float] = {}
            for ranked in (q.kw, plain, moved):
                for rank, seq in enumerate(ranked, start=1):
                    scores[seq] = scores.get(seq, 0.0) + 1.0 / (k + rank)
            order = sorted(scores, key=lambda s: (-scores[s], s))
            top = [s for s in q.pins if s in scores]
            return top + [s for s in order if s not in set(top)]

        return run

    for name in FEEDBACK_NAMES:
        out[f"rrf k=10 title pinned, feedback {name}"] = feedback(name)
        out[f"rrf k=20 title pinned, feedback {name}"] = feedback(name, k=20)
        out[f"rrf k=10 title pinned, 3 lists, feedback {name}"] = feedback(name, three=True)
    return out


FEEDBACK_DEPTHS = (3, 5)
FEEDBACK_WEIGHTS = (0.5, 0.75)
FEEDBACK_NAMES = [
    f"{source} top {m} x{beta}"
    for source in ("keyword",)
    for m in FEEDBACK_DEPTHS
    for beta in FEEDBACK_WEIGHTS
]


def _feedback_lists(
    matrix: Any,
    seqs: list[int],
    vector: Any,
    best_row: dict[int, int],
    sources: dict[str, list[int]],
) -> dict[str, list[tuple[int, float]]]:
    """Rocchio-style pseudo-relevance feedback: the query vector plus beta x the mean of the
    best passages (`best_row`: each note's best row for the query) of the first m hits of a
    source list, renormalized, ranked again."""
    import numpy as np

    from notes_server.store import semantic

    out: dict[str, list[tuple[int, float]]] = {}
    for source, ranked in sources.items():
        for m in FEEDBACK_DEPTHS:
            rows = [best_row[s] for s in ranked[:m] if s in best_row]
            if not rows:
                continue
            centroid = matrix[rows].mean(axis=0)
            for beta in FEEDBACK_WEIGHTS:
                moved = vector + beta * centroid
                moved = moved / np.linalg.norm(moved)
                again = semantic.best_per_note(seqs, matrix @ moved)
                out[f"{source} top {m} x{beta}"] = [(s, sim) for s, sim, _ in again][:LIST_DEPTH]
    return out


def _candidate_embedder() -> Any:
    """Another model to measure in the server's place: $RETRIEVAL_EMBEDDER = FILE.py:CLASS, a
    class with `model` (a name) and `embed(texts) -> unit float32 rows`."""
    spec = os.environ.get("RETRIEVAL_EMBEDDER")
    if not spec:
        return None
    import importlib.util

    path, _, name = spec.rpartition(":")
    loaded = importlib.util.spec_from_file_location("candidate_embedder", path)
    assert loaded is not None and loaded.loader is not None, spec
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return getattr(module, name)()


def evaluate(corpus_name: str = "man", per_kind: int | None = 600) -> dict[str, Any]:
    import numpy as np

    from notes_server.store import embedding, hybrid, indexer, migrate, notes, search, semantic
    from notes_server.store.engine import make_engine, read_tx, write_tx
    from notes_server.store.search_rank import complete
    from notes_server.store.search_terms import parse
    from notes_server.tools.services import utc_now

    started = time.perf_counter()
    docs = man_corpus() if corpus_name == "man" else pydoc_corpus()
    asked = queries(docs, per_kind)
    stats: dict[str, Any] = {
        "corpus": corpus_name,
        "notes": len(docs),
        "queries": len(asked),
        "corpus_s": time.perf_counter() - started,
    }
    workspace = "file:///bench/retrieval"
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'eval.db'}")
        migrate.upgrade(engine)
        seq_of: dict[int, int] = {}
        seq_by_id: dict[str, int] = {}
        with write_tx(engine) as conn:
            for i, doc in enumerate(docs):
                note = notes.insert_note(
                    conn, workspace=workspace, path=f"n{i}.md", title=doc.title, body=doc.body,
                    now=utc_now(),
                )  # fmt: skip
                seq_of[i] = conn.exec_driver_sql(
                    "SELECT seq FROM notes WHERE id = ?", (note.id,)
                ).scalar_one()
                seq_by_id[note.id] = seq_of[i]
        embedder = _candidate_embedder()
        if embedder is None and embedding.installed():
            embedder = embedding.Embedder()
        if embedder is not None:
            started = time.perf_counter()
            stats["passages"] = indexer.drain(engine, embedder)
            stats["index_s"] = time.perf_counter() - started
        lists: list[tuple[Asked, Lists]] = []
        timings: dict[str, list[float]] = {}
        with read_tx(engine) as conn:
            store = search.store(conn)
            assert isinstance(store, search.RankedSearch)
            matrix = seqs = None
            if embedder is not None:
                seqs, matrix = semantic.scope_matrix(
                    conn, workspace, embedder.model, include_archived=False
                )
                note_ids, row_note = np.unique(
                    np.asarray(seqs, dtype=np.int64), return_inverse=True
                )
                per_note = np.bincount(row_note).astype(np.float64)
                first_row = np.concatenate(([0], np.cumsum(per_note)[:-1])).astype(np.int64)
            titles = {seq_of[i]: doc.title for i, doc in enumerate(docs)}
            for item in asked:
                parsed = parse(item.query)
                t0 = time.perf_counter()
                ranked = (
                    store.ranked(conn, workspace, parsed, include_archived=False)
                    if parsed is not None
                    else []
                )
                timings.setdefault("keyword", []).append(time.perf_counter() - t0)
                pinned = 0
                while pinned < len(ranked) and parsed and complete(parsed, ranked[pinned]):
                    pinned += 1
                kw = [r.seq for r in ranked]
                content = max(1, len(parsed.content)) if parsed else 1
                matched = [int(r.score % 1000) // 20 for r in ranked[:LIST_DEPTH]]
                pins = hybrid.title_pins(parsed, item.query, kw[:pinned], titles) if parsed else []
                near: list[tuple[int, float]] = []
                mean: list[tuple[int, float]] = []
                top2: list[tuple[int, float]] = []
                moved: dict[str, list[tuple[int, float]]] = {}
                if embedder is not None and matrix is not None and seqs is not None:
                    t0 = time.perf_counter()
                    vector = embedder.embed([item.query])[0]
                    sims = matrix @ np.asarray(vector, dtype=np.float32)
                    best = semantic.best_per_note(seqs, sims)
                    near = [(s, sim) for s, sim, _ in best]
                    timings.setdefault("semantic (matrix in memory)", []).append(
                        time.perf_counter() - t0
                    )
                    moved = _feedback_lists(
                        matrix,
                        seqs,
                        np.asarray(vector, dtype=np.float32),
                        {s: row for s, _sim, row in best},
                        {"keyword": kw},
                    )
                    means = np.bincount(row_note, weights=sims) / per_note
                    order = np.lexsort((note_ids, -np.round(means, 6)))[:LIST_DEPTH]
                    mean = [(int(note_ids[i]), float(means[i])) for i in order]
                    by_note = np.lexsort((-sims, row_note))  # each note's passages, best first
                    rank_in = np.arange(len(by_note)) - first_row[row_note[by_note]]
                    best2 = by_note[rank_in < 2]
                    two = np.bincount(row_note[best2], weights=sims[best2]) / np.minimum(
                        per_note, 2
                    )
                    order = np.lexsort((note_ids, -np.round(two, 6)))[:LIST_DEPTH]
                    top2 = [(int(note_ids[i]), float(two[i])) for i in order]
                lists.append(
                    (
                        item,
                        Lists(
                            kw[:LIST_DEPTH],
                            near[:LIST_DEPTH],
                            mean,
                            top2,
                            pinned,
                            pins,
                            [float(m) for m in matched],
                            [m / content for m in matched],
                            moved,
                            [
                                seq_by_id[h.hit.note.id]
                                for h in hybrid.search(
                                    conn,
                                    workspace,
                                    item.query,
                                    "hybrid",
                                    embedder,
                                    include_archived=False,
                                    limit=10,
                                    offset=0,
                                )
                            ]
                            if embedder is not None
                            else [],
                        ),
                    )
                )
        engine.dispose()
    index_of = {seq: i for i, seq in seq_of.items()}
    modes: dict[str, Strategy] = {"keyword": lambda q: q.kw}
    if embedder is not None:
        floor = semantic.MIN_SIMILARITY
        modes["semantic"] = lambda q: [s for s, sim in q.sem if sim >= floor]
        modes["semantic mean-pooled"] = lambda q: [s for s, _ in q.mean]
        modes.update(_strategies())
    table: dict[tuple[str, str, str], tuple[float, float, int]] = {}
    for mode, fuse in modes.items():
        ranks = []
        for item, q in lists:
            # Both lists cut at LIST_DEPTH, for speed: with weights up to 2 and k >= 10, a note
            # past rank 200 in both scores below one at rank 10 in one (3/210 < 1/20).
            depth = 20 if mode.startswith("(not a fusion)") else 10  # both top 10s
            top = [index_of[s] for s in fuse(q)[:depth]]
            ranks.append(top.index(item.relevant) + 1 if item.relevant in top else 0)
        for half in ("dev", "test", "all"):
            for kind in ("description", "title", "passage words"):
                got = [
                    r
                    for (item, *_), r in zip(lists, ranks, strict=True)
                    if item.kind == kind and half in ("all", item.half)
                ]
                if got:
                    recall = sum(1 for r in got if r) / len(got)
                    mrr = sum(1.0 / r for r in got if r) / len(got)
                    table[(mode, half, kind)] = (recall, mrr, len(got))
    stats["table"] = table
    stats["p50_ms"] = {m: sorted(t)[len(t) // 2] * 1000 for m, t in timings.items()}
    stats["model"] = embedder.model if embedder is not None else None
    return stats


def markdown(stats: dict[str, Any], halves: tuple[str, ...] = ("test", "dev")) -> str:
    lines = [
        f"corpus {stats['corpus']}: {stats['notes']} notes, {stats['queries']} queries, "
        f"model {stats['model']}",
        "",
        "| mode | half | query kind | queries | recall@10 | MRR@10 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (mode, half, kind), (recall, mrr, n) in stats["table"].items():
        if half in halves:
            lines.append(f"| {mode} | {half} | {kind} | {n} | {recall:.3f} | {mrr:.3f} |")
    lines += ["", "in-process ranking p50 (same run): " + ", ".join(
        f"{m} {v:.2f} ms" for m, v in stats["p50_ms"].items()
    )]  # fmt: skip
    if "index_s" in stats:
        rate = stats["passages"] / stats["index_s"]
        lines += ["", f"indexing: {stats['passages']} passages in {stats['index_s']:.1f} s "
                  f"({rate:,.0f} passages/s, including the model's first load)"]  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else ("man" if MAN_ROOT.is_dir() else "pydoc")
    print(markdown(evaluate(name, per_kind=None if name == "pydoc" else 600)))
