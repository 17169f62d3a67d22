"""Initial schema: notes (+ FTS5 on SQLite), workspace grants, consumed nonces, audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)

FTS_SQL = [
    "CREATE VIRTUAL TABLE notes_fts USING fts5("
    "title, body, content='notes', content_rowid='seq', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER notes_fts_ai AFTER INSERT ON notes BEGIN "
    "INSERT INTO notes_fts(rowid, title, body) VALUES (new.seq, new.title, new.body); END",
    "CREATE TRIGGER notes_fts_ad AFTER DELETE ON notes BEGIN "
    "INSERT INTO notes_fts(notes_fts, rowid, title, body) "
    "VALUES ('delete', old.seq, old.title, old.body); END",
    "CREATE TRIGGER notes_fts_au AFTER UPDATE OF title, body ON notes BEGIN "
    "INSERT INTO notes_fts(notes_fts, rowid, title, body) "
    "VALUES ('delete', old.seq, old.title, old.body); "
    "INSERT INTO notes_fts(rowid, title, body) VALUES (new.seq, new.title, new.body); END",
]


def upgrade() -> None:
    op.create_table(
        "notes",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("path", sa.String(2048), nullable=False),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("title_key", sa.String(500), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("archived", sa.Boolean(), nullable=False),
        sa.Column("archived_at", TZ, nullable=True),
        sa.UniqueConstraint("id"),
        sa.UniqueConstraint("workspace", "path", name="uq_notes_workspace_path"),
    )
    op.create_index("ix_notes_workspace_title", "notes", ["workspace", "title_key"])
    op.create_index("ix_notes_workspace_updated", "notes", ["workspace", "updated_at"])
    op.create_table(
        "workspace_grants",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("role", sa.String(10), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("principal", "workspace", name="uq_grants_principal_workspace"),
    )
    op.create_table(
        "consumed_nonces",
        sa.Column("nonce", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("answer_digest", sa.String(64), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=True),
        sa.Column("consumed_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
    )
    op.create_index("ix_consumed_nonces_expires", "consumed_nonces", ["expires_at"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("at", TZ, nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("tool", sa.String(100), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("note_id", sa.String(40), nullable=True),
        sa.Column("note_title", sa.String(500), nullable=True),
        sa.Column("note_path", sa.String(2048), nullable=True),
        sa.Column("nonce", sa.String(64), nullable=True),
    )
    op.create_index("ix_audit_log_workspace_at", "audit_log", ["workspace", "at"])
    op.create_index("ix_audit_log_principal_at", "audit_log", ["principal", "at"])
    if op.get_bind().dialect.name == "sqlite":
        for statement in FTS_SQL:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("notes_fts_au", "notes_fts_ad", "notes_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS notes_fts")
    op.drop_index("ix_audit_log_principal_at", table_name="audit_log")
    op.drop_index("ix_audit_log_workspace_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_consumed_nonces_expires", table_name="consumed_nonces")
    op.drop_table("consumed_nonces")
    op.drop_table("workspace_grants")
    op.drop_index("ix_notes_workspace_updated", table_name="notes")
    op.drop_index("ix_notes_workspace_title", table_name="notes")
    op.drop_table("notes")
