"""Substring search for scripts written without spaces (CJK, Thai): a trigram index.

SQLite: a second external-content FTS5 table over notes with the `trigram` tokenizer
(case-insensitive), kept current by triggers like 0001's word index, and filled once here.
PostgreSQL: the `pg_trgm` extension (contrib) and GIN trigram indexes on the title and the
body, which answer `LIKE '%...%'`. Without pg_trgm on the server the upgrade stops with one
line saying so.

Revision ID: 0012_w23search
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0012_w23search"
down_revision = "0011"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames); models.TRIGRAM_* name the same.
TABLE = "notes_fts_tri"
INDEXES = {"ix_notes_title_trgm": "title", "ix_notes_body_trgm": "body"}

SQLITE_SQL = [
    f"CREATE VIRTUAL TABLE {TABLE} USING fts5("
    "title, body, content='notes', content_rowid='seq', tokenize='trigram case_sensitive 0')",
    f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON notes BEGIN "
    f"INSERT INTO {TABLE}(rowid, title, body) VALUES (new.seq, new.title, new.body); END",
    f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON notes BEGIN "
    f"INSERT INTO {TABLE}({TABLE}, rowid, title, body) "
    "VALUES ('delete', old.seq, old.title, old.body); END",
    f"CREATE TRIGGER {TABLE}_au AFTER UPDATE OF title, body ON notes BEGIN "
    f"INSERT INTO {TABLE}({TABLE}, rowid, title, body) "
    "VALUES ('delete', old.seq, old.title, old.body); "
    f"INSERT INTO {TABLE}(rowid, title, body) VALUES (new.seq, new.title, new.body); END",
    f"INSERT INTO {TABLE}({TABLE}) VALUES ('rebuild')",
]


class MissingExtension(RuntimeError):
    """pg_trgm is not installed on the PostgreSQL server."""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_SQL:
            op.execute(statement)
        return
    if bind.dialect.name != "postgresql":
        return
    available = bind.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    ).first()
    if available is None:
        raise MissingExtension(
            "PostgreSQL has no pg_trgm extension (contrib): install the server's contrib "
            "package, then migrate again"
        )
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for index, column in INDEXES.items():
        op.execute(f"CREATE INDEX {index} ON notes USING gin ({column} gin_trgm_ops)")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for suffix in ("au", "ad", "ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_{suffix}")
        op.execute(f"DROP TABLE IF EXISTS {TABLE}")
    elif bind.dialect.name == "postgresql":
        for index in INDEXES:
            op.execute(f"DROP INDEX IF EXISTS {index}")
