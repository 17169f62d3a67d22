"""2025-11-25 HTTP sessions: latency vs load with an elicitation round trip in every round.

Each client process opens its own session (`legacy_http_client.py`) and loops, lock-step, one
round: `notes_create`, `notes_read`, and a confirmed `notes_delete` whose server-initiated
`elicitation/create` arrives on the call's SSE stream and is answered by a second POST. One
worker each: notes-server with token auth, the SDK peer in its stateful session mode
(`sdk_notes_server.py --sessions`). Each server gets its own copy of the database, so the end
check is exact: every note a client created is gone, and the audit log has one delete for each.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

from bench_lib.common import OURS, PEER, VENV_PY, WORKSPACE, log, percentile
from bench_lib.http_load import plot_against_clients
from bench_lib.http_servers import PATH, HttpServer, create_token, run_clients
from bench_lib.results import Results, fmt

TITLE = (
    "2025-11-25 HTTP sessions: latency vs load (1 worker; a round = `notes_create` + "
    "`notes_read` + confirmed `notes_delete` with its `elicitation/create` round trip; "
    "one trial per point)"
)
LABELS = {OURS: "notes-server", PEER: "SDK peer"}
CLIENT = str(Path(__file__).resolve().parent / "legacy_http_client.py")
OPERATIONS = ("create", "read", "delete")
Point = dict[str, float]


def load(server: HttpServer, impl: str, clients: int, seconds: float) -> tuple[Point, int]:
    """One point of the curve: (rounds/s, p50/p99 ms per operation, server CPU ms per round;
    rounds run)."""
    start_at = time.time() + 1.0 + 0.08 * clients
    args = [VENV_PY, CLIENT, str(server.port), PATH, str(seconds), str(start_at), WORKSPACE]
    commands = [[*args, f"{impl}-{clients}-{n}"] for n in range(clients)]
    what = f"2025-11-25 HTTP client of {impl}"
    outcomes, cpu = run_clients(server, commands, what, timeout=300)
    rounds = sum(o["iterations"] for o in outcomes)
    # The CPU includes each client's session opening and warm-up round, counted as rounds.
    point: Point = {
        "rate": rounds / max(o["elapsed"] for o in outcomes),
        "cpu_ms": 1000 * cpu / (rounds + clients),
    }
    for op in OPERATIONS:
        latencies = [x for o in outcomes for x in o["lat"][op]]
        point[f"{op}_p50"] = percentile(latencies, 50) / 1000
        point[f"{op}_p99"] = percentile(latencies, 99) / 1000
    # Each client also ran one warm-up round before the clock started.
    return point, rounds + clients


def verify(db: str, rounds: int) -> None:
    """Every benchmark note is gone, deleted once each through the confirmation."""
    with sqlite3.connect(db) as conn:
        left = conn.execute("SELECT count(*) FROM notes WHERE title LIKE 'legacy bench %'")
        audited = conn.execute(
            "SELECT count(*) FROM audit_log WHERE tool = 'notes_delete' AND outcome = 'deleted'"
            " AND note_title LIKE 'legacy bench %'"
        )
        counts = (left.fetchone()[0], audited.fetchone()[0])
    if counts != (0, rounds):
        raise RuntimeError(
            f"after {rounds} confirmed deletes: {counts[0]} benchmark notes left and "
            f"{counts[1]} audited deletes (expected 0 and {rounds})"
        )


def run(results: Results, db: str, workdir: Path, *, clients: list[int], seconds: float) -> None:
    curve: dict[str, list[tuple[int, Point]]] = {OURS: [], PEER: []}
    copies = {impl: str(workdir / f"legacy-http-{impl}.db") for impl in (OURS, PEER)}
    for copy in copies.values():
        shutil.copyfile(db, copy)
    logfile = workdir / "legacy-http.log"
    servers: dict[str, HttpServer] = {}
    rounds = {OURS: 0, PEER: 0}
    try:
        servers[OURS] = HttpServer(
            OURS, copies[OURS], 1, logfile, create_token(copies[OURS]), workdir / "unused"
        )
        servers[PEER] = HttpServer(
            PEER, copies[PEER], 1, logfile, "", workdir / "unused", peer_args=["--sessions"]
        )
        for n, count in enumerate(clients):
            log(f"2025-11-25 HTTP sessions: {count} clients x {seconds}s")
            for impl in (OURS, PEER) if n % 2 == 0 else (PEER, OURS):
                point, ran = load(servers[impl], impl, count, seconds)
                curve[impl].append((count, point))
                rounds[impl] += ran
    except RuntimeError as exc:
        results.notes.append(f"2025-11-25 HTTP load curve: failed — {exc}")
        log(f"2025-11-25 HTTP load curve failed: {exc}")
        return
    finally:
        for server in servers.values():
            server.close()
    for impl, copy in copies.items():
        verify(copy, rounds[impl])
    results.raw["legacy_http_load"] = curve
    results.notes.append(
        "2025-11-25 HTTP load curve: every round's note read back, offered alone, confirmed and "
        f"reported deleted; at the end no benchmark note was left and the audit log held one "
        f"delete for each round ({rounds[OURS]:,} notes-server, {rounds[PEER]:,} SDK peer)."
    )
    _table(results, curve, clients)


def _table(results: Results, curve: dict[str, list[tuple[int, Point]]], clients: list[int]) -> None:
    header = ["clients"]
    for impl in (OURS, PEER):
        header += [
            f"{LABELS[impl]} rounds/s",
            f"{LABELS[impl]} read p50 / p99 ms",
            f"{LABELS[impl]} delete (with elicitation) p50 / p99 ms",
            f"{LABELS[impl]} create p99 ms",
            f"{LABELS[impl]} server CPU ms / round",
        ]
    rows = []
    for n, count in enumerate(clients):
        row = [str(count)]
        for impl in (OURS, PEER):
            p = curve[impl][n][1]
            row += [
                fmt(p["rate"]),
                f"{fmt(p['read_p50'])} / {fmt(p['read_p99'])}",
                f"{fmt(p['delete_p50'])} / {fmt(p['delete_p99'])}",
                fmt(p["create_p99"]),
                fmt(p["cpu_ms"]),
            ]
        rows.append(row)
    results.tables[TITLE] = (header, rows)


def write_plot(results: Results, path: Path) -> bool:
    """Rounds/s and p99 of read and delete against clients; False without data or matplotlib."""
    curve = results.raw.get("legacy_http_load")
    if not curve:
        return False
    panels = (
        ("rate", "rounds/s (higher is better)", False),
        ("read_p99", "notes_read p99 ms", True),
        ("delete_p99", "notes_delete + elicitation p99 ms", True),
    )
    title = "2025-11-25 HTTP sessions, 1 worker: create + read + confirmed delete per round"
    return plot_against_clients(path, curve, LABELS, panels, "sessions (lock-step clients)", title)
