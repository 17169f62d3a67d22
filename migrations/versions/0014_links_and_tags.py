"""Links and tags of every note, indexed from its body and front matter (issue 22).


Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
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


BATCH = 1000
# The tables as of this revision (not the application's models, which may grow later).
_notes = sa.table(
    "notes",
    sa.column("seq"),
    sa.column("id"),
    sa.column("workspace"),
    sa.column("path"),
    sa.column("title"),
    sa.column("title_key"),
    sa.column("body"),
)
_front = sa.table("note_front_matter", sa.column("note_id"), sa.column("extra"))
_links = sa.table(
    "note_links",
    *(
        sa.column(name)
        for name in (
            "workspace",
            "note_id",
            "position",
            "kind",
            "target",
            "heading",
            "path_key",
            "title_key",
            "target_id",
            "context",
        )
    ),
)
_tags = sa.table(
    "note_tags",
    sa.column("note_id"),
    sa.column("tag_key"),
    sa.column("workspace"),
    sa.column("tag"),
)


def _title_key(title: str) -> str:
    """notes_server.store.keys.title_key as of this revision."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", title).casefold())
    return " ".join(folded.split())


def _index_existing_notes() -> None:
    """Index the notes already stored, as `store.content_index` does for every write: links
    resolved by exact path, then by a title that only one note of the workspace has. The
    parsers are the application's pure ones (notes_server.markup)."""
    from notes_server.markup.links import MARKDOWN, context_of, parse_links, resolve_relative
    from notes_server.markup.properties import front_matter_tags
    from notes_server.markup.tags import body_tags, tag_key, unique

    conn = op.get_bind()
    by_path: dict[tuple[str, str], str] = {}
    by_title: dict[tuple[str, str], list[str]] = {}
    for note_id, workspace, path, key in conn.execute(
        sa.select(_notes.c.id, _notes.c.workspace, _notes.c.path, _notes.c.title_key)
    ):
        by_path[(workspace, path)] = note_id
        by_title.setdefault((workspace, key), []).append(note_id)
    last = 0
    while True:
        rows = conn.execute(
            sa.select(
                _notes.c.seq,
                _notes.c.id,
                _notes.c.workspace,
                _notes.c.path,
                _notes.c.body,
                _front.c.extra,
            )
            .select_from(_notes.outerjoin(_front, _front.c.note_id == _notes.c.id))
            .where(_notes.c.seq > last)
            .order_by(_notes.c.seq)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        link_rows: list[dict[str, object]] = []
        tag_rows: list[dict[str, object]] = []
        for _seq, note_id, workspace, path, body, extra in rows:
            for position, link in enumerate(parse_links(body)):
                if link.kind == MARKDOWN:
                    path_key = resolve_relative(path, link.target)
                    if path_key is None:
                        continue
                    key = None
                else:
                    path_key = unicodedata.normalize("NFC", link.target.removeprefix("/")) or None
                    key = _title_key(link.target) if len(link.target) <= 500 else None
                target = by_path.get((workspace, path_key or ""))
                if target is None and key:
                    candidates = by_title.get((workspace, key), [])
                    target = candidates[0] if len(candidates) == 1 else None
                link_rows.append(
                    {
                        "workspace": workspace,
                        "note_id": note_id,
                        "position": position,
                        "kind": link.kind,
                        "target": link.target,
                        "heading": link.heading[:500] if link.heading else None,
                        "path_key": path_key,
                        "title_key": key or None,
                        "target_id": target,
                        "context": context_of(body, link)[:400],
                    }
                )
            for tag in unique([*front_matter_tags(extra or ""), *body_tags(body)]):
                tag_rows.append(
                    {
                        "note_id": note_id,
                        "tag_key": tag_key(tag),
                        "workspace": workspace,
                        "tag": tag,
                    }
                )
        if link_rows:
            conn.execute(_links.insert(), link_rows)
        if tag_rows:
            conn.execute(_tags.insert(), tag_rows)
        last = rows[-1][0]


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
