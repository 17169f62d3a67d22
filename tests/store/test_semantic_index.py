"""The semantic index on both backends: the outbox indexer under concurrent writes, deletes
and updates; scope isolation of semantic neighbours; fusion determinism. Needs the
`semantic` extra (skipped without it)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, delete, func, select, update

from notes_server.store import embedding, hybrid, indexer, notes, semantic
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import outbox_table, passages_table
from notes_server.store.search_terms import parse
from tests.store.seed import insert_notes

pytestmark = pytest.mark.skipif(not embedding.installed(), reason="needs the semantic extra")
NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/mallory/notes"


@pytest.fixture(scope="module")
def embedder() -> embedding.Embedder:
    return embedding.Embedder()


def _embedded(engine: Engine) -> dict[int, int]:
    """seq -> passages, and the outbox must be empty."""
    with read_tx(engine) as conn:
        assert conn.execute(select(func.count()).select_from(outbox_table)).scalar_one() == 0
    return _embedded_rows(engine)


def _seqs(engine: Engine) -> dict[str, int]:
    with read_tx(engine) as conn:
        return {r[0]: r[1] for r in conn.execute(select(notes.notes.c.id, notes.notes.c.seq))}


class _Pausing:
    """An embedder that lets the test change notes between the claim and the write."""

    def __init__(self, inner: embedding.Embedder, during: object) -> None:
        self.inner, self.model, self.during, self.calls = inner, inner.model, during, 0

    def embed(self, texts: list[str]) -> object:
        self.calls += 1
        if self.calls == 1:
            self.during()  # type: ignore[operator]
        return self.inner.embed(texts)


def test_every_note_ends_embedded_once_under_concurrent_writes(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    stop = threading.Event()
    workers = [
        threading.Thread(target=indexer.watch, args=(migrated_engine, embedder, stop, 0.01))
        for _ in range(2)
    ]
    for w in workers:
        w.start()
    try:
        for i in range(10):
            insert_notes(
                migrated_engine, MINE, [(f"note {i}.{j}", f"# H\n\nbody {i} {j}") for j in range(5)]
            )
    finally:
        stop.set()
        for w in workers:
            w.join()
    indexer.drain(migrated_engine, embedder)
    done = _embedded(migrated_engine)
    assert set(done) == set(_seqs(migrated_engine).values())
    assert set(done.values()) == {1}


def test_a_note_updated_during_embedding_is_embedded_again(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    (note_id,) = insert_notes(migrated_engine, MINE, [("Old", "old body text")])

    def change() -> None:
        with write_tx(migrated_engine) as conn:
            conn.execute(
                update(notes.notes)
                .where(notes.notes.c.id == note_id)
                .values(body="new body text", version=notes.notes.c.version + 1)
            )

    indexer.drain(migrated_engine, _Pausing(embedder, change))
    _embedded(migrated_engine)
    with read_tx(migrated_engine) as conn:
        texts = conn.execute(select(passages_table.c.text)).scalars().all()
    assert texts == ["new body text"]


def test_no_vector_survives_a_note_deleted_during_embedding(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    (gone,) = insert_notes(migrated_engine, MINE, [("Gone", "soon deleted")])
    indexer.drain(migrated_engine, embedder)
    insert_notes(migrated_engine, MINE, [("Kept", "stays")])

    def remove() -> None:
        with write_tx(migrated_engine) as conn:
            conn.execute(delete(notes.notes).where(notes.notes.c.id == gone))

    with write_tx(migrated_engine) as conn:
        semantic.enqueue(conn)
    indexer.drain(migrated_engine, _Pausing(embedder, remove))
    done = _embedded(migrated_engine)
    assert set(done) == {_seqs(migrated_engine)[i] for i in _seqs(migrated_engine)}


def test_semantic_neighbours_in_another_workspace_change_no_rank_or_score(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    insert_notes(
        migrated_engine,
        MINE,
        [
            ("Finance sync", "Q3 spend review with the finance team"),
            ("Hiring", "the hiring plan for next quarter"),
            ("Recipes", "apple pie with cinnamon"),
        ],
    )
    indexer.drain(migrated_engine, embedder)

    def found() -> list[tuple[str, float, tuple[str, ...]]]:
        with read_tx(migrated_engine) as conn:
            hits = hybrid.search(
                conn, MINE, "budget meeting finance", "hybrid", embedder,
                include_archived=False, limit=20, offset=0,
            )  # fmt: skip
        return [(h.hit.note.id, h.hit.rank, h.matched_by) for h in hits]

    before = found()
    assert before and "semantic" in before[0][2]
    insert_notes(
        migrated_engine, THEIRS, [("Finance sync", "Q3 spend review, finance budget")] * 40
    )
    indexer.drain(migrated_engine, embedder)
    assert found() == before


def test_fusion_is_a_pure_function_of_the_two_lists() -> None:
    keyword, nearest = [5, 3, 9, 1], [3, 7, 5]
    first = hybrid.fuse(keyword, nearest)
    assert first == hybrid.fuse(list(keyword), list(nearest))
    assert [seq for seq, _, _ in first] == [3, 5, 7, 9, 1]
    assert dict((s, m) for s, _, m in first)[3] == ("keyword", "semantic")
    # Equal fused scores are ordered by seq, whichever list came first.
    assert [s for s, _, _ in hybrid.fuse([2], [1])] == [1, 2]


def test_keyword_hits_holding_every_word_stay_on_top_of_the_fusion() -> None:
    fused = hybrid.fuse([4, 8, 2], [2, 9, 8], pinned=1)
    assert [seq for seq, _, _ in fused] == [4, 2, 8, 9]
    assert fused[0][1] > 1 > fused[1][1]


def test_only_title_pins_stay_on_top_and_the_rest_is_fused() -> None:
    fused = hybrid.fuse([4, 8, 2], [2, 9, 8], pinned=[8])
    assert [seq for seq, _, _ in fused] == [8, 2, 4, 9]
    assert fused[0][1] > 1 > fused[1][1]
    assert fused == hybrid.fuse([4, 8, 2], [2, 9, 8], pinned=(8,))
    # A pin that keyword search did not find is not a hit at all.
    assert [seq for seq, _, _ in hybrid.fuse([4], [2], pinned=[7])] == [2, 4]


def test_a_title_holds_the_query_by_whole_folded_words() -> None:
    def holds(query: str, title: str) -> bool:
        parsed = parse(query)
        assert parsed is not None
        return hybrid.title_holds(parsed, query, title)

    assert holds("cafe budget", "Budget of the Café")
    assert holds("the budget", "Budget")  # stop words need not be there
    assert not holds("budget meeting", "Budgeting")
    assert not holds("budget meeting", "Meeting notes")
    assert holds("gzip, gunzip, zcat", "gzip, gunzip, zcat")
    assert holds("预算", "季度预算")


def test_a_note_titled_by_the_query_stays_first_in_hybrid_search(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    mentions = [
        (f"Minutes {i}", f"The budget meeting ran long; budget meeting {i} notes.")
        for i in range(8)
    ]
    ids = insert_notes(
        migrated_engine, MINE, [*mentions, ("Budget meeting", "Agenda: Q3 numbers.")]
    )
    indexer.drain(migrated_engine, embedder)
    with read_tx(migrated_engine) as conn:
        runs = [
            hybrid.search(
                conn,
                MINE,
                "budget meeting",
                "hybrid",
                embedder,
                include_archived=False,
                limit=20,
                offset=0,
            )
            for _ in range(2)
        ]
    hits = runs[0]
    assert hits[0].hit.note.id == ids[-1]
    assert hits[0].hit.rank > 1
    # Notes that only mention every word in their body are fused, not pinned.
    assert all(h.hit.rank < 1 for h in hits[1:])
    assert {h.hit.note.id for h in hits} == set(ids)
    assert [(h.hit.note.id, h.hit.rank) for h in runs[1]] == [
        (h.hit.note.id, h.hit.rank) for h in hits
    ]


HOSTILE = [
    "x" * 10_000,
    "!!! ??? ... ---",
    "the of and to",
    "\ud800 plan \udfff",
    "\udfff",
    "plan\x00budget",
    "🎉🎉 plan 🎉",
    "🎉",
    '"NEAR( OR * AND ) title:',
]


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_answer_a_result_by_meaning_too(
    migrated_engine: Engine, embedder: embedding.Embedder, query: str, mode: str
) -> None:
    insert_notes(migrated_engine, MINE, [("plan", "the budget plan of the team")])
    insert_notes(migrated_engine, THEIRS, [("plan", "the budget plan of the team")])
    indexer.drain(migrated_engine, embedder)
    with read_tx(migrated_engine) as conn:
        hits = hybrid.search(
            conn, MINE, query, mode, embedder, include_archived=False, limit=10, offset=0
        )
    assert all(h.hit.note.workspace == MINE for h in hits)
    assert all(set(h.matched_by) <= {"keyword", "semantic"} for h in hits)
    if mode == "hybrid" and "plan" in query:
        assert [h.hit.note.title for h in hits] == ["plan"]


def test_a_watching_indexer_wakes_on_a_write_of_its_process(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    """The poll for other processes is an hour: only the write signal can wake it in time."""
    embedded = [threading.Event(), threading.Event()]

    class Telling:
        model = embedder.model
        calls = 0

        def embed(self, texts: list[str]) -> object:
            vectors = embedder.embed(texts)
            embedded[min(Telling.calls, 1)].set()
            Telling.calls += 1
            return vectors

    insert_notes(migrated_engine, MINE, [("First", "embedded by the first drain")])
    background = indexer.start_background(migrated_engine, Telling(), 3600.0)
    try:
        assert embedded[0].wait(60), "the first drain embedded nothing"
        insert_notes(migrated_engine, MINE, [("Woken", "a write wakes the indexer")])
        assert embedded[1].wait(60), "the indexer was not woken by the write"
    finally:
        background.stop()
    done = _embedded(migrated_engine)
    assert sorted(done.values()) == [1, 1]


class _Directions:
    """An embedder of hand-set directions, so a test says exactly what is near what: the query
    "alpha" on its own axis, texts that hold "alpha" between it and the "gamma" texts, the
    rest on a third axis."""

    model = "test-directions"

    def embed(self, texts: list[str]) -> object:
        import numpy as np

        def one(text: str) -> tuple[float, float, float]:
            if text == "alpha":
                return (1.0, 0.0, 0.0)
            if "alpha" in text.lower():
                return (0.2, 0.98, 0.0)
            return (0.0, 1.0, 0.0) if "gamma" in text.lower() else (0.0, 0.0, 1.0)

        return np.asarray([one(t) for t in texts], dtype=np.float32).reshape(len(texts), 3)


def _hybrid_ids(engine: Engine, workspace: str, embedder: object) -> dict[str, tuple[str, ...]]:
    with read_tx(engine) as conn:
        hits = hybrid.search(
            conn, workspace, "alpha", "hybrid", embedder,
            include_archived=False, limit=20, offset=0,
        )  # fmt: skip
    return {h.hit.note.id: h.matched_by for h in hits}


def test_hybrid_finds_the_neighbours_of_its_keyword_hits(migrated_engine: Engine) -> None:
    # The query's own vector is orthogonal to "gamma" (cosine 0, under the floor); the keyword
    # hit "alpha" lies near "gamma", so the query moved halfway toward it reaches "gamma"
    # (cosine 0.41).
    alpha, gamma, other = insert_notes(
        migrated_engine,
        MINE,
        [("Alpha report", "alpha"), ("Gamma", "gamma"), ("Unrelated", "nothing here")],
    )
    embedder = _Directions()
    indexer.drain(migrated_engine, embedder)
    found = _hybrid_ids(migrated_engine, MINE, embedder)
    assert found[alpha] == ("keyword", "semantic")
    assert found[gamma] == ("semantic",)
    assert other not in found
    with read_tx(migrated_engine) as conn:
        plain = semantic.semantic_ranked(
            conn, MINE, embedder.embed(["alpha"])[0], embedder.model, include_archived=False
        )
    assert _seqs(migrated_engine)[gamma] not in {h.seq for h in plain}


def test_keyword_hits_of_another_workspace_move_no_query(migrated_engine: Engine) -> None:
    # The note that would lead to "gamma" is mallory's: alice's search has no keyword hit,
    # so nothing moves her query and "gamma" stays out of reach.
    insert_notes(migrated_engine, MINE, [("Gamma", "gamma")])
    (theirs,) = insert_notes(migrated_engine, THEIRS, [("Alpha report", "alpha")])
    embedder = _Directions()
    indexer.drain(migrated_engine, embedder)
    assert _hybrid_ids(migrated_engine, MINE, embedder) == {}
    with read_tx(migrated_engine) as conn:
        query = embedder.embed(["alpha"])[0]
        moved = semantic.moved_toward(
            conn, MINE, query, embedder.model, [_seqs(migrated_engine)[theirs]], 1.0
        )
    assert moved.tolist() == query.tolist()
    assert set(_hybrid_ids(migrated_engine, THEIRS, embedder)) == {theirs}


def test_hybrid_search_before_anything_is_embedded_answers_by_keyword(
    migrated_engine: Engine,
) -> None:
    # Keyword hits, and no vectors yet (the indexer has not run): nothing to move toward.
    (alpha,) = insert_notes(migrated_engine, MINE, [("Alpha report", "alpha")])
    assert _hybrid_ids(migrated_engine, MINE, _Directions()) == {alpha: ("keyword",)}


def test_the_indexer_does_not_wait_for_a_note_a_writer_holds(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    """PostgreSQL: a write holding a note's row lock (as one transaction changing many notes
    does) is not waited for, so the indexer cannot close a deadlock with it; the note keeps
    its claim, and a later round embeds it once the write committed a new text."""
    if migrated_engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has no row locks")
    held, free = insert_notes(migrated_engine, MINE, [("Held", "held body"), ("Free", "free")])
    seqs = _seqs(migrated_engine)
    finished = threading.Event()
    held_row = update(notes.notes).where(notes.notes.c.id == held)
    with migrated_engine.connect() as writer:
        # The row lock, uncommitted, by a change that leaves the note's outbox row alone (the
        # claim takes it, then the note's lock is what the indexer meets).
        writer.execute(held_row.values(archived=True))
        indexing = threading.Thread(
            target=lambda: (indexer.drain(migrated_engine, embedder), finished.set())
        )
        indexing.start()
        indexing.join(timeout=60)
        assert finished.is_set(), "the indexer waited for the writer's row lock"
        assert set(_embedded_rows(migrated_engine)) == {seqs[free]}
        writer.execute(held_row.values(body="held, rewritten"))  # frees the kept claim
        writer.commit()
    indexer.drain(migrated_engine, embedder)
    assert _embedded(migrated_engine) == {seqs[held]: 1, seqs[free]: 1}


def _embedded_rows(engine: Engine) -> dict[int, int]:
    with read_tx(engine) as conn:
        rows = conn.execute(
            select(passages_table.c.note_seq, func.count()).group_by(passages_table.c.note_seq)
        ).all()
    return {r[0]: r[1] for r in rows}
