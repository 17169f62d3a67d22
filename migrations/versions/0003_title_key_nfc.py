"""Title keys become NFC before and after case folding, for partial-title matching.

Confirmed actions now match notes whose title *contains* the argument; the comparison runs on
`notes.title_key` with a plain LIKE (SQLite folds ASCII case only), so the key must carry every
normalization itself. Keys written before this revision were case-folded but not NFC: a title
typed with a combining accent and one with the precomposed letter would not match each other.
Only keys that change are rewritten.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BATCH = 10_000


def _nfc_key(title: str) -> str:
    """notes_server.store.notes.title_key as of this revision (kept here: a migration must not
    change meaning when the application code does)."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", title).casefold())
    return " ".join(folded.split())


def _old_key(title: str) -> str:
    return " ".join(title.casefold().split())


def _rekey(key: Callable[[str], str]) -> None:
    conn = op.get_bind()
    notes = sa.table("notes", sa.column("seq"), sa.column("title"), sa.column("title_key"))
    last = 0
    while True:
        rows = conn.execute(
            sa.select(notes.c.seq, notes.c.title, notes.c.title_key)
            .where(notes.c.seq > last)
            .order_by(notes.c.seq)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        changed = [
            {"s": seq, "k": key(title)} for seq, title, current in rows if key(title) != current
        ]
        if changed:
            conn.execute(
                notes.update()
                .where(notes.c.seq == sa.bindparam("s"))
                .values(title_key=sa.bindparam("k")),
                changed,
            )
        last = rows[-1][0]


def upgrade() -> None:
    _rekey(_nfc_key)


def downgrade() -> None:
    _rekey(_old_key)
