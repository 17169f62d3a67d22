"""Search latency end to end over stdio at several database sizes (lock-step, warm servers)."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peers.peer_index import PEER_FTS

from bench_lib import client
from bench_lib.common import (
    OURS,
    PEER,
    WORKSPACE,
    Measure,
    StdioServer,
    log,
    ours_cmd,
    peer_cmd,
    percentile,
)
from bench_lib.common import search_call as call
from bench_lib.datasets import DatasetInfo, queries
from bench_lib.results import Check, Results, Row

SECTION = "Search (`notes_search`, FTS5 bm25 + snippet, 20 hits) end to end over stdio"
# The peer's ranked search statement (the plain join: every match joined to its row, then
# ranked) over its own index (peers/peer_index.py), executed in-process with stdlib sqlite3.
PEER_SQL = (
    "SELECT n.id, n.workspace, n.path, n.title, n.body, n.created_at, n.updated_at, n.version,"
    f" n.archived, n.archived_at, snippet({PEER_FTS}, 1, '**', '**', '…', 12)"
    f" FROM notes n JOIN {PEER_FTS} ON {PEER_FTS}.rowid = n.seq"
    f" WHERE {PEER_FTS} MATCH ? AND n.workspace = ? AND n.archived = 0"
    f" ORDER BY bm25({PEER_FTS}, 10.0, 1.0), n.id LIMIT 21"
)


def ours_statement(query: str) -> tuple[str, Any]:
    """notes-server's candidate statement for one query (words through FTS5, substrings
    through the trigram index), as it sends it; the ranking itself runs in Python after it."""
    from notes_server.store import search
    from notes_server.store.search_terms import parse

    parsed = parse(query)
    assert parsed is not None
    sql, params = search.sqlite_candidates(parsed, False)
    return sql, {**params, "workspace": WORKSPACE}


def peer_statement(query: str) -> tuple[str, Any]:
    return PEER_SQL, (" ".join(f'"{w}"*' for w in re.findall(r"\w+", query)[:16]), WORKSPACE)


def _sqlite_floor(
    path: str, texts: list[str], trials: int, build: Callable[[str], tuple[str, Any]]
) -> tuple[Measure, Measure]:
    """p50 and p99 (ms) of one ranked statement alone, stdlib sqlite3, same queries."""
    statements = [build(t) for t in texts]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    p50, p99 = Measure(), Measure()
    try:
        for trial in range(trials + 1):
            lat = []
            for sql, params in statements:
                started = time.perf_counter()
                conn.execute(sql, params).fetchall()
                lat.append((time.perf_counter() - started) * 1000)
            if trial:  # the first pass is the warm-up
                p50.trials.append(percentile(lat, 50))
                p99.trials.append(percentile(lat, 99))
    finally:
        conn.close()
    return p50, p99


def run(
    results: Results,
    datasets: list[DatasetInfo],
    workdir: Path,
    *,
    trials: int,
    query_count: int,
) -> None:
    logfile = workdir / "search.log"
    texts = queries(query_count)
    payloads = [call(i, q) for i, q in enumerate(texts)]
    table = []
    for info in datasets:
        log(f"search at {info.notes:,} notes: {trials} trials x {query_count} queries, alternating")
        servers = {OURS: StdioServer(ours_cmd(info.path), logfile)}
        servers[PEER] = StdioServer(peer_cmd(info.path), logfile)
        p50 = {OURS: Measure(), PEER: Measure()}
        p99 = {OURS: Measure(), PEER: Measure()}
        try:
            for server in servers.values():  # warm-up: every query once, caches hot
                client.lockstep(server, payloads, seconds=3600, max_count=len(payloads))
            for trial in range(trials):
                order = [OURS, PEER] if trial % 2 == 0 else [PEER, OURS]
                for impl in order:
                    outcome = client.lockstep(
                        servers[impl], payloads, seconds=3600, max_count=len(payloads)
                    )
                    lat_ms = [x / 1000 for x in outcome.latencies_us]
                    p50[impl].trials.append(percentile(lat_ms, 50))
                    p99[impl].trials.append(percentile(lat_ms, 99))
                    p50[impl].samples.extend(lat_ms)
            results.memory.append(
                (
                    f"after search at {info.notes:,} notes",
                    servers[OURS].peak_rss_kib(),
                    servers[PEER].peak_rss_kib(),
                )
            )
        finally:
            for server in servers.values():
                server.close()
        floor50, floor99 = _sqlite_floor(info.path, texts, trials, ours_statement)
        peer50, peer99 = _sqlite_floor(info.path, texts, trials, peer_statement)
        size = f"{info.notes:,} notes"
        results.row(Row(SECTION, f"{size}: p50", "ms", False, p50[OURS], p50[PEER]))
        results.row(Row(SECTION, f"{size}: p99", "ms", False, p99[OURS], p99[PEER]))
        for pct, ours_floor, peer_floor in (("p50", floor50, peer50), ("p99", floor99, peer99)):
            label = f"{size}: SQLite alone, each server's ranked statement in-process, {pct}"
            results.row(Row(SECTION, label, "ms", False, ours_floor, peer_floor))
        results.plot(f"search latency, {info.notes:,} notes (ms)", OURS, p50[OURS].samples)
        results.plot(f"search latency, {info.notes:,} notes (ms)", PEER, p50[PEER].samples)
        table.append(
            [
                f"{info.notes:,}",
                f"{info.load_s:.1f} s",
                f"{info.index_build_s:.1f} s",
                f"{info.size_bytes / 2**20:,.0f} MiB",
                f"{p50[OURS].median:.2f} / {p99[OURS].median:.2f} ms",
                f"{p50[PEER].median:.2f} / {p99[PEER].median:.2f} ms",
                f"{floor50.median:.2f} / {floor99.median:.2f} ms",
                f"{peer50.median:.2f} / {peer99.median:.2f} ms",
            ]
        )
        if info.notes >= 1_000_000:
            results.checks.append(
                Check(
                    "search at 1M notes: p50 < 5 ms end to end over stdio",
                    f"{p50[OURS].median:.2f} ms (p99 {p99[OURS].median:.2f} ms)",
                    p50[OURS].median < 5.0,
                )
            )
            results.checks.append(
                Check(
                    "(context) notes-server's ranked statement in SQLite alone, in-process,"
                    " at 1M notes",
                    f"p50 {floor50.median:.2f} ms, p99 {floor99.median:.2f} ms",
                    None,
                )
            )
    results.tables["Search databases (generated; load = executemany, index = FTS5 rebuild)"] = (
        [
            "notes",
            "load",
            "FTS5 index build",
            "database size",
            "ours p50 / p99",
            "peer p50 / p99",
            "SQLite alone, our statement",
            "SQLite alone, peer's statement",
        ],
        table,
    )
