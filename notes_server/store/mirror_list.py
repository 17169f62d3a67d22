"""The mirrored folders of a SQLite file through the stdlib driver: `serve` asks at every start
(to know what its sandbox must leave readable), so this costs no SQLAlchemy engine (the same
reasoning as `migrate.sqlite_revision`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# The table and columns of `models.mirrors_table`.
_ALL = "SELECT DISTINCT folder FROM workspace_mirrors ORDER BY folder"
_ONE = "SELECT DISTINCT folder FROM workspace_mirrors WHERE principal = ? ORDER BY folder"


def sqlite_mirror_folders(path: Path, principal: str | None) -> list[str]:
    """The configured mirror folders (of one principal, or of everyone), read only."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(_ALL) if principal is None else conn.execute(_ONE, (principal,))
        return [str(row[0]) for row in rows]
    finally:
        conn.close()
