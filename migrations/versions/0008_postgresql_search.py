"""PostgreSQL full-text search: a generated tsvector column on notes and its GIN index.

The PostgreSQL twin of 0001's FTS5 table (which only SQLite gets): the title weighted A, the
body B, with the `simple` configuration (lower-cased words, no stemming, no stop words), as
FTS5's unicode61 tokenizer indexes them. Generated, so every insert and update keeps it current
with no trigger. SQLite gets nothing here.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames); models.SEARCH_VECTOR* name the same.
COLUMN = "search_vector"
INDEX = "ix_notes_search_vector"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"ALTER TABLE notes ADD COLUMN {COLUMN} tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector('simple', coalesce(title, '')), 'A') || "
        "setweight(to_tsvector('simple', coalesce(body, '')), 'B')) STORED"
    )
    op.execute(f"CREATE INDEX {INDEX} ON notes USING gin ({COLUMN})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP INDEX IF EXISTS {INDEX}")
    op.execute(f"ALTER TABLE notes DROP COLUMN IF EXISTS {COLUMN}")
