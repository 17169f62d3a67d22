"""The SQLite commit-rate ceiling: the confirmed delete's transaction with nothing around it.

One process of N: same pragmas as notes-server's engine (WAL, synchronous=NORMAL, busy_timeout,
foreign_keys, autocommit + explicit BEGIN IMMEDIATE), then per note: claim a nonce row, delete
the note (the FTS delete trigger fires), write the audit row, COMMIT. Stdlib only.

Usage: sqlite_worker.py DB WORKER WORKERS SECONDS START_AT  -> prints {"count", "elapsed"}
"""

import json
import secrets
import sqlite3
import sys
import time

STAMP = "2026-01-01 00:00:00.000000"


def main() -> None:
    db, worker, workers, seconds, start_at = sys.argv[1:6]
    k, n = int(worker), int(workers)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    rows = conn.execute(
        "SELECT id, workspace, title, path, version FROM notes WHERE seq % ? = ? ORDER BY seq",
        (n, k),
    ).fetchall()
    while time.time() < float(start_at):
        time.sleep(0.001)
    started = time.perf_counter()
    deadline = started + float(seconds)
    count = 0
    for note_id, workspace, title, path, version in rows:
        nonce = secrets.token_hex(16)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO consumed_nonces (nonce, principal, tool, outcome, answer_digest,"
            " result_json, consumed_at, expires_at) VALUES (?, 'bench', 'notes_delete',"
            " 'deleted', NULL, NULL, ?, ?) ON CONFLICT (nonce) DO NOTHING RETURNING nonce",
            (nonce, STAMP, STAMP),
        ).fetchone()
        deleted = conn.execute(
            "DELETE FROM notes WHERE id = ? AND version = ?", (note_id, version)
        ).rowcount
        if deleted != 1:
            raise SystemExit(f"note {note_id} was not deleted")
        conn.execute(
            "INSERT INTO audit_log (at, principal, tool, outcome, workspace, note_id, note_title,"
            " note_path, nonce) VALUES (?, 'bench', 'notes_delete', 'deleted', ?, ?, ?, ?, ?)",
            (STAMP, workspace, note_id, title, path, nonce),
        )
        conn.execute("COMMIT")
        count += 1
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - started
    print(json.dumps({"count": count, "elapsed": elapsed}))


if __name__ == "__main__":
    main()
