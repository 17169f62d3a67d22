"""Links and tags of every note, indexed from its body and front matter (issue 22).


Revision ID: 0010_w22links
Revises: 0010_w24
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_w22links"
down_revision = "0010_w24"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "note_links",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("note_id", sa.String(40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("target", sa.String(1024), nullable=False),
        sa.Column("heading", sa.String(500), nullable=True),
        sa.Column("path_key", sa.String(2048), nullable=True),
        sa.Column("title_key", sa.String(2048), nullable=True),
        sa.Column("target_id", sa.String(40), nullable=True),
        sa.Column("context", sa.String(400), nullable=False),
    )
    op.create_index("ix_note_links_note", "note_links", ["note_id", "position"])
    op.create_index("ix_note_links_target", "note_links", ["target_id"])
    op.create_index("ix_note_links_workspace_path", "note_links", ["workspace", "path_key"])
    op.create_index("ix_note_links_workspace_title", "note_links", ["workspace", "title_key"])
    op.create_table(
        "note_tags",
        sa.Column("note_id", sa.String(40), primary_key=True),
        sa.Column("tag_key", sa.String(400), primary_key=True),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("tag", sa.String(200), nullable=False),
    )
    op.create_index("ix_note_tags_workspace_tag", "note_tags", ["workspace", "tag_key"])
    _index_existing_notes()


def _index_existing_notes() -> None:
    """Index every note already stored, with the code every write uses."""
    from notes_server.store.content_index import reindex_all

    reindex_all(op.get_bind())


def downgrade() -> None:
    op.drop_index("ix_note_tags_workspace_tag", table_name="note_tags")
    op.drop_table("note_tags")
    for name in (
        "ix_note_links_workspace_title",
        "ix_note_links_workspace_path",
        "ix_note_links_target",
        "ix_note_links_note",
    ):
        op.drop_index(name, table_name="note_links")
    op.drop_table("note_links")
