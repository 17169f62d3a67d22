"""The change log of notes (issue 24): one row per committed note mutation, what change
subscriptions (`subscriptions/listen`, 2025-11-25 `resources/subscribe`) are served from.

Written by triggers on `notes`, so every write path (tools, folder import and sync, revert,
link rewrite, purge, whatever comes later) appends its row in the writer's own transaction: a
change is logged if and only if it committed. The kind is read from the row change itself:
insert `created`, delete `deleted`; an update `archived`/`restored` when the archive flag
flipped, else `moved` when the workspace or path changed (`previous_workspace` keeps the old
workspace of a move between workspaces), else `updated`. On PostgreSQL the trigger also sends
`pg_notify('notes_changes', seq)`, delivered at commit, never for a rolled-back write.

Bounded: every PRUNE_EVERY-th row deletes the rows more than MAX_ROWS behind it and those
older than MAX_AGE (store.changes documents the same numbers).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

# Frozen here (a migration never follows later renames); store.changes names the same.
TABLE = "note_changes"
CHANNEL = "notes_changes"
MAX_ROWS = 100_000
PRUNE_EVERY = 512
MAX_AGE_HOURS = 24

_SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
_SQLITE_KIND = (
    "CASE WHEN new.archived <> old.archived THEN "
    "CASE WHEN new.archived THEN 'archived' ELSE 'restored' END "
    "WHEN new.workspace <> old.workspace OR new.path <> old.path THEN 'moved' "
    "ELSE 'updated' END"
)
_COLUMNS = f"INSERT INTO {TABLE} (workspace, note_id, kind, previous_workspace, at)"
SQLITE_SQL = [
    f"CREATE TRIGGER {TABLE}_ai AFTER INSERT ON notes BEGIN {_COLUMNS} "
    f"VALUES (new.workspace, new.id, 'created', NULL, {_SQLITE_NOW}); END",
    f"CREATE TRIGGER {TABLE}_ad AFTER DELETE ON notes BEGIN {_COLUMNS} "
    f"VALUES (old.workspace, old.id, 'deleted', NULL, {_SQLITE_NOW}); END",
    f"CREATE TRIGGER {TABLE}_au AFTER UPDATE ON notes BEGIN {_COLUMNS} "
    f"VALUES (new.workspace, new.id, {_SQLITE_KIND}, "
    "CASE WHEN new.workspace <> old.workspace THEN old.workspace END, "
    f"{_SQLITE_NOW}); END",
    f"CREATE TRIGGER {TABLE}_prune AFTER INSERT ON {TABLE} "
    f"WHEN new.seq % {PRUNE_EVERY} = 0 BEGIN DELETE FROM {TABLE} "
    f"WHERE seq <= new.seq - {MAX_ROWS} "
    f"OR at < strftime('%Y-%m-%d %H:%M:%f000', 'now', '-{MAX_AGE_HOURS} hours'); END",
]
PG_SQL = [
    f"""CREATE FUNCTION {TABLE}_log() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  logged bigint;
  kind text;
  ws text;
  nid text;
  previous text;
BEGIN
  IF TG_OP = 'INSERT' THEN
    kind := 'created'; ws := NEW.workspace; nid := NEW.id;
  ELSIF TG_OP = 'DELETE' THEN
    kind := 'deleted'; ws := OLD.workspace; nid := OLD.id;
  ELSE
    ws := NEW.workspace; nid := NEW.id;
    IF NEW.archived <> OLD.archived THEN
      kind := CASE WHEN NEW.archived THEN 'archived' ELSE 'restored' END;
    ELSIF NEW.workspace <> OLD.workspace OR NEW.path <> OLD.path THEN
      kind := 'moved';
    ELSE
      kind := 'updated';
    END IF;
    IF NEW.workspace <> OLD.workspace THEN previous := OLD.workspace; END IF;
  END IF;
  INSERT INTO {TABLE} (workspace, note_id, kind, previous_workspace, at)
    VALUES (ws, nid, kind, previous, now()) RETURNING seq INTO logged;
  PERFORM pg_notify('{CHANNEL}', logged::text);
  RETURN NULL;
END $$""",
    f"CREATE TRIGGER {TABLE}_log AFTER INSERT OR UPDATE OR DELETE ON notes "
    f"FOR EACH ROW EXECUTE FUNCTION {TABLE}_log()",
    f"""CREATE FUNCTION {TABLE}_prune() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  DELETE FROM {TABLE} WHERE seq <= NEW.seq - {MAX_ROWS}
    OR at < now() - interval '{MAX_AGE_HOURS} hours';
  RETURN NULL;
END $$""",
    f"CREATE TRIGGER {TABLE}_prune AFTER INSERT ON {TABLE} FOR EACH ROW "
    f"WHEN (NEW.seq % {PRUNE_EVERY} = 0) EXECUTE FUNCTION {TABLE}_prune()",
]


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("workspace", sa.String(2048), nullable=False),
        sa.Column("note_id", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("previous_workspace", sa.String(2048), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        # SQLite: AUTOINCREMENT, so a sequence is never handed out twice, even after the
        # newest rows were pruned away.
        sqlite_autoincrement=True,
    )
    dialect = op.get_bind().dialect.name
    statements = SQLITE_SQL if dialect == "sqlite" else PG_SQL if dialect == "postgresql" else []
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for suffix in ("ai", "ad", "au", "prune"):
            op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_{suffix}")
    elif dialect == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_log ON notes")
        op.execute(f"DROP FUNCTION IF EXISTS {TABLE}_log()")
        op.execute(f"DROP TRIGGER IF EXISTS {TABLE}_prune ON {TABLE}")
        op.execute(f"DROP FUNCTION IF EXISTS {TABLE}_prune()")
    op.drop_table(TABLE)
