"""Note history: every superseded version of a note kept in `note_revisions`, and who made
the current version (`notes.changed_by`, `notes.changed_tool`).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    # Plain ADD COLUMN (no batch copy on SQLite): the FTS triggers on notes stay as they are.
    op.add_column("notes", sa.Column("changed_by", sa.String(200), nullable=True))
    op.add_column("notes", sa.Column("changed_tool", sa.String(100), nullable=True))
    op.create_table(
        "note_revisions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("note_id", sa.String(40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("front_matter", sa.Text(), nullable=True),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("changed_at", TZ, nullable=False),
        sa.Column("principal", sa.String(200), nullable=True),
        sa.Column("tool", sa.String(100), nullable=True),
        sa.Column("replaced_at", TZ, nullable=False),
        sa.UniqueConstraint("note_id", "version", name="uq_note_revisions_note_version"),
    )


def downgrade() -> None:
    op.drop_table("note_revisions")
    # Plain DROP COLUMN (SQLite >= 3.35): a batch copy of notes would drop its FTS triggers.
    op.drop_column("notes", "changed_tool")
    op.drop_column("notes", "changed_by")
