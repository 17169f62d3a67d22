"""Durable tasks of the `io.modelcontextprotocol/tasks` extension (issue 24).

A row per task: who created it (only that principal ever finds it), the tool, its status and
progress, the final CallToolResult or JSON-RPC error, a cancellation flag the running work
looks at between files, and the expiry the sweep removes it after. Self-contained: it creates
one table and its indexes and touches nothing else, so re-chaining it is a one-line change.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("status_message", sa.Text(), nullable=True),
        sa.Column("progress_done", sa.Integer(), nullable=True),
        sa.Column("progress_total", sa.Integer(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("error_json", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
    )
    op.create_index("ix_tasks_expires", "tasks", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_tasks_expires", table_name="tasks")
    op.drop_table("tasks")
