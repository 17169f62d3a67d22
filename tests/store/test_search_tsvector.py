"""PostgreSQL full-text search (migration 0008 + `search_pg.TsvectorSearch`): ranked, prefix
matching, highlighted snippets, exact scoped pages; the same behaviour notes_search has on FTS5.
Runs on the local PostgreSQL server in every run of the suite (skipped without one)."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine, text, update

from notes_server.store import notes, search
from notes_server.store.engine import read_tx, write_tx
from tests.store.seed import insert_notes

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/bob/notes"
WORDS = ["apple", "apricot", "banana", "cherry", "damson", "elder", "fig", "grape"]


def _found(
    engine: Engine, query: str, *, workspace: str = MINE, archived: bool = False, **page: int
) -> list[search.SearchHit]:
    with read_tx(engine) as conn:
        return search.search(
            conn,
            workspace,
            query,
            include_archived=archived,
            limit=page.get("limit", 50),
            offset=page.get("offset", 0),
        )


def test_postgresql_search_ranks_title_matches_above_body_matches(pg_engine: Engine) -> None:
    body_only, title = insert_notes(
        pg_engine, MINE, [("Groceries", "buy an apple today"), ("Apple pie", "bake it")]
    )
    hits = _found(pg_engine, "apple")
    assert [h.note.id for h in hits] == [title, body_only]
    assert hits[0].rank > hits[1].rank > 0


def test_postgresql_search_matches_word_prefixes_and_ranks_every_word_first(
    pg_engine: Engine,
) -> None:
    both, only_one = insert_notes(
        pg_engine, MINE, [("Plan", "apricot jam and cherries"), ("Other", "apricot only")]
    )
    assert {h.note.id for h in _found(pg_engine, "apri")} == {both, only_one}
    assert [h.note.id for h in _found(pg_engine, "apri cherr")] == [both, only_one]
    assert _found(pg_engine, "zzz") == []


def test_postgresql_search_snippets_highlight_the_matched_words(pg_engine: Engine) -> None:
    insert_notes(pg_engine, MINE, [("Note", "first line\nthe damson harvest was early this year")])
    (hit,) = _found(pg_engine, "damson")
    assert "**damson**" in hit.snippet
    assert hit.snippet.count("**") == 2  # one word, marked once


def test_postgresql_search_treats_query_syntax_as_plain_words(pg_engine: Engine) -> None:
    (note,) = insert_notes(pg_engine, MINE, [("Fig", "fig and grape")])
    for query in ["fig & !grape", "fig:* | gra", "'fig'", "fig) (grape", "fig\\ grape"]:
        assert [h.note.id for h in _found(pg_engine, query)] == [note], query
    assert _found(pg_engine, "&|!():*") == []


def test_postgresql_search_follows_updates_and_deletes(pg_engine: Engine) -> None:
    (note_id,) = insert_notes(pg_engine, MINE, [("Elder", "elderflower cordial")])
    with write_tx(pg_engine) as conn:
        conn.execute(
            update(notes.notes).where(notes.notes.c.id == note_id).values(body="grape juice")
        )
    assert [h.note.id for h in _found(pg_engine, "grape")] == [note_id]
    assert [h.note.id for h in _found(pg_engine, "cordial")] == []
    with write_tx(pg_engine) as conn:
        conn.execute(notes.notes.delete().where(notes.notes.c.id == note_id))
    assert _found(pg_engine, "grape") == []


def test_postgresql_search_pages_are_exact_within_a_crowded_scope(pg_engine: Engine) -> None:
    rng = random.Random(4)
    # Another workspace's notes outrank ours; some of ours are archived.
    insert_notes(pg_engine, THEIRS, [("apple", "apple apple")] * 200)
    for _ in range(3):
        bodies = [
            (" ".join(rng.choices(WORDS, k=2)), " ".join(rng.choices(WORDS, k=rng.randint(3, 30))))
            for _ in range(50)
        ]
        insert_notes(pg_engine, MINE, bodies)
    with write_tx(pg_engine) as conn:
        conn.execute(update(notes.notes).where(notes.notes.c.seq % 7 == 0).values(archived=True))
    for query in ["apple", "ap", "banana cherry"]:
        for archived in (False, True):
            everything = _found(pg_engine, query, archived=archived, limit=1000)
            assert everything, query
            assert all(h.note.workspace == MINE for h in everything)
            assert archived or not any(h.note.archived for h in everything)
            ranks = [h.rank for h in everything]
            assert ranks == sorted(ranks, reverse=True)
            pages: list[search.SearchHit] = []
            for offset in range(0, len(everything) + 20, 20):
                pages.extend(_found(pg_engine, query, archived=archived, limit=20, offset=offset))
            assert [h.note.id for h in pages] == [h.note.id for h in everything]


def test_postgresql_search_uses_the_gin_index(pg_engine: Engine) -> None:
    insert_notes(pg_engine, MINE, [("t", f"word{i} common") for i in range(300)])
    with read_tx(pg_engine) as conn:
        conn.execute(text("ANALYZE notes"))
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                text(
                    "EXPLAIN SELECT seq FROM notes"
                    " WHERE search_vector @@ to_tsquery('simple', 'word1:*')"
                )
            )
        )
    assert "ix_notes_search_vector" in plan


def test_a_search_can_be_the_first_thing_a_fresh_process_runs(
    pg_engine: Engine, tmp_path: Path
) -> None:
    # The full-text functions compile only once the PostgreSQL dialect registered them: a
    # process whose first import is the search module must still search.
    insert_notes(pg_engine, MINE, [("Fig", "fig jam")])
    script = (
        "import sys\n"
        "from sqlalchemy import create_engine\n"
        "from notes_server.store import search\n"
        "engine = create_engine(sys.argv[1])\n"
        "with engine.connect() as conn:\n"
        f"    hits = search.search(conn, {MINE!r}, 'fig', include_archived=False, limit=5,"
        " offset=0)\n"
        "print(len(hits), hits[0].snippet)\n"
    )
    url = pg_engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "-c", script, url], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 **fig** jam\n"
