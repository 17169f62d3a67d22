"""What note history costs: disk for 1,000 edits of a 10 KB note (SQLite, and PostgreSQL when
reachable), a section edit of a 100 KB note, and notes_update with the revision kept against
the same update with the revision step switched off, the two taking turns in one process.

Usage: scripts/bench_lib/history_cost.py [--edits N] [--calls N] [--pg URL]
Everything runs in-process through `McpServer.handle_raw` (no pipe, no client); latencies are
wall-clock per call, p50 and p90 over the calls, after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WS = "file:///bench/history"
PRINCIPAL = "bench"
WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "report",
    "meeting",
    "plan",
    "budget",
    "notes",
    "review",
    "draft",
    "final",
    "team",
    "quarter",
    "launch",
    "risk",
    "owner",
    "date",
    "status",
    "blocked",
    "done",
    "next",
    "week",
    "month",
    "year",
)


def paragraph(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines) + "\n"


def sectioned(rng: random.Random, total: int, sections: int) -> str:
    per = total // sections
    return "".join(f"## Section {i}\n{paragraph(rng, per - 16)}\n" for i in range(sections))


class Bench:
    """One in-process server on a fresh, migrated database with one granted workspace."""

    def __init__(self, url: str) -> None:
        from notes_server.app import create_app
        from notes_server.config import Settings
        from notes_server.security.keyring import KeyRing
        from notes_server.store import grants, migrate
        from notes_server.store.engine import make_engine, write_tx
        from notes_server.tools.services import Services, utc_now

        self.engine = make_engine(url)
        migrate.upgrade(self.engine)
        with write_tx(self.engine) as conn:
            grants.upsert(conn, PRINCIPAL, WS, "write", utc_now())
        settings = Settings(db_url=url, principal=PRINCIPAL, state_keys=KeyRing.generate_spec())
        self.server = create_app(settings, Services(settings, engine=self.engine))
        self.ids = 0

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        request = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": arguments,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        raw = self.server.handle_raw(json.dumps(request).encode(), PRINCIPAL)
        assert raw is not None
        reply: dict[str, Any] = json.loads(raw)
        result = reply.get("result")
        assert result is not None and result["isError"] is False, reply
        structured: dict[str, Any] = result["structuredContent"]
        return structured

    def create(self, title: str, body: str) -> str:
        note = self.call("notes_create", {"workspaceUri": WS, "title": title, "body": body})
        return str(note["note"]["id"])

    def close(self) -> None:
        self.engine.dispose()


def timed(calls: Iterator[Callable[[], object]]) -> list[float]:
    laps = []
    for call in calls:
        start = time.perf_counter()
        call()
        laps.append((time.perf_counter() - start) * 1000)
    return laps


def summary(laps: list[float]) -> str:
    ordered = sorted(laps)
    p90 = ordered[int(len(ordered) * 0.9)]
    return f"p50 {statistics.median(ordered):.3f} ms, p90 {p90:.3f} ms ({len(ordered)} calls)"


def edits_disk(bench: Bench, edits: int, rng: random.Random) -> str:
    """1,000 edits (one line of one section replaced each time) of a 10 KB note."""
    body = sectioned(rng, 10_000, 10)
    note = bench.create("Ten kilobytes", body)
    for i in range(edits):
        text = paragraph(rng, 10_000 // 10 - 16)  # the same size: the note stays at 10 KB
        bench.call(
            "notes_edit",
            {
                "workspaceUri": WS,
                "noteId": note,
                "edits": [{"section": f"Section {i % 10}", "action": "replace", "text": text}],
            },
        )
    return note


@contextmanager
def sqlite_db() -> Iterator[tuple[str, Path]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "notes.db"
        yield f"sqlite:///{path}", path


def sqlite_size(path: Path) -> tuple[int, int]:
    """(file bytes after a WAL checkpoint, bytes of the note_revisions table and its indexes)."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            table = conn.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN ('note_revisions', "
                "'uq_note_revisions_note_version', 'ix_note_revisions_replaced', "
                "'sqlite_autoindex_note_revisions_1')"
            ).fetchone()[0]
        except sqlite3.OperationalError:  # dbstat not compiled in
            table = -1
    return path.stat().st_size, int(table or 0)


