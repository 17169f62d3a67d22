"""2025-11-25 Streamable HTTP sessions and the server-initiated questions awaiting answers.

Both live in the database so that every worker (and, later, every instance) sees them: a
session opened on one worker is used on another, and the answer to an elicitation may be
POSTed to a worker other than the one holding the SSE stream.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "legacy_sessions",
        sa.Column("session_hash", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("version", sa.String(20), nullable=False),
        sa.Column("capabilities_json", sa.Text(), nullable=False),
        sa.Column("client_info_json", sa.Text(), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
    )
    op.create_index("ix_legacy_sessions_expires", "legacy_sessions", ["expires_at"])
    op.create_table(
        "legacy_questions",
        sa.Column("session_hash", sa.String(64), primary_key=True),
        sa.Column("request_id", sa.String(100), primary_key=True),
        sa.Column("client_request", sa.String(200), nullable=False),
        sa.Column("response_json", sa.Text(), nullable=True),
        sa.Column("cancelled", sa.Boolean(), nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
    )
    op.create_index("ix_legacy_questions_expires", "legacy_questions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_legacy_questions_expires", table_name="legacy_questions")
    op.drop_table("legacy_questions")
    op.drop_index("ix_legacy_sessions_expires", table_name="legacy_sessions")
    op.drop_table("legacy_sessions")
