"""Schema migrations from code, the FTS index triggers, and the SQLite engine settings."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect

from notes_server.store import migrate, notes, search
from notes_server.store.engine import BUSY_TIMEOUT_MS, make_engine, read_tx, write_tx

TABLES = {"notes", "workspace_grants", "consumed_nonces", "audit_log", "alembic_version"}
WS = "file:///home/alice/notes"
NOW = datetime(2026, 8, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def empty_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path}/fresh.db")
    try:
        yield engine
    finally:
        engine.dispose()


def table_names(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(inspect(conn).get_table_names())


def test_upgrade_on_an_empty_database_creates_the_schema(empty_engine: Engine) -> None:
    assert migrate.current_revision(empty_engine) is None

    before, after = migrate.upgrade(empty_engine)

    assert (before, after) == (None, migrate.HEAD)
    assert table_names(empty_engine) >= TABLES | {"notes_fts"}


def test_upgrade_is_idempotent(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)
    tables = table_names(empty_engine)

    assert migrate.upgrade(empty_engine) == (migrate.HEAD, migrate.HEAD)
    assert table_names(empty_engine) == tables


def test_models_and_migrations_do_not_drift(migrated_engine: Engine) -> None:
    migrate.check(migrated_engine)


def test_head_names_the_newest_migration(migrated_engine: Engine) -> None:
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(migrate.alembic_config(migrated_engine))

    assert scripts.get_heads() == [migrate.HEAD]
    assert migrate.current_revision(migrated_engine) == migrate.HEAD


def test_a_principals_sessions_are_indexed_by_expiry(migrated_engine: Engine) -> None:
    """Opening a session past the cap looks up the principal's sessions by expiry (0015)."""
    with migrated_engine.connect() as conn:
        indexes = {
            index["name"]: index["column_names"]
            for index in inspect(conn).get_indexes("legacy_sessions")
        }

    assert indexes["ix_legacy_sessions_principal_expires"] == ["principal", "expires_at"]


def test_downgrade_to_base_and_upgrade_again(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)

    migrate.downgrade(empty_engine, "base")

    assert migrate.current_revision(empty_engine) is None
    assert table_names(empty_engine) <= {"alembic_version"}
    assert migrate.upgrade(empty_engine) == (None, migrate.HEAD)
    migrate.check(empty_engine)


@pytest.mark.sqlite_only("reads a SQLite file's stamp")
def test_sqlite_revision_reads_the_stamp_of_a_migrated_file(
    migrated_engine: Engine, tmp_path: Path
) -> None:
    assert migrate.sqlite_revision(tmp_path / "notes.db") == migrate.HEAD


def test_sqlite_revision_is_none_for_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "notes.db"

    assert migrate.sqlite_revision(missing) is None
    assert not missing.exists()


def test_sqlite_revision_is_none_for_an_unmigrated_file(
    empty_engine: Engine, tmp_path: Path
) -> None:
    with empty_engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE unrelated (x INTEGER)")
        conn.commit()

    assert migrate.sqlite_revision(tmp_path / "fresh.db") is None


# --- FTS triggers ------------------------------------------------------------------------


def search_ids(engine: Engine, query: str) -> list[str]:
    with read_tx(engine) as conn:
        hits = search.search(conn, WS, query, include_archived=True, limit=50, offset=0)
    return [hit.note.id for hit in hits]


@pytest.mark.sqlite_only("the FTS5 table (PostgreSQL: test_search_tsvector.py)")
def test_fts_index_follows_inserts_updates_and_deletes(migrated_engine: Engine) -> None:
    with write_tx(migrated_engine) as conn:
        note = notes.insert_note(
            conn, workspace=WS, path="a.md", title="Walrus", body="tusks and ice", now=NOW
        )
    assert search_ids(migrated_engine, "walrus") == [note.id]
    assert search_ids(migrated_engine, "tusks") == [note.id]

    with write_tx(migrated_engine) as conn:
        updated = notes.update_fields(conn, note, now=NOW, title="Penguin", body="feathers")
    assert updated is not None
    assert search_ids(migrated_engine, "penguin") == [note.id]
    assert search_ids(migrated_engine, "feathers") == [note.id]
    assert search_ids(migrated_engine, "walrus") == []
    assert search_ids(migrated_engine, "tusks") == []

    with write_tx(migrated_engine) as conn:
        assert notes.delete_note(conn, updated)
    assert search_ids(migrated_engine, "penguin") == []
    with migrated_engine.connect() as conn:
        count = conn.exec_driver_sql(
            "SELECT count(*) FROM notes_fts WHERE notes_fts MATCH 'feathers'"
        )
        assert count.scalar_one() == 0


