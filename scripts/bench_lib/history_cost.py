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
from typing import Any, NamedTuple

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
        from notes_server.app import create_server
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
        self.server = create_server(settings, Services(settings, engine=self.engine))
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
                "'sqlite_autoindex_note_revisions_1')"
            ).fetchone()[0]
        except sqlite3.OperationalError:  # dbstat not compiled in
            table = -1
    return path.stat().st_size, int(table or 0)


def sqlite_disk(edits: int) -> tuple[int, int]:
    """(database file growth, bytes of note_revisions and its index) for `edits` edits."""
    with sqlite_db() as (url, path):
        bench = Bench(url)
        bench.create("warm", "x")
        before, _ = sqlite_size(path)
        edits_disk(bench, edits, random.Random(7))
        bench.close()
        after, table = sqlite_size(path)
    return after - before, table


def pg_disk(admin: str, edits: int) -> int:
    """Bytes of note_revisions (TOAST and indexes included) after `edits` edits."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine.url import make_url

    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    name = f"history_cost_{int(time.time() * 1000)}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(admin).set(database=name).render_as_string(hide_password=False)
    try:
        bench = Bench(url)
        edits_disk(bench, edits, random.Random(7))
        with bench.engine.connect() as conn:
            query = text("SELECT pg_total_relation_size('note_revisions')")
            size = int(conn.execute(query).scalar_one())
        bench.close()
        return size
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


class Latencies(NamedTuple):
    section_edit: list[float]
    whole_update: list[float]
    update_kept: list[float]
    update_bare: list[float]


def latencies(calls: int) -> Latencies:
    """Section edits of a 100 KB note beside whole-body updates of it, and 1 KB updates with
    and without the revision step, in alternating rounds (a busy moment hits both)."""
    from notes_server.store import history

    rng = random.Random(11)
    rounds = 10
    n = max(1, calls // rounds)
    with sqlite_db() as (url, _):
        bench = Bench(url)
        big = bench.create("Hundred kilobytes", sectioned(rng, 100_000, 50))
        body = {"text": ""}

        def current() -> str:
            args = {"workspaceUri": WS, "noteId": big, "limit": 1_000_000}
            return str(bench.call("notes_read", args)["note"]["body"])

        def section_edit(i: int) -> Callable[[], object]:
            edit = {"section": f"Section {i % 50}", "action": "append", "text": f"line {i}"}
            arguments = {"workspaceUri": WS, "noteId": big, "edits": [edit]}
            return lambda: bench.call("notes_edit", arguments)

        def whole_update(i: int) -> Callable[[], object]:
            # The peer: the same kind of change sent as a whole-body notes_update.
            def run() -> object:
                marker = f"## Section {i % 50}\n"
                body["text"] = body["text"].replace(marker, f"{marker}u{i}\n", 1)
                arguments = {"workspaceUri": WS, "noteId": big, "body": body["text"]}
                return bench.call("notes_update", arguments)

            return run

        timed(section_edit(i) for i in range(20))  # warm-up
        edits: list[float] = []
        updates: list[float] = []
        for r in range(rounds):
            edits.extend(timed(section_edit(r * n + i) for i in range(n)))
            body["text"] = current()
            updates.extend(timed(whole_update(r * n + i) for i in range(n)))

        small = bench.create("Small", paragraph(rng, 1000))

        def update(i: int) -> Callable[[], object]:
            arguments = {"workspaceUri": WS, "noteId": small, "body": paragraph(rng, 1000)}
            return lambda: bench.call("notes_update", arguments)

        keep = history.keep_revision

        def without(conn: Any, note_id: str, version: int, now: Any) -> bool:
            return True  # the update as it was before history: no INSERT ... SELECT

        kept: list[float] = []
        bare: list[float] = []
        timed(update(i) for i in range(20))
        try:
            for r in range(rounds):
                for with_history in (True, False) if r % 2 == 0 else (False, True):
                    history.keep_revision = keep if with_history else without  # type: ignore[assignment]
                    (kept if with_history else bare).extend(timed(update(i) for i in range(n)))
        finally:
            history.keep_revision = keep  # type: ignore[assignment]
        bench.close()
    return Latencies(edits, updates, kept, bare)


def p50(laps: list[float]) -> float:
    return statistics.median(laps)


def run(results: Any, *, edits: int, calls: int, pg_admin: str | None) -> None:
    """The suite of `scripts/bench`: one side table and two checks."""
    from bench_lib.results import Check

    growth, table = sqlite_disk(edits)
    pg_size = None if pg_admin is None else pg_disk(pg_admin, edits)
    lat = latencies(calls)
    rows = [
        [
            f"{edits:,} section edits of a 10 KB note, on disk (SQLite)",
            f"file +{growth / 1e6:.2f} MB; note_revisions {table / 1e6:.2f} MB "
            f"({table / edits / 1000:.1f} KB per version kept, full text)",
        ],
        [
            f"{edits:,} section edits of a 10 KB note, on disk (PostgreSQL)",
            "not measured (no server)"
            if pg_size is None
            else f"note_revisions {pg_size / 1e6:.2f} MB ({pg_size / edits / 1000:.1f} KB per "
            "version kept; TOAST compresses the text)",
        ],
        ["`notes_edit` of one section of a 100 KB note (SQLite)", summary(lat.section_edit)],
        ["`notes_update` of that note, whole body (SQLite)", summary(lat.whole_update)],
        ["`notes_update` of a 1 KB note, version kept (SQLite)", summary(lat.update_kept)],
        ["`notes_update` of a 1 KB note, history step off (SQLite)", summary(lat.update_bare)],
    ]
    results.tables["Note history (in-process, `handle_raw`)"] = (["measurement", "result"], rows)
    edit_p50 = p50(lat.section_edit)
    ratio = p50(lat.update_kept) / p50(lat.update_bare)
    results.checks.append(
        Check(
            "`notes_edit` of one section of a 100 KB note: p50 < 5 ms",
            f"{edit_p50:.2f} ms (whole-body `notes_update` of the same note: "
            f"{p50(lat.whole_update):.2f} ms)",
            edit_p50 < 5.0,
        )
    )
    results.checks.append(
        Check(
            "`notes_update` with its version kept at most 15% slower than without",
            f"{ratio:.2f}x (p50 {p50(lat.update_kept):.3f} vs {p50(lat.update_bare):.3f} ms)",
            ratio <= 1.15,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--pg", default=None, help="an admin URL, e.g. postgresql+psycopg://...")
    args = parser.parse_args()
    from bench_lib.results import Results

    results = Results(quick=False)
    run(results, edits=args.edits, calls=args.calls, pg_admin=args.pg)
    for _title, (_header, rows) in results.tables.items():
        for name, value in rows:
            print(f"{name}: {value}")
    for check in results.checks:
        print(f"{check.target}: {check.value} ({'met' if check.met else 'missed'})")


if __name__ == "__main__":
    main()
