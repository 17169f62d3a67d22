"""Full confirmed deletes (round 1 + round 2 + the write transaction) with N server processes
on one SQLite file, against raw sqlite3 doing the same transaction; every run's counts verified."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench_lib import client
from bench_lib.common import (
    OURS,
    PEER,
    VENV_PY,
    Measure,
    StdioServer,
    command,
    cpu_seconds,
    log,
    server_env,
)
from bench_lib.datasets import title_for, working_copy
from bench_lib.results import Check, Results, Row

SECTION = "Confirmed delete (round 1 + round 2 + transaction), one client per process"
WORKER = str(Path(__file__).resolve().parent / "sqlite_worker.py")
RAW = "raw sqlite3"


def _titles(total: int, workers: int, worker: int) -> list[str]:
    # Note i has seq i + 1: the same split the raw worker uses (seq % workers == worker).
    return [title_for(i) for i in range(total) if (i + 1) % workers == worker]


def _verify(db: Path, total: int, expected_deletes: int, deleted_ids: list[str] | None) -> None:
    """No lost and no doubled delete: every count agrees with what the clients were told."""
    conn = sqlite3.connect(db)
    try:
        remaining = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
        audits = conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
        distinct = conn.execute("SELECT count(DISTINCT note_id) FROM audit_log").fetchone()[0]
        nonces = conn.execute("SELECT count(*) FROM consumed_nonces").fetchone()[0]
        still_there = conn.execute(
            "SELECT count(*) FROM audit_log a JOIN notes n ON n.id = a.note_id"
        ).fetchone()[0]
    finally:
        conn.close()
    counts = {
        "deleted rows": total - remaining,
        "audit rows": audits,
        "distinct audited notes": distinct,
        "consumed nonces": nonces,
    }
    bad = {k: v for k, v in counts.items() if v != expected_deletes}
    if bad or still_there:
        raise RuntimeError(f"delete accounting broken: expected {expected_deletes}, got {counts}")
    if deleted_ids is not None and len(set(deleted_ids)) != len(deleted_ids):
        raise RuntimeError("a note was reported deleted twice")


@dataclass(frozen=True)
class _ServersRun:
    rate: float
    latencies_us: list[float]
    rss: list[int | None]
    cpu_per_delete_us: float  # all server processes together, timed run only


def _run_servers(
    impl: str, db: Path, total: int, procs: int, seconds: float, logfile: Path
) -> _ServersRun:
    servers = [StdioServer(command(impl, str(db)), logfile) for _ in range(procs)]
    try:
        titles = [_titles(total, procs, k) for k in range(procs)]
        warm = client.confirmed_deletes(servers, [t[:1] for t in titles], seconds=60)
        cpu_before = sum(cpu_seconds(s.pid) for s in servers)
        run = client.confirmed_deletes(servers, [t[1:] for t in titles], seconds=seconds)
        cpu = sum(cpu_seconds(s.pid) for s in servers) - cpu_before
        rss = [s.peak_rss_kib() for s in servers]
    finally:
        for server in servers:
            server.close()
    _verify(db, total, warm.deletes + run.deletes, warm.deleted_ids + run.deleted_ids)
    return _ServersRun(run.rate, run.latencies_us, rss, cpu / max(run.deletes, 1) * 1e6)


def _run_raw(db: Path, total: int, procs: int, seconds: float) -> float:
    start_at = time.time() + 0.3 + 0.05 * procs
    workers = [
        subprocess.Popen(
            [VENV_PY, WORKER, str(db), str(k), str(procs), str(seconds), str(start_at)],
            stdout=subprocess.PIPE,
            env=server_env(),
        )
        for k in range(procs)
    ]
    outcomes = []
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        if worker.returncode:
            raise RuntimeError(f"sqlite worker failed ({worker.returncode})")
        outcomes.append(json.loads(out))
    count = sum(o["count"] for o in outcomes)
    _verify(db, total, count, None)
    return count / max(o["elapsed"] for o in outcomes)


def run(
    results: Results,
    source_db: str,
    total: int,
    workdir: Path,
    *,
    process_counts: list[int],
    reps: int,
    seconds: float,
) -> None:
    logfile = workdir / "deletes.log"
    copy = workdir / "deletes.db"
    by_n: dict[int, dict[str, Measure]] = {}
    for procs in process_counts:
        log(f"confirmed deletes, {procs} process(es): {reps} reps x {seconds}s, alternating")
        measures = {OURS: Measure(), PEER: Measure(), RAW: Measure()}
        cpu = {OURS: Measure(), PEER: Measure()}
        rss: dict[str, list[int | None]] = {OURS: [], PEER: []}
        for rep in range(reps):
            order = [OURS, PEER, RAW] if rep % 2 == 0 else [RAW, PEER, OURS]
            for impl in order:
                working_copy(source_db, copy)
                if impl == RAW:
                    measures[RAW].trials.append(_run_raw(copy, total, procs, seconds))
                    continue
                outcome = _run_servers(impl, copy, total, procs, seconds, logfile)
                measures[impl].trials.append(outcome.rate)
                measures[impl].samples.extend(outcome.latencies_us)
                cpu[impl].trials.append(outcome.cpu_per_delete_us)
                rss[impl] = outcome.rss
        by_n[procs] = measures
        label = "1 process (one client)" if procs == 1 else f"{procs} processes"
        results.row(Row(SECTION, label, "deletes/s", True, measures[OURS], measures[PEER]))
        results.row(
            Row(SECTION, f"{label}: raw sqlite3, same transaction", "tx/s", True, measures[RAW])
        )
        results.row(
            Row(
                SECTION,
                f"{label}: server CPU per delete (all processes)",
                "µs",
                False,
                cpu[OURS],
                cpu[PEER],
            )
        )
        if procs == 1:
            results.plot("confirmed delete latency, 1 process (µs)", OURS, measures[OURS].samples)
            results.plot("confirmed delete latency, 1 process (µs)", PEER, measures[PEER].samples)
        results.memory.append(
            (
                f"after confirmed deletes, {label} (max per process)",
                _max(rss[OURS]),
                _max(rss[PEER]),
            )
        )
    best_raw = max(statistics_median(m[RAW]) for m in by_n.values())
    rows = []
    for procs, measures in by_n.items():
        ours = statistics_median(measures[OURS])
        rows.append(
            [
                str(procs),
                f"{ours:,.0f}",
                f"{statistics_median(measures[PEER]):,.0f}",
                f"{statistics_median(measures[RAW]):,.0f}",
                f"{100 * ours / statistics_median(measures[RAW]):.0f}%",
                f"{100 * ours / best_raw:.0f}%",
            ]
        )
    results.tables["Confirmed deletes vs the SQLite commit-rate ceiling"] = (
        [
            "processes",
            "ours /s",
            "peer /s",
            "raw sqlite3 /s",
            "ours ÷ raw (same N)",
            "ours ÷ ceiling",
        ],
        rows,
    )
    top = max(by_n)
    share = statistics_median(by_n[top][OURS]) / best_raw
    results.checks.append(
        Check(
            f"confirmed delete with {top} processes ≥ 50% of the SQLite ceiling (best raw rate "
            "over all N, the same transaction, this run), no lost or doubled delete",
            f"{100 * share:.0f}% ({statistics_median(by_n[top][OURS]):,.0f}/s vs "
            f"{best_raw:,.0f}/s); counts verified after every run",
            share >= 0.5,
        )
    )


def statistics_median(measure: Measure) -> float:
    return measure.median


def _max(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None