def test_fts_index_is_untouched_by_a_path_only_update(migrated_engine: Engine) -> None:
    with write_tx(migrated_engine) as conn:
        note = notes.insert_note(conn, workspace=WS, path="a.md", title="Owl", body="", now=NOW)
        moved = notes.update_fields(conn, note, now=NOW, path="b/a.md")
    assert moved is not None

    assert search_ids(migrated_engine, "owl") == [note.id]


@pytest.mark.sqlite_only("the FTS5 table")
def test_fts_integrity_check_passes_after_changes(migrated_engine: Engine) -> None:
    with write_tx(migrated_engine) as conn:
        for i in range(5):
            note = notes.insert_note(
                conn, workspace=WS, path=f"{i}.md", title=f"t{i}", body=f"b{i}", now=NOW
            )
            notes.update_fields(conn, note, now=NOW, body="changed")
    with migrated_engine.connect() as conn:
        conn.exec_driver_sql("INSERT INTO notes_fts(notes_fts) VALUES ('integrity-check')")


# --- engine ------------------------------------------------------------------------------


@pytest.mark.sqlite_only("SQLite pragmas")
def test_engine_uses_wal_and_a_busy_timeout(migrated_engine: Engine) -> None:
    with migrated_engine.connect() as conn:
        journal = conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()
        timeout = conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one()
        foreign_keys = conn.exec_driver_sql("PRAGMA foreign_keys").scalar_one()

    assert journal == "wal"
    assert timeout == BUSY_TIMEOUT_MS > 0
    assert foreign_keys == 1


@pytest.mark.sqlite_only("BEGIN IMMEDIATE")
def test_write_transactions_take_the_write_lock_up_front(migrated_engine: Engine) -> None:
    """A write transaction holds the write lock before its first statement (no deferred lock
    to upgrade later, which fails under contention); a read transaction takes none."""
    path = migrated_engine.url.database
    assert path is not None
    with closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as other:
        with (
            write_tx(migrated_engine),
            pytest.raises(sqlite3.OperationalError, match="database is locked"),
        ):
            other.execute("BEGIN IMMEDIATE")
        with read_tx(migrated_engine) as conn:
            search.search(conn, WS, None, include_archived=True, limit=1, offset=0)
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")


def test_a_failed_write_transaction_rolls_back(migrated_engine: Engine) -> None:
    with pytest.raises(RuntimeError), write_tx(migrated_engine) as conn:
        notes.insert_note(conn, workspace=WS, path="a.md", title="Gone", body="", now=NOW)
        raise RuntimeError("abort")

    assert search_ids(migrated_engine, "gone") == []


def test_a_path_conflict_is_reported_and_the_transaction_stays_usable(
    migrated_engine: Engine,
) -> None:
    with write_tx(migrated_engine) as conn:
        first = notes.insert_note(conn, workspace=WS, path="a.md", title="One", body="", now=NOW)
        with pytest.raises(notes.PathConflict):
            notes.insert_note(conn, workspace=WS, path="a.md", title="Two", body="", now=NOW)
        second = notes.insert_note(conn, workspace=WS, path="b.md", title="Two", body="", now=NOW)

    assert sorted(
        search_ids(migrated_engine, "one") + search_ids(migrated_engine, "two")
    ) == sorted([first.id, second.id])


