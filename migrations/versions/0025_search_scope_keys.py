"""Search: the scope (workspace, archived) inside the SQLite FTS5 rowids.

A keyword search filtered its matches by workspace and archived state by joining every match to
its `notes` row: two thirds of a search at 1,000,000 notes. Here each FTS5 row id carries the
note's scope, so a search reads only the scope's part of each posting list (an FTS5 rowid range)
and never joins a match to `notes`:

    rowid = scope_key * 2**41 + archived * 2**40 + seq

`search_scopes` gives every workspace a small integer key (assigned by the index triggers on
the first note of a workspace, never reused). One workspace's live notes are then one rowid
range, its live and archived notes the next-wider one. Both FTS5 tables (words and trigrams)
become contentless (`content=''`): an external-content table reads its rows by rowid, which is
no longer `notes.seq`. Snippets were already built from `notes.body`, never by FTS5. A note moved
to another workspace, archived or restored is re-indexed under its new key by the update
trigger, as a title or body change is.

PostgreSQL keeps its own search store (the tsvector column on `notes`: the scope filter is on
the same row, there is no join): nothing changes there.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames).
WORDS, TRIGRAMS, SCOPES = "notes_fts", "notes_fts_tri", "search_scopes"
WORD_TOKENIZER = "unicode61 remove_diacritics 2"
TRIGRAM_TOKENIZER = "trigram case_sensitive 0"
SCOPE_SHIFT, ARCHIVED_SHIFT = 2**41, 2**40
# (table, tokenizer, indexed body column) of both indexes.
INDEXES = ((WORDS, WORD_TOKENIZER, "body"), (TRIGRAMS, TRIGRAM_TOKENIZER, "body_spaceless"))


def _key(row: str) -> str:
    return (
        f"((SELECT key FROM {SCOPES} WHERE workspace = {row}.workspace) * {SCOPE_SHIFT}"
        f" + {row}.archived * {ARCHIVED_SHIFT} + {row}.seq)"
    )


def _scoped(table: str, tokenizer: str, body: str) -> list[str]:
    claim = f"INSERT OR IGNORE INTO {SCOPES}(workspace) VALUES (new.workspace); "
    insert = (
        f"INSERT INTO {table}(rowid, title, {body}) VALUES ({_key('new')}, new.title, new.{body}); "
    )
    delete = (
        f"INSERT INTO {table}({table}, rowid, title, {body}) "
        f"VALUES ('delete', {_key('old')}, old.title, old.{body}); "
    )
    return [
        f"CREATE VIRTUAL TABLE {table} USING fts5(title, {body}, content='', "
        f"tokenize='{tokenizer}')",
        f"CREATE TRIGGER {table}_ai AFTER INSERT ON notes BEGIN {claim}{insert}END",
        f"CREATE TRIGGER {table}_ad AFTER DELETE ON notes BEGIN {delete}END",
        f"CREATE TRIGGER {table}_au AFTER UPDATE OF title, {body}, workspace, archived ON notes"
        f" BEGIN {claim}{delete}{insert}END",
        # In key order: FTS5 appends to its segments instead of sorting the whole table.
        f"INSERT INTO {table}(rowid, title, {body}) SELECT {_key('n')}, n.title, n.{body}"
        f" FROM notes AS n ORDER BY 1",
    ]


def _external(table: str, tokenizer: str, body: str) -> list[str]:
    """The index as 0020 left it: external content over `notes`, rowid = seq."""
    return [
        f"CREATE VIRTUAL TABLE {table} USING fts5(title, {body}, content='notes', "
        f"content_rowid='seq', tokenize='{tokenizer}')",
        f"CREATE TRIGGER {table}_ai AFTER INSERT ON notes BEGIN "
        f"INSERT INTO {table}(rowid, title, {body}) VALUES (new.seq, new.title, new.{body}); END",
        f"CREATE TRIGGER {table}_ad AFTER DELETE ON notes BEGIN "
        f"INSERT INTO {table}({table}, rowid, title, {body}) "
        f"VALUES ('delete', old.seq, old.title, old.{body}); END",
        f"CREATE TRIGGER {table}_au AFTER UPDATE OF title, {body} ON notes BEGIN "
        f"INSERT INTO {table}({table}, rowid, title, {body}) "
        f"VALUES ('delete', old.seq, old.title, old.{body}); "
        f"INSERT INTO {table}(rowid, title, {body}) VALUES (new.seq, new.title, new.{body}); END",
        f"INSERT INTO {table}({table}) VALUES ('rebuild')",
    ]


def _drop(table: str) -> None:
    for suffix in ("au", "ad", "ai"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_{suffix}")
    op.execute(f"DROP TABLE IF EXISTS {table}")


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, _tokenizer, _body in INDEXES:
        _drop(table)
    op.execute(
        f"CREATE TABLE {SCOPES} (key INTEGER PRIMARY KEY, workspace VARCHAR(2048) NOT NULL UNIQUE)"
    )
    op.execute(f"INSERT INTO {SCOPES}(workspace) SELECT DISTINCT workspace FROM notes ORDER BY 1")
    for table, tokenizer, body in INDEXES:
        for statement in _scoped(table, tokenizer, body):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table, _tokenizer, _body in INDEXES:
        _drop(table)
    op.execute(f"DROP TABLE IF EXISTS {SCOPES}")
    for table, tokenizer, body in INDEXES:
        for statement in _external(table, tokenizer, body):
            op.execute(statement)
