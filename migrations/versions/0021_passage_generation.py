"""Search: each passage row says at which index generation it was written.

A process keeps a workspace's vectors in memory (`store/vector_cache.py`). When the index's
generation (0019) moved, it re-read every vector of the workspace: 0.6-0.8 s at 100k notes, paid
by the first search after any indexer write. With the generation on each row it reads only the
notes whose passages were written since the generation it holds (an index on the column keeps
that a range scan). Rows that exist keep 0: older than any generation a process can hold.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames).
TABLE = "search_passages"
COLUMN = "generation"
INDEX = "ix_search_passages_generation"


def upgrade() -> None:
    # A plain ADD COLUMN on both backends: a batch copy of the table on SQLite would break the
    # trigger on `notes` that names it.
    op.add_column(
        TABLE, sa.Column(COLUMN, sa.BigInteger(), nullable=False, server_default=sa.text("0"))
    )
    op.create_index(INDEX, TABLE, [COLUMN])


def downgrade() -> None:
    op.drop_index(INDEX, table_name=TABLE)
    op.execute(f"ALTER TABLE {TABLE} DROP COLUMN {COLUMN}")
