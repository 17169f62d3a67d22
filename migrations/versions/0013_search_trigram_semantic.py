"""Search: a trigram index for scripts written without spaces (CJK, Thai), and the tables
of the semantic index (passages with their vectors, the outbox of notes to embed).

SQLite: a second external-content FTS5 table over notes with the `trigram` tokenizer
(case-insensitive), kept current by triggers like 0001's word index, and filled once here.
PostgreSQL: the `pg_trgm` extension (contrib) and GIN trigram indexes on the title and the
body, which answer `LIKE '%...%'`. Without pg_trgm on the server the upgrade stops with one
line saying so.

Both: `search_passages` and `search_outbox`, with triggers that queue every inserted note and
every change of a title or body in the writer's own transaction; every existing note is queued.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames); models.TRIGRAM_* name the same.
TABLE = "notes_fts_tri"
INDEXES = {"ix_notes_title_trgm": "title", "ix_notes_body_trgm": "body"}

SQLITE_SQL = [
    f"CREATE VIRTUAL TABLE {TABLE} USING fts5("
    "title, body, content='notes', content_rowid='seq', tokenize='trigram case_sensitive 0')",
    f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON notes BEGIN "
    f"INSERT INTO {TABLE}(rowid, title, body) VALUES (new.seq, new.title, new.body); END",
    f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON notes BEGIN "
    f"INSERT INTO {TABLE}({TABLE}, rowid, title, body) "
    "VALUES ('delete', old.seq, old.title, old.body); END",
    f"CREATE TRIGGER {TABLE}_au AFTER UPDATE OF title, body ON notes BEGIN "
    f"INSERT INTO {TABLE}({TABLE}, rowid, title, body) "
    "VALUES ('delete', old.seq, old.title, old.body); "
    f"INSERT INTO {TABLE}(rowid, title, body) VALUES (new.seq, new.title, new.body); END",
    f"INSERT INTO {TABLE}({TABLE}) VALUES ('rebuild')",
]


TZ = sa.DateTime(timezone=True)
QUEUE = (
    "INSERT INTO search_outbox (note_seq, generation) VALUES (new.seq, 1) "
    "ON CONFLICT (note_seq) DO UPDATE SET generation = search_outbox.generation + 1, "
    "claimed_until = NULL"
)
SQLITE_OUTBOX = [
    f"CREATE TRIGGER search_outbox_ai AFTER INSERT ON notes BEGIN {QUEUE}; END",
    f"CREATE TRIGGER search_outbox_au AFTER UPDATE OF title, body ON notes BEGIN {QUEUE}; END",
]
PG_OUTBOX = [
    "CREATE FUNCTION search_outbox_queue() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"{QUEUE}; RETURN NULL; END $$",
    "CREATE TRIGGER search_outbox_ai AFTER INSERT ON notes FOR EACH ROW "
    "EXECUTE FUNCTION search_outbox_queue()",
    "CREATE TRIGGER search_outbox_au AFTER UPDATE OF title, body ON notes FOR EACH ROW "
    "EXECUTE FUNCTION search_outbox_queue()",
]


def _semantic_tables() -> None:
    op.create_table(
        "search_passages",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "note_seq",
            sa.Integer(),
            sa.ForeignKey("notes.seq", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("section", sa.String(200), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
    )
    op.create_index("ix_search_passages_note", "search_passages", ["note_seq"])
    op.create_table(
        "search_outbox",
        sa.Column("note_seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("claimed_until", TZ, nullable=True),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        # The foreign key needs PRAGMA foreign_keys on every connection; the trigger does not.
        op.execute(
            "CREATE TRIGGER search_passages_ad AFTER DELETE ON notes BEGIN "
            "DELETE FROM search_passages WHERE note_seq = old.seq; "
            "DELETE FROM search_outbox WHERE note_seq = old.seq; END"
        )
        statements = SQLITE_OUTBOX
    else:
        op.execute(
            "CREATE FUNCTION search_outbox_forget() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN DELETE FROM search_outbox WHERE note_seq = old.seq; RETURN NULL; END $$"
        )
        op.execute(
            "CREATE TRIGGER search_passages_ad AFTER DELETE ON notes FOR EACH ROW "
            "EXECUTE FUNCTION search_outbox_forget()"
        )
        statements = PG_OUTBOX
    for statement in statements:
        op.execute(statement)
    op.execute("INSERT INTO search_outbox (note_seq, generation) SELECT seq, 1 FROM notes")


class MissingExtension(RuntimeError):
    """pg_trgm is not installed on the PostgreSQL server."""


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for statement in SQLITE_SQL:
            op.execute(statement)
        _semantic_tables()
        return
    if bind.dialect.name != "postgresql":
        return
    available = bind.execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    ).first()
    if available is None:
        raise MissingExtension(
            "PostgreSQL has no pg_trgm extension (contrib): install the server's contrib "
            "package, then migrate again"
        )
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for index, column in INDEXES.items():
        op.execute(f"CREATE INDEX {index} ON notes USING gin ({column} gin_trgm_ops)")
    _semantic_tables()


def downgrade() -> None:
    bind = op.get_bind()
    for trigger in ("search_outbox_ai", "search_outbox_au", "search_passages_ad"):
        on = " ON notes" if bind.dialect.name == "postgresql" else ""
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}{on}")
    if bind.dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS search_outbox_queue()")
        op.execute("DROP FUNCTION IF EXISTS search_outbox_forget()")
    op.drop_table("search_outbox")
    op.drop_index("ix_search_passages_note", table_name="search_passages")
    op.drop_table("search_passages")
    if bind.dialect.name == "sqlite":
        for suffix in ("au", "ad", "ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_{suffix}")
        op.execute(f"DROP TABLE IF EXISTS {TABLE}")
    elif bind.dialect.name == "postgresql":
        for index in INDEXES:
            op.execute(f"DROP INDEX IF EXISTS {index}")
