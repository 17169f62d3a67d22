"""Keyword search on both backends (SQLite FTS5 + trigram; PostgreSQL tsvector + pg_trgm):
partial-word ranking, substrings in scripts written without spaces, scope first, bad input.
Runs on whichever backend the suite runs on (NOTES_SERVER_TEST_DB)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, update

from notes_server.store import notes, search
from notes_server.store.engine import read_tx, write_tx
from tests.store.seed import insert_notes

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/mallory/notes"


def _found(
    engine: Engine, query: str, *, workspace: str = MINE, archived: bool = False, limit: int = 50
) -> list[search.SearchHit]:
    with read_tx(engine) as conn:
        return search.search(
            conn, workspace, query, include_archived=archived, limit=limit, offset=0
        )


def _ids(engine: Engine, query: str, **kw: object) -> list[str]:
    return [h.note.id for h in _found(engine, query, **kw)]  # type: ignore[arg-type]


def test_a_long_natural_query_finds_a_note_holding_only_some_of_its_words(
    migrated_engine: Engine,
) -> None:
    (hiring,) = insert_notes(migrated_engine, MINE, [("Monday", "We discussed the hiring plan")])
    insert_notes(migrated_engine, MINE, [("Lunch", "soup and bread")])
    assert _ids(migrated_engine, "hiring plan for next quarter") == [hiring]


def test_more_matched_words_rank_first_and_the_exact_phrase_on_top(
    migrated_engine: Engine,
) -> None:
    one, two, phrase, scattered = insert_notes(
        migrated_engine,
        MINE,
        [
            ("a", "the plan for lunch"),
            ("b", "hiring is slow; the plan changed"),
            ("c", "see the hiring plan next week"),
            ("d", "plan: next steps in hiring"),
        ],
    )
    hits = _found(migrated_engine, "hiring plan next")
    assert [h.note.id for h in hits][:2] == [phrase, scattered]
    assert [h.note.id for h in hits][2:] == [two, one]
    scores = [h.rank for h in hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4


def test_stop_words_alone_never_make_a_hit_when_the_query_has_other_words(
    migrated_engine: Engine,
) -> None:
    (budget,) = insert_notes(migrated_engine, MINE, [("q3", "the budget of the team")])
    insert_notes(migrated_engine, MINE, [("x", "the one and the other of the two")])
    assert _ids(migrated_engine, "the budget of the") == [budget]


def test_a_query_of_only_stop_words_still_matches_them(migrated_engine: Engine) -> None:
    (ours,) = insert_notes(migrated_engine, MINE, [("words", "to be or not to be")])
    assert _ids(migrated_engine, "to be") == [ours]


def test_diacritics_are_folded_and_snippets_mark_the_words(migrated_engine: Engine) -> None:
    if migrated_engine.dialect.name != "sqlite":
        pytest.skip(
            "diacritic folding is FTS5's unicode61 tokenizer (tsvector 'simple' keeps them)"
        )
    (cafe,) = insert_notes(migrated_engine, MINE, [("Café", "a crème brûlée at the café")])
    (hit,) = _found(migrated_engine, "cafe creme")
    assert hit.note.id == cafe
    assert "**crème**" in hit.snippet and "**café**" in hit.snippet


CJK = [
    ("会议记录", "今天我们讨论了季度预算和招聘计划", "预算"),
    ("会議メモ", "来週の予算会議について話し合いました", "予算会議"),
    ("회의록", "오늘 우리는 분기 예산과 채용 계획을 논의했습니다", "예산"),
    ("บันทึกการประชุม", "วันนี้เราคุยกันเรื่องงบประมาณและแผนการจ้างงาน", "งบประมาณ"),
]


@pytest.mark.parametrize(("title", "body", "query"), CJK, ids=["zh", "ja", "ko", "th"])
def test_a_word_inside_a_run_of_characters_is_found(
    migrated_engine: Engine, title: str, body: str, query: str
) -> None:
    (ours,) = insert_notes(migrated_engine, MINE, [(title, body)])
    insert_notes(migrated_engine, MINE, [("其他", "完全不同的内容"), ("other", "nothing here")])
    (hit,) = _found(migrated_engine, query)
    assert hit.note.id == ours
    assert "**" in hit.snippet


def test_mixed_script_notes_match_on_either_script(migrated_engine: Engine) -> None:
    (mixed,) = insert_notes(
        migrated_engine, MINE, [("Q3 review", "Budget review: 季度预算 approved by finance")]
    )
    insert_notes(migrated_engine, MINE, [("other", "budget only"), ("其他", "预算以外")])
    assert _ids(migrated_engine, "finance 季度预算")[0] == mixed
    assert mixed in _ids(migrated_engine, "预算")
    assert mixed in _ids(migrated_engine, "budget")


def test_a_title_holding_a_substring_ranks_above_a_body_holding_it(
    migrated_engine: Engine,
) -> None:
    body, title = insert_notes(migrated_engine, MINE, [("笔记", "预算很紧"), ("预算", "很紧")])
    assert _ids(migrated_engine, "预算") == [title, body]


def test_an_attacker_workspace_of_near_duplicates_changes_no_rank_or_score(
    migrated_engine: Engine,
) -> None:
    insert_notes(
        migrated_engine,
        MINE,
        [
            ("hiring plan", "next quarter we hire two"),
            ("budget", "the hiring budget for the quarter"),
            ("plan", "a plan for the offsite"),
            ("预算", "季度预算和招聘计划"),
        ],
    )
    queries = ["hiring plan for next quarter", "plan", "季度预算", "budget hiring"]
    before = {
        q: [(h.note.id, h.rank, h.snippet) for h in _found(migrated_engine, q)] for q in queries
    }
    assert all(before.values())
    dupes = [("hiring plan", "hiring plan next quarter budget 季度预算")] * 60
    dupes += [("plan", "plan plan plan")] * 60
    insert_notes(migrated_engine, THEIRS, dupes)
    after = {
        q: [(h.note.id, h.rank, h.snippet) for h in _found(migrated_engine, q)] for q in queries
    }
    assert after == before
    assert all(len(_found(migrated_engine, q, workspace=THEIRS)) > 0 for q in queries)


def test_archived_notes_are_left_out_before_ranking_unless_asked(
    migrated_engine: Engine,
) -> None:
    live, gone = insert_notes(migrated_engine, MINE, [("plan", "one plan"), ("plan plan", "plan")])
    before = _found(migrated_engine, "plan")
    with write_tx(migrated_engine) as conn:
        conn.execute(update(notes.notes).where(notes.notes.c.id == gone).values(archived=True))
    (only,) = _found(migrated_engine, "plan")
    assert only.note.id == live
    assert [h.note.id for h in _found(migrated_engine, "plan", archived=True)] == [
        h.note.id for h in before
    ]


def test_pages_are_stable_slices_of_one_ranking(migrated_engine: Engine) -> None:
    words = ["alpha", "beta", "gamma", "delta"]
    insert_notes(
        migrated_engine,
        MINE,
        [(words[i % 4], " ".join(words[: 1 + i % 4]) + f" note {i}") for i in range(45)],
    )
    whole = [h.note.id for h in _found(migrated_engine, "alpha beta gamma delta", limit=100)]
    assert len(whole) == 45
    pages: list[str] = []
    with read_tx(migrated_engine) as conn:
        for offset in range(0, 50, 10):
            page = search.search(
                conn,
                MINE,
                "alpha beta gamma delta",
                include_archived=False,
                limit=10,
                offset=offset,
            )
            pages.extend(h.note.id for h in page)
    assert pages == whole


def test_the_section_is_the_heading_above_the_matching_passage(migrated_engine: Engine) -> None:
    body = "# Intro\n\nNothing much.\n\n## Budget\n\nThe travel budget is tight.\n"
    insert_notes(migrated_engine, MINE, [("Doc", body)])
    (hit,) = _found(migrated_engine, "travel")
    assert hit.section == "Budget"
    assert hit.snippet == "The **travel** budget is tight."


BAD = [
    "x" * 10_000,
    "!!! ??? ... ---",
    "the of and to",
    "\ud800 plan \udfff",
    "plan\x00budget",
    "🎉🎉 plan 🎉",
    '"NEAR( OR * AND ) title:',
    "' <-> ! & | :*",
]


@pytest.mark.parametrize("query", BAD, ids=range(len(BAD)))
def test_hostile_queries_answer_a_result(migrated_engine: Engine, query: str) -> None:
    insert_notes(migrated_engine, MINE, [("plan", "the budget plan of the team")])
    hits = _found(migrated_engine, query)
    assert all(h.note.workspace == MINE for h in hits)
    if any(w in query for w in ("plan", "the")):
        assert len(hits) == 1


def test_a_short_page_is_the_head_of_the_whole_ranking_across_equal_scores(
    migrated_engine: Engine,
) -> None:
    # Many notes share each score (same words, same title flags): the page is cut inside a
    # group of equal scores, and ties go by age on every page.
    rows = [("x", "alpha beta")] * 7 + [("alpha", "beta")] * 5 + [("y", "alpha")] * 9
    rows += [("beta", "nothing else")] * 4
    insert_notes(migrated_engine, MINE, rows)
    whole = _found(migrated_engine, "alpha beta", limit=100)
    assert len(whole) == 25
    for limit in (1, 3, 6, 8, 13):
        head = _found(migrated_engine, "alpha beta", limit=limit)
        assert [(h.note.id, h.rank) for h in head] == [(h.note.id, h.rank) for h in whole[:limit]]
    every_word = [h for h in whole if h.rank >= 40]
    assert len(every_word) == 12


def test_a_tag_filter_pages_the_tagged_notes_in_the_scope_ranking(
    migrated_engine: Engine,
) -> None:
    above = [("plan", "plan for the team")] * 6
    tagged = [("notes", "a plan #keep"), ("plan", "the plan #keep")]
    insert_notes(migrated_engine, MINE, above)
    low, high = insert_notes(migrated_engine, MINE, tagged)
    with read_tx(migrated_engine) as conn:
        ranked = search.search(
            conn, MINE, "plan", include_archived=False, limit=50, offset=0, tags=["keep"]
        )
        first = search.search(
            conn, MINE, "plan", include_archived=False, limit=1, offset=0, tags=["keep"]
        )
        second = search.search(
            conn, MINE, "plan", include_archived=False, limit=1, offset=1, tags=["keep"]
        )
    assert [h.note.id for h in ranked] == [high, low]
    assert [h.note.id for h in first + second] == [high, low]


def test_the_scope_statistics_follow_writes_after_an_earlier_search(
    migrated_engine: Engine,
) -> None:
    # The idf of a word grows with the scope's size: a score computed before new notes were
    # written must not be reused after them (nor after an archive).
    (only,) = insert_notes(migrated_engine, MINE, [("x", "zephyr here"), ("y", "other")])[:1]
    (before,) = _found(migrated_engine, "zephyr")
    insert_notes(migrated_engine, MINE, [("z", f"filler {i}") for i in range(8)])
    (grown,) = _found(migrated_engine, "zephyr")
    assert grown.note.id == only
    assert grown.rank > before.rank
    with write_tx(migrated_engine) as conn:
        conn.execute(update(notes.notes).where(notes.notes.c.title == "z").values(archived=True))
    (shrunk,) = _found(migrated_engine, "zephyr")
    assert shrunk.rank == before.rank


def test_snippets_mark_whole_words_that_start_with_a_term_in_any_case() -> None:
    from notes_server.store.search_rank import snippet
    from notes_server.store.search_terms import parse

    query = parse("plan bud")
    assert query is not None
    text = "Our PLANS: a budget_review, the Budgets and explanation of plan-b (budapest)"

    marked, section = snippet(text, query)

    assert marked == (
        "Our **PLANS**: a **budget**_review, the **Budgets** and explanation of **plan**-b "
        "(**budapest**)"
    )
    assert section is None
