"""Tasks: when the process running a task last said it was alive.

A task runs on a thread of the process that created it. If that process dies (killed, crashed,
its machine gone) the row stayed `working` until it expired, up to its TTL, and a client polled
a task nobody ran. The runner now touches `alive_at` of its running tasks every few seconds;
a `tasks/get` (from any instance) of a task silent for longer than the runner's orphan window
ends it `failed`, saying why. Rows that exist keep NULL: read as their `updated_at`.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames).
TABLE = "tasks"
COLUMN = "alive_at"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column(COLUMN, sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.execute(f"ALTER TABLE {TABLE} DROP COLUMN {COLUMN}")
