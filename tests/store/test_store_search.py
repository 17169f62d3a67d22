"""Ranked search: the FTS5 top-k statement answers exactly what ranking the scope's own
matches would, whichever workspaces and archived notes crowd the best global matches."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, update

from notes_server.store import notes, search
from notes_server.store.engine import read_tx, write_tx

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/bob/notes"
pytestmark = pytest.mark.sqlite_only(
    "FTS5's top-k plans; PostgreSQL's search is tested in test_search_tsvector.py"
)
WORDS = ["apple", "apricot", "banana", "cherry", "damson", "elder", "fig", "grape"]


def _reference(
    engine: Engine, workspace: str, match: str, include_archived: bool
) -> list[tuple[str, str, float]]:
    """Every in-scope match ranked by the full join: (id, snippet, score), best first."""
    with read_tx(engine) as conn:
        rows = search._RANKED[include_archived].all(
            conn, {"workspace": workspace, "match": match, "limit": 10_000, "offset": 0}
        )
    return [(r[0], r[10], r[11]) for r in rows]


def _found(
    engine: Engine, workspace: str, query: str, include_archived: bool, limit: int, offset: int
) -> list[tuple[str, str, float]]:
    with read_tx(engine) as conn:
        hits = search.search(
            conn, workspace, query, include_archived=include_archived, limit=limit, offset=offset
        )
    return [(h.note.id, h.snippet, h.rank) for h in hits]


def _insert(engine: Engine, workspace: str, bodies: list[tuple[str, str]]) -> list[str]:
    ids = []
    with write_tx(engine) as conn:
        for title, body in bodies:
            path = f"n/{notes.new_note_id()}.md"
            note = notes.insert_note(
                conn, workspace=workspace, path=path, title=title, body=body, now=NOW
            )
            ids.append(note.id)
    return ids


class _Refused:
    """Stands in for a statement table that the search must not use."""

    def __getitem__(self, include_archived: bool) -> Any:
        raise AssertionError("this statement was not expected")


def test_pages_of_the_top_k_search_equal_the_full_ranking(migrated_engine: Engine) -> None:
    rng = random.Random(4)
    for workspace in (MINE, THEIRS):
        bodies = []
        for _ in range(150):
            title = " ".join(rng.choices(WORDS, k=2))
            bodies.append((title, " ".join(rng.choices(WORDS, k=rng.randint(3, 30)))))
        _insert(migrated_engine, workspace, bodies)
    with write_tx(migrated_engine) as conn:
        conn.execute(update(notes.notes).where(notes.notes.c.seq % 7 == 0).values(archived=True))
    for query in ["apple", "ap", "banana cherry", "fig grape elder", "zzz"]:
        match = search.fts_query(query)
        assert match is not None
        for include_archived in (False, True):
            expected = _reference(migrated_engine, MINE, match, include_archived)
            pages: list[tuple[str, str, float]] = []
            for offset in range(0, len(expected) + 20, 20):
                pages.extend(_found(migrated_engine, MINE, query, include_archived, 20, offset))
            assert pages == expected
            assert len({hit[0] for hit in pages}) == len(pages)


@pytest.mark.parametrize("crowd", [10, 40, 300])
def test_a_workspace_crowded_out_of_the_global_top_still_gets_its_own_best_matches(
    migrated_engine: Engine, crowd: int
) -> None:
    # The other workspace's notes all outrank ours (title matches weigh 10x): the first k
    # global matches hold none of ours, so the search must look further (or rank in scope).
    _insert(migrated_engine, THEIRS, [("apple", "apple apple")] * crowd)
    mine = _insert(migrated_engine, MINE, [("other", f"an apple and {w}") for w in WORDS[:5]])
    found = _found(migrated_engine, MINE, "apple", False, 3, 0)
    assert [hit[0] for hit in found] == mine[:3]
    assert all("**apple**" in hit[1] for hit in found)
    assert found == _reference(migrated_engine, MINE, '"apple"*', False)[:3]
    assert (
        _found(migrated_engine, MINE, "apple", False, 3, 3)
        == _reference(migrated_engine, MINE, '"apple"*', False)[3:6]
    )


def test_when_over_fetching_gives_up_the_scope_is_ranked_on_its_own(
    migrated_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "_TOP_K_MAX", 32)
    _insert(migrated_engine, THEIRS, [("apple", "apple")] * 40)
    mine = _insert(migrated_engine, MINE, [("x", "apple pie"), ("y", "apple tart")])
    assert [hit[0] for hit in _found(migrated_engine, MINE, "apple", False, 20, 0)] == mine


def test_archived_notes_crowding_the_top_are_skipped_unless_asked(
    migrated_engine: Engine,
) -> None:
    archived = _insert(migrated_engine, MINE, [("apple", "apple apple")] * 50)
    live = _insert(migrated_engine, MINE, [("plain", "one apple")])
    with write_tx(migrated_engine) as conn:
        conn.execute(
            update(notes.notes).where(notes.notes.c.id.in_(archived)).values(archived=True)
        )
    assert [h[0] for h in _found(migrated_engine, MINE, "apple", False, 5, 0)] == live
    with_archived = _found(migrated_engine, MINE, "apple", True, 100, 0)
    assert [h[0] for h in with_archived] == [*archived, *live]


def test_the_top_k_statement_probes_the_kept_rows_through_an_index(
    migrated_engine: Engine,
) -> None:
    # The second walk over the matches looks each one up among the k kept rows: through an
    # index, never by scanning them (k * matches comparisons on a deep page).
    with read_tx(migrated_engine) as conn:
        compiled = search._TOP_K[False].statement.compile(dialect=conn.dialect)
        params = compiled.construct_params({"match": '"a"*', "k": 21, "workspace": MINE})
        ordered = [params[name] for name in compiled.positiontup or []]
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + str(compiled), tuple(ordered)).all()
    details = [str(row[-1]) for row in plan]
    assert any(d.startswith("SEARCH top USING") and "INDEX" in d for d in details), details
    assert "SEARCH n USING INTEGER PRIMARY KEY (rowid=?) LEFT-JOIN" in details, details


def test_a_partly_crowded_top_is_widened_once_without_the_plain_join(
    migrated_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Half of the first 20 global matches are theirs: one wider top-k pass, sized from the
    # in-scope share it saw, answers exactly; the plain join is not needed.
    _insert(migrated_engine, THEIRS, [("apple", "apple apple")] * 10)
    mine = _insert(migrated_engine, MINE, [("other", f"one apple, note {i}") for i in range(30)])
    expected = _reference(migrated_engine, MINE, '"apple"*', False)[:20]

    monkeypatch.setattr(search, "_RANKED", _Refused())
    found = _found(migrated_engine, MINE, "apple", False, 20, 0)
    assert found == expected
    assert {hit[0] for hit in found} <= set(mine)


def test_a_crowded_out_scope_goes_straight_to_the_plain_join_for_a_while(
    migrated_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "_CROWDED_SKIPS", 2)
    _insert(migrated_engine, THEIRS, [("apple", "apple apple")] * 40)
    _insert(migrated_engine, MINE, [("other", "an apple")] * 3)
    with read_tx(migrated_engine) as conn:
        first = search.search(conn, MINE, "apple", include_archived=False, limit=2, offset=0)
        monkeypatch.setattr(search, "_TOP_K", _Refused())
        # The next two searches of this scope skip the top-k statement, same answers.
        for _ in range(2):
            again = search.search(conn, MINE, "apple", include_archived=False, limit=2, offset=0)
            assert [h.note.id for h in again] == [h.note.id for h in first]
        # Then the top-k path is tried again; other scopes never skipped it.
        with pytest.raises(AssertionError, match="not expected"):
            search.search(conn, MINE, "apple", include_archived=False, limit=2, offset=0)
        with pytest.raises(AssertionError, match="not expected"):
            search.search(conn, THEIRS, "apple", include_archived=False, limit=2, offset=0)
    assert len(first) == 2
