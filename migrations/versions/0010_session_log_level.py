"""The log level a 2025-11-25 HTTP session chose with `logging/setLevel`, for every worker.

`log_level` NULL: the client asked for no log messages (the default).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("legacy_sessions") as batch:
        batch.add_column(sa.Column("log_level", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("legacy_sessions") as batch:
        batch.drop_column("log_level")
