"""The database change counter that keeps remembered token checks honest (`security.token_cache`).

It lives in the store because it is SQL and driver knowledge: the HTTP authenticator only asks
`change_counter(...)` for a counter and calls it.

For SQLite it is `PRAGMA data_version` on one dedicated connection: the value changes whenever
any other connection, in this process or another (`notes-server token revoke`), has committed
since the last read. It costs a few microseconds and never waits: the connection has no busy
timeout, and any error means "unknown" (None), which makes the caller read the database. Values
are comparable only on one connection, so a reconnect starts a new epoch that matches nothing
remembered before it. Other databases offer no such counter: nothing is remembered there.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

_EPOCH = 1 << 48


class SqliteChangeCounter:
    def __init__(self, path: Path) -> None:
        self.uri = f"file:{quote(str(path))}?mode=rw"  # never creates a missing database
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._epoch = 0

    def __call__(self) -> int | None:
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = sqlite3.connect(
                        self.uri, uri=True, timeout=0, isolation_level=None, check_same_thread=False
                    )
                row = self._conn.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error:
                self._reset()
                return None
            return self._epoch * _EPOCH + int(row[0])

    def _reset(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._epoch += 1

    def close(self) -> None:
        with self._lock:
            self._reset()


def no_counter() -> int | None:
    """A database without a change counter: nothing is ever remembered."""
    return None


def change_counter(sqlite_path: Path | None) -> Callable[[], int | None]:
    """The counter for a server database: `PRAGMA data_version` for a SQLite file, else none."""
    return no_counter if sqlite_path is None else SqliteChangeCounter(sqlite_path)
