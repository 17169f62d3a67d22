"""The client's roots on a 2025-11-25 HTTP session, for every worker.

`roots_json` is the last `roots/list` answer (canonical workspace URIs; NULL: not asked yet, or
the client said they changed); `roots_generation` counts the changes, so an answer fetched
before a change never overwrites the newer state.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("legacy_sessions") as batch:
        batch.add_column(sa.Column("roots_json", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("roots_generation", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("legacy_sessions") as batch:
        batch.drop_column("roots_generation")
        batch.drop_column("roots_json")
