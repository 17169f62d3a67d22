"""Pending out-of-band approvals for notes_purge (URL-mode elicitation).

A row per approval page a purge asked for, so any worker or instance can serve the page and the
retry. Only the SHA-256 of the one-time link secret is stored.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "purge_approvals",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("link_hash", sa.String(64), nullable=False),
        sa.Column("link_used", sa.Boolean(), nullable=False),
        sa.Column("items_json", sa.Text(), nullable=False),
        sa.Column("set_digest", sa.String(64), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("approved_at", TZ, nullable=True),
    )
    op.create_index("ix_purge_approvals_expires", "purge_approvals", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_purge_approvals_expires", table_name="purge_approvals")
    op.drop_table("purge_approvals")
