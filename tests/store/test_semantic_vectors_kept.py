"""Semantic ranking from the vectors a process keeps in memory between searches: every change
that commits (a re-embedded note, an archive, a move, a write through another engine, as another
process would make) is in the next search; the list stops at its depth the same way whichever
path ranked it; a workspace too big to keep ranks the same. Both backends; needs the `semantic`
extra (skipped without it)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from notes_server.store import embedding, indexer, notes, search, semantic, vector_cache
from notes_server.store.engine import make_engine, read_tx, write_tx
from tests import pg_support
from tests.store.seed import insert_notes

pytestmark = pytest.mark.skipif(not embedding.installed(), reason="needs the semantic extra")
NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/mallory/notes"
BODIES = [
    ("Hiring", "the hiring plan for next quarter, two engineers and a designer"),
    ("Garden", "tomatoes, basil and the watering schedule for the summer"),
    ("Recipes", "apple pie with cinnamon, baked for forty minutes"),
]


@pytest.fixture(scope="module")
def embedder() -> embedding.Embedder:
    return embedding.Embedder()


def _change(engine: Engine, note_id: str, **fields: object) -> None:
    with write_tx(engine) as conn:
        note = notes.get_note(conn, MINE, note_id)
        assert note is not None
        assert notes.update_fields(conn, note, now=NOW, **fields) is not None


def _nearest(
    engine: Engine,
    embedder: embedding.Embedder,
    query: str,
    *,
    workspace: str = MINE,
    include_archived: bool = False,
    depth: int = semantic.DEPTH,
) -> list[tuple[str, float, str]]:
    """(note id, similarity, best passage text), best first."""
    vector = embedder.embed([query])[0]
    with read_tx(engine) as conn:
        hits = semantic.semantic_ranked(
            conn, workspace, vector, embedder.model,
            include_archived=include_archived, depth=depth,
        )  # fmt: skip
        ids = {
            s: r.id for s, r in search.notes_by_seq(conn, workspace, [h.seq for h in hits]).items()
        }
        texts = semantic.passage_texts(conn, [h.passage for h in hits])
    return [(ids[h.seq], h.similarity, texts[h.passage][1]) for h in hits]


def test_a_re_embedded_note_is_ranked_by_its_new_text(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    # The note written last holds the highest passage ids: on SQLite its new passages reuse them.
    ids = insert_notes(migrated_engine, MINE, BODIES)
    indexer.drain(migrated_engine, embedder)
    before = _nearest(migrated_engine, embedder, "apple pie cinnamon dessert")
    assert before[0][0] == ids[2] and "cinnamon" in before[0][2]

    _change(migrated_engine, ids[2], body="quarterly budget spreadsheet for the finance team")
    # Searched before the indexer ran: the old vectors are kept after the note's change.
    assert _nearest(migrated_engine, embedder, "apple pie cinnamon dessert")[0][0] == ids[2]
    indexer.drain(migrated_engine, embedder)

    after = _nearest(migrated_engine, embedder, "apple pie cinnamon dessert")
    assert all("cinnamon" not in text for _, _, text in after)
    finance = _nearest(migrated_engine, embedder, "quarterly budget spreadsheet finance")
    assert finance[0][0] == ids[2]
    assert finance[0][2].startswith("quarterly budget spreadsheet")


def test_a_note_archived_after_its_vectors_were_kept_ranks_only_when_archived_are_asked_for(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    ids = insert_notes(migrated_engine, MINE, BODIES)
    indexer.drain(migrated_engine, embedder)
    assert ids[1] in [h[0] for h in _nearest(migrated_engine, embedder, "watering tomatoes")]

    _change(migrated_engine, ids[1], archived=True)

    assert ids[1] not in [h[0] for h in _nearest(migrated_engine, embedder, "watering tomatoes")]
    with_archived = _nearest(migrated_engine, embedder, "watering tomatoes", include_archived=True)
    assert with_archived[0][0] == ids[1]


def test_a_note_moved_to_another_workspace_leaves_the_ranking_of_the_first(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    ids = insert_notes(migrated_engine, MINE, BODIES)
    indexer.drain(migrated_engine, embedder)
    assert _nearest(migrated_engine, embedder, "hiring engineers")[0][0] == ids[0]

    _change(migrated_engine, ids[0], workspace=THEIRS)

    assert ids[0] not in [h[0] for h in _nearest(migrated_engine, embedder, "hiring engineers")]
    theirs = _nearest(migrated_engine, embedder, "hiring engineers", workspace=THEIRS)
    assert [h[0] for h in theirs] == [ids[0]]


def test_notes_embedded_through_another_engine_are_in_the_next_search(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    insert_notes(migrated_engine, MINE, BODIES)
    indexer.drain(migrated_engine, embedder)
    assert not [h for h in _nearest(migrated_engine, embedder, "sailing boat harbour") if
                "harbour" in h[2]]  # fmt: skip

    other = make_engine(migrated_engine.url.render_as_string(hide_password=False))
    try:
        (sailing,) = insert_notes(
            other, MINE, [("Sailing", "the boat stays in the harbour in winter")]
        )
        indexer.drain(other, embedder)
    finally:
        other.dispose()

    assert _nearest(migrated_engine, embedder, "sailing boat harbour")[0][0] == sailing


def test_the_semantic_list_stops_at_its_depth_in_the_order_of_the_whole_list(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    bodies = [(f"Plan {i}", f"the hiring plan, draft {i}, for next quarter") for i in range(12)]
    insert_notes(migrated_engine, MINE, bodies + BODIES)
    indexer.drain(migrated_engine, embedder)
    whole = _nearest(migrated_engine, embedder, "hiring plan next quarter", depth=100)
    assert len(whole) > 5
    for depth in (1, 3, 5):
        assert (
            _nearest(migrated_engine, embedder, "hiring plan next quarter", depth=depth)
            == (whole[:depth])
        )


def test_a_workspace_too_big_to_keep_ranks_the_same_and_is_not_kept(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    insert_notes(migrated_engine, MINE, BODIES)
    indexer.drain(migrated_engine, embedder)
    kept = _nearest(migrated_engine, embedder, "hiring engineers")
    cache = vector_cache.for_engine(migrated_engine)
    assert cache.kept() == 1
    cache.max_bytes = 1
    try:
        insert_notes(
            migrated_engine, THEIRS, [("Elsewhere", "a change: the kept vectors are stale")]
        )
        assert _nearest(migrated_engine, embedder, "hiring engineers") == kept
        assert cache.kept() == 0
    finally:
        cache.max_bytes = vector_cache.MAX_BYTES


def test_a_note_moved_in_after_the_vectors_were_kept_ranks_in_its_new_workspace(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    insert_notes(migrated_engine, MINE, BODIES)
    (sailing,) = insert_notes(
        migrated_engine, THEIRS, [("Sailing", "the boat stays in the harbour in winter")]
    )
    indexer.drain(migrated_engine, embedder)
    assert sailing not in [h[0] for h in _nearest(migrated_engine, embedder, "boat harbour")]

    with write_tx(migrated_engine) as conn:
        note = notes.get_note(conn, THEIRS, sailing)
        assert note is not None
        assert notes.update_fields(conn, note, now=NOW, workspace=MINE) is not None

    # No passage was written (a move is not re-embedded): the change log brings it in.
    assert _nearest(migrated_engine, embedder, "boat harbour")[0][0] == sailing


def test_after_a_few_changes_only_the_changed_notes_are_read_again(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    bodies = [(f"Topic {i}", f"filler note number {i} about nothing much") for i in range(40)]
    ids = insert_notes(migrated_engine, MINE, bodies + BODIES)
    indexer.drain(migrated_engine, embedder)
    cache = vector_cache.for_engine(migrated_engine)
    _nearest(migrated_engine, embedder, "watering tomatoes")
    reads = cache.whole_reads

    _change(migrated_engine, ids[-1], body="quarterly budget spreadsheet for the finance team")
    indexer.drain(migrated_engine, embedder)
    insert_notes(migrated_engine, MINE, [("Sailing", "the boat stays in the harbour in winter")])
    indexer.drain(migrated_engine, embedder)
    _change(migrated_engine, ids[0], archived=True)

    assert _nearest(migrated_engine, embedder, "budget spreadsheet finance")[0][0] == ids[-1]
    assert "Sailing" in _titles(migrated_engine, embedder, "boat harbour")
    assert ids[0] not in [h[0] for h in _nearest(migrated_engine, embedder, "filler note 0")]
    assert cache.whole_reads == reads


def _titles(engine: Engine, embedder: embedding.Embedder, query: str) -> list[str]:
    vector = embedder.embed([query])[0]
    with read_tx(engine) as conn:
        hits = semantic.semantic_ranked(conn, MINE, vector, embedder.model, include_archived=False)
        found = search.notes_by_seq(conn, MINE, [h.seq for h in hits])
    return [found[h.seq].title for h in hits]


def _rows_by_note(scope: vector_cache.ScopeVectors, existing: set[int]) -> dict[int, object]:
    """Each existing note's (passage ids, vector bytes) as the scope holds them."""
    held: dict[int, object] = {}
    for index, seq in enumerate(scope.note_seqs):
        if int(seq) in existing:
            start, end = scope.rows_of(index)
            held[int(seq)] = (scope.ids[start:end].tolist(), scope.matrix[start:end].tobytes())
    return held


