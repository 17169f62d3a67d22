"""Search: the generation of the semantic index, a single row every indexer write bumps.

A process keeps each workspace's passage vectors in memory between searches
(`store/vector_cache.py`) and must know when they changed. Note mutations already say so through
the change log (0016); the indexer's writes of passages did not, and on SQLite a re-embedded
note's new passages can reuse the ids of its old ones. The counter is bumped in the indexer's own
write transaction, so a reader that sees the new vectors sees the new generation, on either
backend and from any process. Self-contained: one table, one row, nothing else touched.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "search_state",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(table, [{"id": 1, "generation": 0}])


def downgrade() -> None:
    op.drop_table("search_state")
