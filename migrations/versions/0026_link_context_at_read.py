"""A backlink's context is cut from the linking note's body when it is read, not stored.

`note_links.context` held, for every link, up to 400 characters of the text around it: more
than half of each row's bytes, written with every link of every note write and, for a
create, half again as many b-tree pages rebalanced (the rows land at random places: note
ids are random). Only `notes_links`' `incoming` shows it, and that read already fetches the
linking note (its body included) beside the link's position: the context is cut there now
(`notes_server.markup.links.context_at`), the same text.

Upgrade drops the column. Downgrade adds it back and fills it from the bodies with the
application's parser (pure functions, as 0014 used them), every link of every note.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

BATCH = 1000


def upgrade() -> None:
    # Both backends drop a column in place (SQLite >= 3.35; the column is in no index).
    op.execute("ALTER TABLE note_links DROP COLUMN context")


def downgrade() -> None:
    from notes_server.markup.links import context_at

    conn = op.get_bind()
    op.add_column(
        "note_links",
        sa.Column("context", sa.String(400), nullable=False, server_default=""),
    )
    links = sa.table(
        "note_links", sa.column("note_id"), sa.column("position"), sa.column("context")
    )
    notes = sa.table("notes", sa.column("seq"), sa.column("id"), sa.column("body"))
    fill = (
        sa.update(links)
        .where(links.c.note_id == sa.bindparam("nid"), links.c.position == sa.bindparam("pos"))
        .values(context=sa.bindparam("ctx"))
    )
    last = 0
    while True:
        rows = conn.execute(
            sa.select(notes.c.seq, notes.c.id, notes.c.body)
            .where(notes.c.seq > last, notes.c.id.in_(sa.select(links.c.note_id)))
            .order_by(notes.c.seq)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        ids = [row[1] for row in rows]
        bodies = {row[1]: row[2] for row in rows}
        positions = conn.execute(
            sa.select(links.c.note_id, links.c.position).where(links.c.note_id.in_(ids))
        ).all()
        values = [
            {"nid": nid, "pos": pos, "ctx": context_at(bodies[nid], pos)} for nid, pos in positions
        ]
        if values:
            conn.execute(fill, values)
        last = rows[-1][0]
    # The column as 0014 made it: no server default (SQLite keeps its '': a NOT NULL column
    # is added with one, and nothing inserts a link without a context).
    if conn.dialect.name == "postgresql":
        op.alter_column("note_links", "context", server_default=None)
