"""Wrong sign-ins per pending purge approval, counted in the database.

The approval page may be served by any worker of any instance, so the count of wrong
credentials typed for an approval lives on its row (one atomic `UPDATE ... + 1` per refusal)
rather than in one process's memory; at the limit the approval is locked for good.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("purge_approvals") as batch:
        batch.add_column(
            sa.Column("failed_sign_ins", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("purge_approvals") as batch:
        batch.drop_column("failed_sign_ins")
