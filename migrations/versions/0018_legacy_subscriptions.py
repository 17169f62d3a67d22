"""2025-11-25 HTTP sessions' change subscriptions (issue 24): durable, so that any worker or
instance serves a session's `resources/subscribe` and its GET stream.

`legacy_subscriptions`: one row per subscribed URI of a session, the note it resolved to at
subscribe time (NULL: nothing readable there, it never fires) and the change-log sequence it was
made at (only later changes fire for it, live and on a `Last-Event-ID` replay alike).
`legacy_streams`: per session, the sequence from which its readable workspaces' list changes are
sent (its first subscribe) and the id of its one current GET stream (a newer GET replaces it).
Both go with their session (ON DELETE CASCADE). Self-contained: two new tables, nothing else.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _session() -> sa.Column[str]:
    return sa.Column(
        "session_hash",
        sa.String(64),
        sa.ForeignKey("legacy_sessions.session_hash", ondelete="CASCADE"),
        primary_key=True,
    )


def upgrade() -> None:
    op.create_table(
        "legacy_subscriptions",
        _session(),
        sa.Column("uri", sa.String(4096), primary_key=True),
        sa.Column("note_id", sa.String(40), nullable=True),
        sa.Column("from_seq", SEQ, nullable=False),
    )
    op.create_table(
        "legacy_streams",
        _session(),
        sa.Column("list_from_seq", SEQ, nullable=True),
        sa.Column("stream_id", sa.String(64), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("legacy_streams")
    op.drop_table("legacy_subscriptions")
