"""A SQLite file through the stdlib driver, for start-up steps that need no SQLAlchemy engine:
holding it open in WAL mode for the sandbox, and removing a file a refused start created.
(The same reasoning as `migrate.sqlite_revision` and `mirror_list`: no engine, no import cost.)
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from notes_server.errors import StoreError

BUSY_TIMEOUT_MS = 30_000
# Connections opened by `hold_open_in_wal`, kept until the process exits.
_KEPT: list[sqlite3.Connection] = []


def hold_open_in_wal(database: Path) -> list[Path]:
    """Open the database in WAL mode and keep that connection until exit; return the files a
    confined process needs to write (the database and its -wal and -shm companions).

    Landlock rules are per inode and grant no file creation, so the -wal and -shm files must
    exist before confinement and keep existing: SQLite deletes them when the last connection
    closes, but only when it can lock the database exclusively, which this open connection
    (holding its shared lock, as every WAL-mode connection does) prevents. In WAL mode SQLite
    never creates a -journal file. Created here unconfined, they also get the database's
    owner and mode from SQLite itself. StoreError when the file cannot be prepared so.
    """
    try:
        keeper = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        keeper.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = keeper.execute("PRAGMA journal_mode = WAL").fetchone()
        keeper.execute("SELECT count(*) FROM sqlite_schema").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot prepare the database for confinement: {exc}") from None
    if mode is None or str(mode[0]).lower() != "wal":
        keeper.close()
        raise StoreError("the database cannot use WAL mode, which confinement needs")
    _KEPT.append(keeper)
    companions = [database.with_name(database.name + suffix) for suffix in ("-wal", "-shm")]
    return [database, *(path for path in companions if path.exists())]


def remove_if_empty(path: Path | None) -> None:
    """Opening a SQLite file that did not exist created it (and maybe its -wal and -shm);
    a refused start takes them away again, as long as no table was created meanwhile."""
    if path is None or not path.is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                return
    except sqlite3.Error:
        return
    for leftover in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
