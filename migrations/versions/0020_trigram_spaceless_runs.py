"""Search: the trigram index covers only the body's spaceless-script runs, not the whole body.

A substring term is made of spaceless characters only (search_terms), so it can only ever
match inside such a run; indexing the whole body re-tokenized every 100 KB English note on
each write for nothing. `notes.body_spaceless` holds the runs, one a line (the store sets it
with the body); this adds it, fills it, and re-points the index at it.

SQLite: the trigram FTS5 table is rebuilt over (title, body_spaceless), its triggers fire on
those two columns only. PostgreSQL: the body's GIN trigram index is replaced by one on the new
column (the title's stays).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames).
TABLE = "notes_fts_tri"
COLUMN = "body_spaceless"
OLD_INDEX, NEW_INDEX = "ix_notes_body_trgm", "ix_notes_body_spaceless_trgm"
BATCH = 500


def _sqlite_index(body: str) -> list[str]:
    return [
        f"CREATE VIRTUAL TABLE {TABLE} USING fts5(title, {body}, content='notes', "
        "content_rowid='seq', tokenize='trigram case_sensitive 0')",
        f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON notes BEGIN "
        f"INSERT INTO {TABLE}(rowid, title, {body}) VALUES (new.seq, new.title, new.{body}); END",
        f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON notes BEGIN "
        f"INSERT INTO {TABLE}({TABLE}, rowid, title, {body}) "
        f"VALUES ('delete', old.seq, old.title, old.{body}); END",
        f"CREATE TRIGGER {TABLE}_au AFTER UPDATE OF title, {body} ON notes BEGIN "
        f"INSERT INTO {TABLE}({TABLE}, rowid, title, {body}) "
        f"VALUES ('delete', old.seq, old.title, old.{body}); "
        f"INSERT INTO {TABLE}(rowid, title, {body}) VALUES (new.seq, new.title, new.{body}); END",
        f"INSERT INTO {TABLE}({TABLE}) VALUES ('rebuild')",
    ]


def _drop_sqlite_index() -> None:
    for suffix in ("au", "ad", "ai"):
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_{suffix}")
    op.execute(f"DROP TABLE IF EXISTS {TABLE}")


def _fill() -> None:
    """Every note's runs, computed as the store computes them on a write."""
    from notes_server.store.search_terms import spaceless_runs

    bind = op.get_bind()
    rows = bind.execute(text("SELECT seq, body FROM notes")).all()
    write = text(f"UPDATE notes SET {COLUMN} = :runs WHERE seq = :seq")
    changed = [{"seq": seq, "runs": spaceless_runs(body)} for seq, body in rows]
    changed = [row for row in changed if row["runs"]]
    for start in range(0, len(changed), BATCH):
        bind.execute(write, changed[start : start + BATCH])


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _drop_sqlite_index()
    op.add_column("notes", sa.Column(COLUMN, sa.Text(), nullable=False, server_default=""))
    _fill()
    if dialect == "sqlite":
        for statement in _sqlite_index(COLUMN):
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {OLD_INDEX}")
        op.execute(f"CREATE INDEX {NEW_INDEX} ON notes USING gin ({COLUMN} gin_trgm_ops)")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        _drop_sqlite_index()
    elif dialect == "postgresql":
        op.execute(f"DROP INDEX IF EXISTS {NEW_INDEX}")
        op.execute(f"CREATE INDEX {OLD_INDEX} ON notes USING gin (body gin_trgm_ops)")
    # A plain ALTER TABLE (SQLite 3.35+): a batch copy of notes would drop its other triggers.
    op.drop_column("notes", COLUMN)
    if dialect == "sqlite":
        for statement in _sqlite_index("body"):
            op.execute(statement)
