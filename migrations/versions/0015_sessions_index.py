"""An index on a 2025-11-25 HTTP session's principal and expiry (issue 20).

Opening a session ends the principal's least recently used ones past the cap: a lookup by
`principal` ordered by `expires_at`, which without this index scans every session of every
principal.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_legacy_sessions_principal_expires", "legacy_sessions", ["principal", "expires_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_legacy_sessions_principal_expires", table_name="legacy_sessions")