def test_the_kept_vectors_stay_equal_to_a_whole_read_through_any_mix_of_changes(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    import random

    rng = random.Random(23)
    words = ["budget", "harbour", "tomatoes", "hiring", "cinnamon", "winter", "design", "engine"]
    mine = insert_notes(
        migrated_engine, MINE, [(f"N{i}", f"{words[i % 8]} note") for i in range(12)]
    )
    theirs = insert_notes(
        migrated_engine, THEIRS, [(f"T{i}", f"{words[i]} there") for i in range(4)]
    )
    indexer.drain(migrated_engine, embedder)
    cache = vector_cache.for_engine(migrated_engine)
    live = {note_id: MINE for note_id in mine} | {note_id: THEIRS for note_id in theirs}

    for step in range(60):
        note_id = rng.choice(sorted(live))
        where = live[note_id]
        action = rng.choice(["body", "move", "archive", "restore", "delete", "create"])
        with write_tx(migrated_engine) as conn:
            note = notes.get_note(conn, where, note_id)
            assert note is not None
            if action == "body":
                text = " ".join(rng.sample(words, 3))
                notes.update_fields(conn, note, now=NOW, body=f"{text} {step}")
            elif action == "move":
                live[note_id] = THEIRS if where == MINE else MINE
                notes.update_fields(conn, note, now=NOW, workspace=live[note_id])
            elif action in ("archive", "restore"):
                notes.update_fields(conn, note, now=NOW, archived=action == "archive")
            elif action == "delete":
                assert notes.delete_note(conn, note)
                del live[note_id]
        if action == "create" or len(live) < 4:
            (new,) = insert_notes(migrated_engine, MINE, [(f"New {step}", rng.choice(words))])
            live[new] = MINE
        if rng.random() < 0.5:
            indexer.drain(migrated_engine, embedder)
        with read_tx(migrated_engine) as conn:
            kept = cache.scope(conn, MINE, embedder.model)
            whole = vector_cache.VectorCache().scope(conn, MINE, embedder.model)
        # Every note in the workspace now (archived too); what the kept scope holds beyond
        # them (a deleted or moved-out note's rows) ranks nothing: the notes table is checked.
        existing = {int(x) for x in whole.note_seqs}
        assert _rows_by_note(kept, existing) == _rows_by_note(whole, existing), (step, action)
    assert cache.whole_reads < 10


def test_a_note_of_several_passages_is_found_by_its_best_passage_not_its_first(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    body = (
        "# Garden\n\ntomatoes, basil and the watering schedule for the summer\n\n"
        "# Baking\n\napple pie with cinnamon, baked for forty minutes\n\n"
        "# Work\n\nthe hiring plan for next quarter, two engineers"
    )
    (note,) = insert_notes(migrated_engine, MINE, [("Mixed", body)])
    indexer.drain(migrated_engine, embedder)

    for query, word in [("apple pie cinnamon", "cinnamon"), ("hiring engineers", "hiring")]:
        (hit,) = _nearest(migrated_engine, embedder, query)
        assert hit[0] == note
        assert word in hit[2] and "tomatoes" not in hit[2]


@pytest.mark.skipif(
    not pg_support.on_postgresql(), reason="SQLite commits one writer at a time, in order"
)
def test_a_move_committing_after_a_later_change_was_read_still_reaches_the_kept_vectors(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    """PostgreSQL: the move takes its change-log sequence first, an unrelated update takes the
    next one and commits, a search keeps the vectors labelled with that later sequence, and
    only then does the move commit."""
    ids = insert_notes(migrated_engine, MINE, BODIES)
    (sailing,) = insert_notes(
        migrated_engine, THEIRS, [("Sailing", "the boat stays in the harbour in winter")]
    )
    indexer.drain(migrated_engine, embedder)
    _nearest(migrated_engine, embedder, "boat harbour")

    with contextlib.ExitStack() as late:
        conn = late.enter_context(write_tx(migrated_engine))
        note = notes.get_note(conn, THEIRS, sailing)
        assert note is not None
        assert notes.update_fields(conn, note, now=NOW, workspace=MINE) is not None
        _change(migrated_engine, ids[0], archived=True)  # a higher sequence, committed first
        assert sailing not in [h[0] for h in _nearest(migrated_engine, embedder, "boat harbour")]
    assert _nearest(migrated_engine, embedder, "boat harbour")[0][0] == sailing


def test_after_a_refresh_every_kept_note_is_found_by_its_seq(
    migrated_engine: Engine, embedder: embedding.Embedder
) -> None:
    # A refresh appends the re-read notes after the kept rows, so the rows are no longer in
    # seq order; looking notes up by seq (hybrid's feedback) must not assume they are. More
    # notes than PostgreSQL's LOG_SLACK, so that there too not every note is read again.
    count = vector_cache.LOG_SLACK + 40
    ids = insert_notes(migrated_engine, MINE, [(f"Topic {i}", f"note {i}") for i in range(count)])
    indexer.drain(migrated_engine, embedder)
    cache = vector_cache.for_engine(migrated_engine)
    _nearest(migrated_engine, embedder, "note")
    reads = cache.whole_reads
    _change(migrated_engine, ids[2], body="re-embedded, so its rows move to the end")
    indexer.drain(migrated_engine, embedder)
    with read_tx(migrated_engine) as conn:
        scope = vector_cache.scope(conn, MINE, embedder.model)
        seq_of = {r[0]: r[1] for r in conn.exec_driver_sql("SELECT id, seq FROM notes")}
    assert cache.whole_reads == reads
    assert list(scope.note_seqs) != sorted(scope.note_seqs)
    wanted = [seq_of[i] for i in ids] + [10**9]
    found = scope.notes_of(wanted)
    assert sorted(int(scope.note_seqs[i]) for i in found) == sorted(seq_of[i] for i in ids)
    assert len(scope.notes_of([])) == 0