def test_the_engine_creates_the_database_directory(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/deep/er/notes.db")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    finally:
        engine.dispose()

    assert (tmp_path / "deep" / "er" / "notes.db").exists()


def test_upgrade_to_0003_rekeys_titles_so_any_normalization_matches(
    empty_engine: Engine,
) -> None:
    from sqlalchemy import insert, select

    from notes_server.store.models import notes_table

    decomposed = "U\u0308ber Stra\u00dfe"  # as a client typing a combining accent sends it
    migrate.upgrade(empty_engine, "0002")
    with write_tx(empty_engine) as conn:
        conn.execute(
            insert(notes_table).values(
                id="note_old",
                workspace=WS,
                path="a.md",
                title=decomposed,
                title_key="u\u0308ber strasse",  # what 0002-era code stored
                body="",
                created_at=NOW,
                updated_at=NOW,
                version=1,
                archived=False,
            )
        )

    migrate.upgrade(empty_engine)

    with read_tx(empty_engine) as conn:
        assert conn.execute(select(notes_table.c.title_key)).scalar_one() == "\u00fcber strasse"
        found, total = notes.find_candidates(conn, WS, "\u00dcBER", limit=10)
    assert ([n.id for n in found], total) == (["note_old"], 1)
    migrate.downgrade(empty_engine, "0002")
    with read_tx(empty_engine) as conn:
        assert conn.execute(select(notes_table.c.title_key)).scalar_one() == "u\u0308ber strasse"


def test_upgrade_to_0009_starts_pending_approvals_at_no_wrong_sign_ins(
    migrated_engine: Engine,
) -> None:
    """A purge approval pending across the upgrade keeps working: its count starts at 0 and
    the atomic count and lock work on it (SQLite and PostgreSQL)."""
    from sqlalchemy import text

    from notes_server.store import approvals

    migrate.downgrade(migrated_engine, "0008")
    with write_tx(migrated_engine) as conn:
        conn.execute(
            text(
                "INSERT INTO purge_approvals (id, principal, workspace, link_hash, link_used, "
                "items_json, set_digest, created_at, expires_at, approved_at) VALUES ('pa-old', "
                "'alice', :ws, :hash, :used, '[]', :hash, :now, :later, NULL)"
            ),
            {"ws": WS, "hash": "0" * 64, "used": True, "now": NOW, "later": NOW.replace(hour=13)},
        )

    migrate.upgrade(migrated_engine)

    with read_tx(migrated_engine) as conn:
        before = approvals.get(conn, "pa-old")
    with write_tx(migrated_engine) as conn:
        counts = [approvals.count_failed_sign_in(conn, "pa-old", NOW) for _ in range(6)]
        approved = approvals.approve(conn, "pa-old", "alice", NOW)
    assert before is not None and (before.failed_sign_ins, before.locked) == (0, False)
    assert counts == [1, 2, 3, 4, 5, None]
    assert approved is False
    migrate.downgrade(migrated_engine, "0008")
    with read_tx(migrated_engine) as conn:
        assert conn.execute(text("SELECT id FROM purge_approvals")).scalars().all() == ["pa-old"]
    migrate.upgrade(migrated_engine)


def test_upgrade_to_0020_fills_the_spaceless_runs_of_existing_notes(
    empty_engine: Engine,
) -> None:
    from sqlalchemy import insert, select

    from notes_server.store.models import notes_table

    migrate.upgrade(empty_engine, "0019")
    with write_tx(empty_engine) as conn:
        row = {
            "workspace": WS,
            "title": "t",
            "title_key": "t",
            "created_at": NOW,
            "updated_at": NOW,
        }
        conn.execute(
            insert(notes_table),
            [
                {**row, "id": "note_cjk", "path": "a.md", "body": "Minutes: 会議の議事録"},
                {**row, "id": "note_en", "path": "b.md", "body": "Minutes in English"},
            ],
        )

    migrate.upgrade(empty_engine)

    with read_tx(empty_engine) as conn:
        stored = dict(conn.execute(select(notes_table.c.id, notes_table.c.body_spaceless)).all())
        hits = search.search(conn, WS, "議事録", include_archived=False, limit=10, offset=0)
    assert (stored, [h.note.id for h in hits]) == (
        {"note_cjk": "会議の議事録", "note_en": ""},
        ["note_cjk"],
    )


def test_upgrade_to_0024_carries_links_and_tags_and_their_lookups(
    migrated_engine: Engine,
) -> None:
    import sqlalchemy as sa

    from notes_server.store import links
    from notes_server.store import tags as tags_store
    from notes_server.store.models import links_table, notes_table

    migrate.downgrade(migrated_engine, "0023")
    old_links = sa.table(
        "note_links",
        *(
            sa.column(c)
            for c in (
                "workspace",
                "note_id",
                "position",
                "kind",
                "target",
                "heading",
                "path_key",
                "title_key",
                "target_id",
                "context",
            )
        ),
    )
    old_tags = sa.table(
        "note_tags",
        sa.column("note_id"),
        sa.column("tag_key"),
        sa.column("workspace"),
        sa.column("tag"),
    )
    row = {"workspace": WS, "created_at": NOW, "updated_at": NOW, "version": 1, "archived": False}
    body = "[[Plan]] [x](plan.md) [[Missing Note#Part]] #Project"
    link = {"workspace": WS, "note_id": "note_src", "heading": None, "context": body}
    with write_tx(migrated_engine) as conn:
        conn.execute(
            sa.insert(notes_table),
            [
                {
                    **row,
                    "id": "note_plan",
                    "path": "plan.md",
                    "title": "Plan",
                    "title_key": "plan",
                    "body": "",
                },
                {
                    **row,
                    "id": "note_src",
                    "path": "src.md",
                    "title": "Src",
                    "title_key": "src",
                    "body": body,
                },
            ],
        )
        conn.execute(
            sa.insert(old_links),
            [
                {
                    **link,
                    "position": 0,
                    "kind": "wiki",
                    "target": "Plan",
                    "path_key": "Plan",
                    "title_key": "plan",
                    "target_id": "note_plan",
                },
                {
                    **link,
                    "position": 1,
                    "kind": "markdown",
                    "target": "plan.md",
                    "path_key": "plan.md",
                    "title_key": None,
                    "target_id": "note_plan",
                },
                {
                    **link,
                    "position": 2,
                    "kind": "wiki",
                    "target": "Missing Note",
                    "heading": "Part",
                    "path_key": "Missing Note",
                    "title_key": "missing note",
                    "target_id": None,
                },
            ],
        )
        conn.execute(
            sa.insert(old_tags),
            [{"note_id": "note_src", "tag_key": "project", "workspace": WS, "tag": "Project"}],
        )

    migrate.upgrade(migrated_engine)

    with write_tx(migrated_engine) as conn:
        stored = conn.execute(
            sa.select(
                links_table.c.position,
                links_table.c.kind,
                links_table.c.lookup_key,
                links_table.c.target_id,
                links_table.c.heading,
            ).order_by(links_table.c.position)
        ).all()
        assert [tuple(r) for r in stored] == [
            (0, "wiki", "plan", "note_plan", None),
            (1, "markdown", "plan.md", "note_plan", None),
            (2, "wiki", "missing note", None, "Part"),
        ]
        assert tags_store.tags_of(conn, ["note_src"]) == {"note_src": ["Project"]}
        plan = notes.get_note(conn, WS, "note_plan")
        assert plan is not None
        incoming = links.incoming(conn, plan, limit=10)
        assert [(i.source.id, i.links) for i in incoming] == [("note_src", 2)]
        # The carried link waiting for "Missing Note" is found by its lookup key.
        missing = notes.insert_note(
            conn, workspace=WS, path="m.md", title="Missing note", body="", now=NOW
        )
        src = notes.get_note(conn, WS, "note_src")
        assert src is not None
        targets = [o.target and o.target.id for o in links.outgoing(conn, src, limit=10)]
        assert targets == ["note_plan", "note_plan", missing.id]

    migrate.downgrade(migrated_engine, "0023")
    with read_tx(migrated_engine) as conn:
        back = conn.execute(sa.text("SELECT position, target_id FROM note_links ORDER BY id")).all()
        assert [tuple(r) for r in back] == [(0, "note_plan"), (1, "note_plan"), (2, missing.id)]
        assert conn.execute(sa.text("SELECT tag FROM note_tags")).scalars().all() == ["Project"]
    migrate.upgrade(migrated_engine)
    migrate.check(migrated_engine)


def test_0026_drops_the_stored_context_and_its_downgrade_fills_it_from_the_bodies(
    migrated_engine: Engine,
) -> None:
    import sqlalchemy as sa

    from notes_server.markup.links import context_of, parse_links
    from notes_server.store import links

    long_words = "many words before the link here " * 4
    body = long_words + "see [[Plan]] and [[Plan#Part|its part]] then [[Nowhere]] " + long_words
    with write_tx(migrated_engine) as conn:
        plan = notes.insert_note(conn, workspace=WS, path="plan.md", title="Plan", body="", now=NOW)
        src = notes.insert_note(conn, workspace=WS, path="src.md", title="Src", body=body, now=NOW)
        other = notes.insert_note(
            conn, workspace=WS, path="o.md", title="O", body="`[[Plan]]` [[Plan]]", now=NOW
        )
        before = [(i.source.id, i.context, i.links) for i in links.incoming(conn, plan, limit=9)]
    assert "context" not in {c["name"] for c in inspect(migrated_engine).get_columns("note_links")}
    expected = [context_of(body, link) for link in parse_links(body)]
    assert before == sorted(
        [
            (other.id, context_of(other.body, parse_links(other.body)[0]), 1),
            (src.id, expected[0], 2),
        ],
        key=lambda item: {src.id: "src.md", other.id: "o.md"}[str(item[0])],
    )

    migrate.downgrade(migrated_engine, "0025")
    table = sa.table(
        "note_links", sa.column("note_id"), sa.column("position"), sa.column("context")
    )
    with write_tx(migrated_engine) as conn:
        stored = conn.execute(
            sa.select(table.c.position, table.c.context)
            .where(table.c.note_id == src.id)
            .order_by(table.c.position)
        ).all()
        carried = (
            conn.execute(sa.select(table.c.context).where(table.c.note_id == other.id))
            .scalars()
            .all()
        )
    assert [tuple(r) for r in stored] == list(enumerate(expected))
    assert carried == [context_of(other.body, parse_links(other.body)[0])]

    migrate.upgrade(migrated_engine)
    with write_tx(migrated_engine) as conn:
        after = [(i.source.id, i.context, i.links) for i in links.incoming(conn, plan, limit=9)]
    assert after == before
