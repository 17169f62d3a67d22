"""Tasks: the input a running task asks for, and the answers it was given.

A task that needs the client's input while it runs (the extension's `input_required` status)
keeps what it asks in `input_requests_json` (the outstanding `inputRequests`, by key) and the
answers `tasks/update` delivered in `input_responses_json` (by key, until the task takes them),
so the request is read and answered at any worker or instance. Both NULL otherwise.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames).
TABLE = "tasks"
COLUMNS = ("input_requests_json", "input_responses_json")


def upgrade() -> None:
    for column in COLUMNS:
        op.add_column(TABLE, sa.Column(column, sa.Text(), nullable=True))


def downgrade() -> None:
    for column in reversed(COLUMNS):
        op.execute(f"ALTER TABLE {TABLE} DROP COLUMN {column}")
