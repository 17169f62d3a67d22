"""The SQLite commit-rate ceiling: the confirmed delete's transaction with nothing around it.

One process of N: same pragmas as notes-server's engine (WAL, synchronous=NORMAL, busy_timeout,
foreign_keys, temp_store, autocommit + explicit BEGIN IMMEDIATE), then per note the statements
notes-server's accept transaction sends on SQLite, in its order, with the same values (taken
from a statement trace of `notes_delete` round 2, history item 45): read the grant, look the
nonce up, read the note, prune expired nonces, claim the nonce (its recorded result included),
delete the note (the FTS and change-feed triggers fire), drop its links and tags, resolve again
the links that named it, drop its kept front matter and its history, write the audit row,
COMMIT. What it leaves out is everything around the transaction: the two MCP rounds, round 1's
candidate lookup, the sealed state, JSON and the pipes. Stdlib only.

Usage: sqlite_worker.py DB WORKER WORKERS SECONDS START_AT  -> prints {"count", "elapsed"}
"""

import hashlib
import json
import secrets
import sqlite3
import sys
import time

PRINCIPAL = "bench"
TOOL = "notes_delete"
STAMP = "2026-01-01 00:00:00.000000"
EXPIRES = "2026-01-01 00:05:00.000000"
PRUNE_BEFORE = "2025-12-31 23:50:00.000000"

GRANT = "SELECT role FROM workspace_grants WHERE principal = ? AND workspace = ?"
NONCE = (
    "SELECT nonce, principal, tool, outcome, answer_digest, result_json FROM consumed_nonces"
    " WHERE nonce = ?"
)
NOTE = (
    "SELECT id, workspace, path, title, body, created_at, updated_at, version, archived,"
    " archived_at FROM notes WHERE id = ? AND workspace = ?"
)
PRUNE = (
    "DELETE FROM consumed_nonces WHERE nonce IN (SELECT nonce FROM consumed_nonces"
    " WHERE expires_at < ? LIMIT 200 OFFSET 0)"
)
CLAIM = (
    "INSERT INTO consumed_nonces (nonce, principal, tool, outcome, answer_digest, result_json,"
    " consumed_at, expires_at) VALUES (?, ?, ?, 'deleted', ?, ?, ?, ?)"
    " ON CONFLICT (nonce) DO NOTHING RETURNING nonce"
)
DELETE = "DELETE FROM notes WHERE id = ? AND version = ?"
LINKS = "DELETE FROM note_links WHERE note_id = ?"
TAGS = "DELETE FROM note_tags WHERE note_id = ?"
_TARGET = (
    "coalesce((SELECT notes.id FROM notes WHERE notes.workspace = note_links.workspace"
    " AND notes.path = note_links.path_key), (SELECT CASE"
    " WHEN (sum(CASE WHEN notes.archived THEN 0 ELSE 1 END) = 1)"
    " THEN max(CASE WHEN notes.archived THEN NULL ELSE notes.id END)"
    " WHEN (sum(CASE WHEN notes.archived THEN 0 ELSE 1 END) = 0 AND count(*) = 1)"
    " THEN max(notes.id) END FROM notes WHERE notes.workspace = note_links.workspace"
    " AND notes.title_key = note_links.title_key))"
)
RERESOLVE = (
    f"UPDATE note_links SET target_id = {_TARGET} WHERE note_links.workspace = ?"
    " AND note_links.lookup_key IN (?, ?, ?, ?) AND (note_links.path_key IN (?, ?)"
    f" OR note_links.title_key IN (?, ?)) AND note_links.target_id IS NOT {_TARGET}"
)
FRONT = "DELETE FROM note_front_matter WHERE note_id = ?"
HISTORY = "DELETE FROM note_revisions WHERE note_id = ?"
AUDIT = (
    "INSERT INTO audit_log (at, principal, tool, outcome, workspace, note_id, note_title,"
    " note_path, nonce) VALUES (?, ?, ?, 'deleted', ?, ?, ?, ?, ?)"
)


def main() -> None:
    db, worker, workers, seconds, start_at = sys.argv[1:6]
    k, n = int(worker), int(workers)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    rows = conn.execute(
        "SELECT id, workspace, title_key FROM notes WHERE seq % ? = ? ORDER BY seq", (n, k)
    ).fetchall()
    while time.time() < float(start_at):
        time.sleep(0.001)
    started = time.perf_counter()
    deadline = started + float(seconds)
    count = 0
    for note_id, workspace, key in rows:
        nonce = secrets.token_hex(16)
        digest = hashlib.sha256(note_id.encode()).hexdigest()
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute(GRANT, (PRINCIPAL, workspace)).fetchone() is None:
            raise SystemExit("no grant")
        if conn.execute(NONCE, (nonce,)).fetchone() is not None:
            raise SystemExit("nonce already consumed")
        note = conn.execute(NOTE, (note_id, workspace)).fetchone()
        if note is None:
            raise SystemExit(f"note {note_id} is gone")
        path, title, version = note[2], note[3], note[7]
        result = json.dumps(
            {"deleted": True, "outcome": "deleted", "noteId": note_id, "title": title}
        )
        conn.execute(PRUNE, (PRUNE_BEFORE,))
        claimed = conn.execute(
            CLAIM, (nonce, PRINCIPAL, TOOL, digest, result, STAMP, EXPIRES)
        ).fetchone()
        if claimed is None:
            raise SystemExit("nonce claimed twice")
        if conn.execute(DELETE, (note_id, version)).rowcount != 1:
            raise SystemExit(f"note {note_id} was not deleted")
        conn.execute(LINKS, (note_id,))
        conn.execute(TAGS, (note_id,))
        conn.execute(RERESOLVE, (workspace, path, path, key, key, path, path, key, key))
        conn.execute(FRONT, (note_id,))
        conn.execute(HISTORY, (note_id,))
        conn.execute(AUDIT, (STAMP, PRINCIPAL, TOOL, workspace, note_id, title, path, nonce))
        conn.execute("COMMIT")
        count += 1
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - started
    print(json.dumps({"count": count, "elapsed": elapsed}))


if __name__ == "__main__":
    main()
