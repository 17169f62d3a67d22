"""Folder mirrors: the folder an operator configured per principal and workspace (for the
notes_import tool), front matter kept for export, and per-note state for two-way sync.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "workspace_mirrors",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("folder", sa.String(4096), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("principal", "workspace", name="uq_mirrors_principal_workspace"),
    )
    op.create_table(
        "note_front_matter",
        sa.Column("note_id", sa.String(40), primary_key=True),
        sa.Column("extra", sa.Text(), nullable=False),
    )
    op.create_table(
        "folder_sync_state",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("folder", sa.String(4096), nullable=False),
        sa.Column("note_id", sa.String(40), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("db_version", sa.Integer(), nullable=False),
        sa.Column("db_hash", sa.String(64), nullable=False),
        sa.Column("file_hash", sa.String(64), nullable=False),
        sa.Column("synced_at", TZ, nullable=False),
        sa.UniqueConstraint("workspace", "folder", "note_id", name="uq_folder_sync_note"),
    )


def downgrade() -> None:
    op.drop_table("folder_sync_state")
    op.drop_table("note_front_matter")
    op.drop_table("workspace_mirrors")
