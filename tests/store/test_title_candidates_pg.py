"""Title candidates on PostgreSQL (round 1 of every confirmed action): the PostgreSQL
repository finds exactly what the portable statement finds, in the same order, without sorting
every note of the workspace first. Runs on the local PostgreSQL server in every run of the
suite (skipped without one)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, insert, text

from notes_server.store import notes
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import notes_table

NOW = datetime(2026, 3, 1, 12, 30, 15, tzinfo=UTC)
MINE = "file:///home/alice/notes"
THEIRS = "file:///home/bob/notes"
FILLER = 10_000  # the size at which the portable statement sorted every note
BODY = "lorem ipsum dolor " * 30


def _seed(engine: Engine) -> None:
    titles = [
        ("TPS report", MINE, False),
        ("tps REPORT", MINE, False),  # the same title key as the first
        ("Quarterly TPS report", MINE, False),
        ("TPS report (old)", MINE, True),  # archived
        ("TPS report", THEIRS, False),  # another workspace
        ("Straße notes", MINE, False),  # full case folding: "strasse"
        ("Groceries", MINE, False),
    ]
    with write_tx(engine) as conn:
        for i, (title, workspace, archived) in enumerate(titles):
            note = notes.insert_note(
                conn,
                workspace=workspace,
                path=f"{i}.md",
                title=title,
                body="",
                now=NOW + timedelta(minutes=i),
            )
            if archived:
                notes.update_fields(conn, note, now=NOW, archived=True, archived_at=NOW)
        rows = [
            {
                "id": f"note_filler_{i:08d}",
                "workspace": MINE,
                "path": f"filler/{i}.md",
                "title": f"filler {i}",
                "title_key": f"filler {i}",
                "body": BODY,
                "created_at": NOW,
                "updated_at": NOW,
                "version": 1,
                "archived": False,
            }
            for i in range(FILLER)
        ]
        conn.execute(insert(notes_table), rows)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE notes"))


def test_postgresql_candidates_equal_the_portable_statements(pg_engine: Engine) -> None:
    _seed(pg_engine)
    with read_tx(pg_engine) as conn:
        assert notes.store(conn) is notes.POSTGRESQL
        for key, limit in [
            ("tps report", 10),
            ("TPS", 2),
            ("report", 10),
            ("STRASSE", 10),
            ("filler 12", 5),
            ("absent", 10),
        ]:
            found = notes.POSTGRESQL.find_candidates(conn, MINE, notes.title_key(key), limit=limit)
            portable = notes.CORE.find_candidates(conn, MINE, notes.title_key(key), limit=limit)
            assert found == portable, key

        exact_first, total = notes.POSTGRESQL.find_candidates(conn, MINE, "tps report", limit=10)
    assert [n.title for n in exact_first] == ["tps REPORT", "TPS report", "Quarterly TPS report"]
    assert total == 3


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", []) for node in _nodes(child))]


def test_postgresql_candidates_never_sort_more_than_the_matching_notes(
    pg_engine: Engine,
) -> None:
    _seed(pg_engine)
    statement = notes.POSTGRESQL._candidates.statement  # type: ignore[attr-defined]
    values = {"workspace": MINE, "title_key": "tps report", "archived": False, "limit": 10}
    with read_tx(pg_engine) as conn:
        compiled = statement.compile(dialect=conn.dialect)
        params = compiled.construct_params(values)
        raw = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled.string}", params
        ).scalar_one()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    sorted_rows = [n["Actual Rows"] for n in _nodes(plan) if n["Node Type"] == "Sort"]
    assert max(sorted_rows, default=0) <= 3, plan