def disk_report(args: argparse.Namespace) -> None:
    rng = random.Random(7)
    with sqlite_db() as (url, path):
        bench = Bench(url)
        bench.create("warm", "x")
        before, _ = sqlite_size(path)
        edits_disk(bench, args.edits, rng)
        bench.close()
        after, table = sqlite_size(path)
    print(
        f"SQLite: {args.edits} edits of a 10 KB note: database file +{(after - before) / 1e6:.2f}"
        f" MB; note_revisions and its indexes {table / 1e6:.2f} MB "
        f"({table / args.edits / 1000:.1f} KB per revision)"
    )
    if args.pg:
        pg_disk(args, random.Random(7))


def pg_disk(args: argparse.Namespace, rng: random.Random) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
    name = f"history_cost_{int(time.time())}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = args.pg.rsplit("/", 1)[0] + "/" + name
    try:
        bench = Bench(url)
        edits_disk(bench, args.edits, rng)
        with bench.engine.connect() as conn:
            size = int(
                conn.execute(text("SELECT pg_total_relation_size('note_revisions')")).scalar_one()
            )
        bench.close()
        print(
            f"PostgreSQL: {args.edits} edits of a 10 KB note: note_revisions with TOAST and "
            f"indexes {size / 1e6:.2f} MB ({size / args.edits / 1000:.1f} KB per revision)"
        )
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def latency_report(args: argparse.Namespace) -> None:
    from notes_server.store import history

    rng = random.Random(11)
    with sqlite_db() as (url, _):
        bench = Bench(url)
        big = bench.create("Hundred kilobytes", sectioned(rng, 100_000, 50))

        def section_edit(i: int) -> Callable[[], object]:
            edit = {"section": f"Section {i % 50}", "action": "append", "text": f"line {i}"}
            arguments = {"workspaceUri": WS, "noteId": big, "edits": [edit]}
            return lambda: bench.call("notes_edit", arguments)

        body = {"text": ""}

        def whole_update(i: int) -> Callable[[], object]:
            # The peer: the same change sent as a whole-body notes_update.
            def run() -> object:
                edited = body["text"].replace("\n\n## Section 1\n", f"\nu{i}\n\n## Section 1\n")
                body["text"] = edited
                arguments = {"workspaceUri": WS, "noteId": big, "body": edited}
                return bench.call("notes_update", arguments)

            return run

        timed(section_edit(i) for i in range(50))  # warm-up
        body["text"] = bench.call(
            "notes_read", {"workspaceUri": WS, "noteId": big, "limit": 1_000_000}
        )["note"]["body"]
        edits: list[float] = []
        updates: list[float] = []
        for round_ in range(10):
            n = args.calls // 10
            edits.extend(timed(section_edit(round_ * n + i) for i in range(n)))
            body["text"] = bench.call(
                "notes_read", {"workspaceUri": WS, "noteId": big, "limit": 1_000_000}
            )["note"]["body"]
            updates.extend(timed(whole_update(round_ * n + i) for i in range(n)))
        print(f"notes_edit of one section of a 100 KB note (SQLite): {summary(edits)}")
        print(f"notes_update of the same note, whole body sent (SQLite): {summary(updates)}")

        small = bench.create("Small", paragraph(rng, 1000))

        def update(i: int) -> Callable[[], object]:
            arguments = {"workspaceUri": WS, "noteId": small, "body": paragraph(rng, 1000)}
            return lambda: bench.call("notes_update", arguments)

        keep = history.keep_revision

        def without(conn: Any, note_id: str, version: int, now: Any) -> bool:
            return True  # the update as it was before history: no INSERT ... SELECT

        kept: list[float] = []
        bare: list[float] = []
        timed(update(i) for i in range(50))
        for round_ in range(10):
            for with_history in (True, False) if round_ % 2 == 0 else (False, True):
                history.keep_revision = keep if with_history else without  # type: ignore[assignment]
                laps = timed(update(i) for i in range(args.calls // 10))
                (kept if with_history else bare).extend(laps)
        history.keep_revision = keep  # type: ignore[assignment]
        bench.close()
    ratio = statistics.median(kept) / statistics.median(bare)
    print(f"notes_update of a 1 KB note, revision kept: {summary(kept)}")
    print(f"notes_update of a 1 KB note, revision step off: {summary(bare)}")
    print(f"ratio kept / off (p50): {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--pg", default=None, help="an admin URL, e.g. postgresql+psycopg://...")
    args = parser.parse_args()
    disk_report(args)
    latency_report(args)


if __name__ == "__main__":
    main()
