"""Links and tags in fewer b-trees: what a note write touches (issue 22's write cost).

A create with three links and two tags wrote eight b-trees of the link and tag index (the
links table and its four indexes, the tags table, its key and its index), each link on its own
leaf of each. Now:

- `note_links` is keyed by (note_id, position), WITHOUT ROWID on SQLite: the table is its own
  by-note index (the `id` column and `ix_note_links_note` go);
- one lookup index over `(lookup_key, workspace)` replaces the two over the path and the title
  key (`lookup_key`: the target's title key without leading slashes or spaces, see
  `notes_server.store.keys.lookup_key`; a note looks for the links that may name it by the
  lookup keys of its path and title, and the exact path/title columns decide);
- `ix_note_links_target` covers resolved links only (backlinks never ask for NULL);
- `note_tags` is WITHOUT ROWID on SQLite (its key was a second b-tree beside the rowid table).

The rows are carried over: every link gets its lookup key computed here, in Python.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03
"""

from __future__ import annotations

import unicodedata
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql, sqlite

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

BATCH = 1000
NEW = "note_links_v24"
OLD_INDEXES = (
    "ix_note_links_note",
    "ix_note_links_target",
    "ix_note_links_workspace_path",
    "ix_note_links_workspace_title",
)
_COMMON = (
    "note_id",
    "position",
    "workspace",
    "kind",
    "target",
    "heading",
    "path_key",
    "title_key",
    "target_id",
    "context",
)


def _title_key(text: str) -> str:
    """notes_server.store.keys.title_key as of this revision."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())
    return " ".join(folded.split())


def _lookup_key(kind: str, target: str, path_key: str | None) -> str:
    """notes_server.store.keys.lookup_key of a link as of this revision: of its workspace path
    for a markdown link, of its target text for a wiki link."""
    text = (path_key or "") if kind == "markdown" else target
    return _title_key(text).lstrip("/ ")


def _columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("note_id", sa.String(40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("target", sa.String(1024), nullable=False),
        sa.Column("heading", sa.String(500), nullable=True),
        sa.Column("path_key", sa.String(2048), nullable=True),
        sa.Column("title_key", sa.String(2048), nullable=True),
        sa.Column("lookup_key", sa.String(2048), nullable=False),
        sa.Column("target_id", sa.String(40), nullable=True),
        sa.Column("context", sa.String(400), nullable=False),
    ]


def _insert(conn: sa.Connection, table: sa.TableClause) -> Any:
    """An insert that skips a second row of the same (note_id, position), were the old table,
    which had no such key, ever to hold one."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table).on_conflict_do_nothing()


def upgrade() -> None:
    conn = op.get_bind()
    op.create_table(
        NEW,
        *_columns(),
        sa.PrimaryKeyConstraint("note_id", "position", name="pk_note_links"),
        sqlite_with_rowid=False,
    )
    old = sa.table("note_links", sa.column("id"), *(sa.column(c) for c in _COMMON))
    new = sa.table(NEW, *(sa.column(c) for c in (*_COMMON, "lookup_key")))
    statement = _insert(conn, new)
    last = 0
    while True:
        rows = conn.execute(
            sa.select(old.c.id, *(old.c[c] for c in _COMMON))
            .where(old.c.id > last)
            .order_by(old.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        values = []
        for row in rows:
            item = dict(zip(_COMMON, row[1:], strict=True))
            item["lookup_key"] = _lookup_key(item["kind"], item["target"], item["path_key"])
            values.append(item)
        conn.execute(statement, values)
        last = rows[-1][0]
    for name in OLD_INDEXES:
        op.drop_index(name, table_name="note_links")
    op.drop_table("note_links")
    op.rename_table(NEW, "note_links")
    op.create_index("ix_note_links_lookup", "note_links", ["lookup_key", "workspace"])
    op.create_index(
        "ix_note_links_target",
        "note_links",
        ["target_id"],
        sqlite_where=sa.text("target_id IS NOT NULL"),
        postgresql_where=sa.text("target_id IS NOT NULL"),
    )
    if conn.dialect.name == "sqlite":
        _rebuild_tags(with_rowid=False)


def _rebuild_tags(*, with_rowid: bool) -> None:
    """SQLite: note_tags again with or without a rowid (PostgreSQL has none to drop)."""
    op.create_table(
        "note_tags_v24",
        sa.Column("note_id", sa.String(40), primary_key=True),
        sa.Column("tag_key", sa.String(400), primary_key=True),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("tag", sa.String(200), nullable=False),
        sqlite_with_rowid=with_rowid,
    )
    op.execute(
        "INSERT INTO note_tags_v24 (note_id, tag_key, workspace, tag)"
        " SELECT note_id, tag_key, workspace, tag FROM note_tags"
    )
    op.drop_index("ix_note_tags_workspace_tag", table_name="note_tags")
    op.drop_table("note_tags")
    op.rename_table("note_tags_v24", "note_tags")
    op.create_index("ix_note_tags_workspace_tag", "note_tags", ["workspace", "tag_key"])


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        _rebuild_tags(with_rowid=True)
    op.create_table(
        NEW,
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        *(c for c in _columns() if c.name != "lookup_key"),
    )
    columns = ", ".join(_COMMON)
    op.execute(
        f"INSERT INTO {NEW} ({columns}) SELECT {columns} FROM note_links ORDER BY note_id, position"
    )
    op.drop_index("ix_note_links_target", table_name="note_links")
    op.drop_index("ix_note_links_lookup", table_name="note_links")
    op.drop_table("note_links")
    op.rename_table(NEW, "note_links")
    if conn.dialect.name == "postgresql":
        op.execute(f"ALTER TABLE note_links RENAME CONSTRAINT {NEW}_pkey TO note_links_pkey")
        op.execute(f"ALTER SEQUENCE {NEW}_id_seq RENAME TO note_links_id_seq")
    op.create_index("ix_note_links_note", "note_links", ["note_id", "position"])
    op.create_index("ix_note_links_target", "note_links", ["target_id"])
    op.create_index("ix_note_links_workspace_path", "note_links", ["workspace", "path_key"])
    op.create_index("ix_note_links_workspace_title", "note_links", ["workspace", "title_key"])
