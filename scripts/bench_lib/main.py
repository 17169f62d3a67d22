"""`scripts/bench`: run every benchmark against notes-server and the SDK peer, write the report."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench_lib import (
    changes,
    coldstart,
    completion,
    datasets,
    deletes,
    floor,
    history_cost,
    http_bench,
    http_load,
    idle_listens,
    legacy_http_load,
    links,
    pg,
    report,
    search,
    stdio_rates,
)
from bench_lib.common import ROOT, SOURCE_OVERRIDE, compile_ours, loadavg, log
from bench_lib.results import Results

SUITES = (
    "cold",
    "stdio",
    "floor",
    "deletes",
    "search",
    "http",
    "legacy-http",
    "pg",
    "links",
    "history",
    "changes",
)


@dataclass(frozen=True)
class Plan:
    cold_reps: int
    cold_first: tuple[str, ...]
    stdio_trials: int
    stdio_seconds: float
    pipeline_depth: int
    pipeline_trials: int
    delete_procs: tuple[int, ...]
    delete_reps: int
    delete_seconds: float
    delete_notes: int
    search_sizes: tuple[int, ...]
    search_trials: int
    search_queries: int
    http_workers: tuple[int, ...]
    http_trials: int
    http_seconds: float
    http_clients: int
    http_curve: tuple[int, ...]
    legacy_http_curve: tuple[int, ...]
    legacy_http_seconds: float
    pg_clients: tuple[int, ...]
    pg_reps: int
    pg_seconds: float
    pg_search_notes: int
    history_edits: int
    history_calls: int
    links_notes: int = 100_000
    links_per_note: int = 10
    links_calls: int = 400
    stdio_payloads: int = 500  # distinct notes_read ids (notes_search: 2/5 as many queries)
    floor_cold_reps: int = 20  # cold starts of ours and of the `python -c` floor, each
    change_count: int = 200  # changes from process A to a listen on process B, per backend
    idle_listens: int = 1000  # open idle listens on one HTTP server (its CPU time measured)
    idle_window_s: float = 30.0  # each CPU window: two keep-alive rounds (15 s)


FULL = Plan(
    cold_reps=10,
    cold_first=("server/discover", "tools/list", "tools/call notes_read"),
    stdio_trials=5,
    stdio_seconds=1.0,
    pipeline_depth=1000,
    pipeline_trials=5,
    delete_procs=(1, 2, 4, 8),
    delete_reps=3,
    delete_seconds=2.0,
    delete_notes=100_000,
    search_sizes=(10_000, 100_000, 1_000_000),
    search_trials=3,
    search_queries=200,
    http_workers=(1, 2),
    http_trials=3,
    http_seconds=2.0,
    http_clients=4,
    http_curve=(1, 4, 16, 64),
    legacy_http_curve=(1, 4, 16, 64),
    legacy_http_seconds=4.0,
    pg_clients=(1, 8, 16),
    pg_reps=3,
    pg_seconds=3.0,
    pg_search_notes=100_000,
    history_edits=1000,
    history_calls=1000,
)
QUICK = Plan(
    cold_reps=2,
    cold_first=("server/discover", "tools/list"),
    stdio_trials=2,
    stdio_seconds=0.3,
    pipeline_depth=200,
    pipeline_trials=2,
    delete_procs=(1, 2),
    delete_reps=1,
    delete_seconds=0.5,
    delete_notes=10_000,
    search_sizes=(10_000,),
    search_trials=2,
    search_queries=50,
    http_workers=(1,),
    http_trials=1,
    http_seconds=0.5,
    http_clients=4,
    http_curve=(1, 4),
    legacy_http_curve=(1, 4),
    legacy_http_seconds=0.5,
    pg_clients=(1, 16),
    pg_reps=1,
    pg_seconds=1.0,
    pg_search_notes=10_000,
    links_notes=2_000,
    links_calls=60,
    history_edits=50,
    history_calls=50,
    floor_cold_reps=6,
    change_count=50,
    idle_window_s=16.0,
)
# The test suite's smoke run (tests/test_bench_smoke.py): every suite, every row and check,
# each on the smallest input that still takes its code path (two points where a row compares
# process or client counts, so the plots get a curve). Its figures mean nothing.
SMOKE = Plan(
    cold_reps=1,
    cold_first=("server/discover",),
    stdio_trials=1,
    stdio_seconds=0.1,
    pipeline_depth=20,
    pipeline_trials=1,
    delete_procs=(1, 2),
    delete_reps=1,
    delete_seconds=0.2,
    delete_notes=500,
    search_sizes=(500,),
    search_trials=1,
    search_queries=5,
    http_workers=(1,),
    http_trials=1,
    http_seconds=0.2,
    http_clients=2,
    http_curve=(1, 2),
    legacy_http_curve=(1, 2),
    legacy_http_seconds=0.2,
    pg_clients=(1,),  # three instances already; more clients take the same path
    pg_reps=1,
    pg_seconds=0.3,
    pg_search_notes=500,
    links_notes=200,
    links_calls=10,
    history_edits=5,
    history_calls=5,
    stdio_payloads=10,
    floor_cold_reps=1,
    change_count=3,
    idle_listens=30,
    idle_window_s=1.0,
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description="Benchmark notes-server against an equivalent server on the official MCP "
        "Python SDK (scripts/peers/sdk_notes_server.py), alternating A B A B in one run, and "
        "write BENCHMARKS.md plus a latency plot.",
    )
    parser.add_argument("--quick", action="store_true", help="the < 1 minute subset")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest run through every suite and row (the test suite's check that the "
        "bench runs; its figures mean nothing)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write BENCHMARKS.md and latency.png into this directory "
        "(default: BENCHMARKS.md at the repository root, docs/bench/latency.png)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=ROOT / "bench-results",
        help="where generated databases are cached by size (default: bench-results/)",
    )
    parser.add_argument(
        "--only",
        default=",".join(SUITES),
        help=f"comma-separated subset of {', '.join(SUITES)} (floor: our stdio rates and cold "
        "start beside a bare Python process that parses each request and writes our reply "
        "bytes; legacy-http: 2025-11-25 HTTP "
        "sessions with an elicitation round trip per round, 1 to 64 clients; pg: PostgreSQL "
        "beside SQLite, on "
        "throw-away databases of the server at $NOTES_BENCH_PG_URL, default the local one; "
        "skipped, with a note in the report, when no server is reachable)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="JSON",
        help="a summary written by an earlier run (bench-results/last-run.json); the report "
        "gets a before/after table of notes-server's figures (e.g. docs/bench/before-changes.json)",
    )
    parser.add_argument(
        "--ours-src",
        type=Path,
        default=None,
        metavar="DIR",
        help="run notes-server from the `notes_server` package under DIR (put first on "
        "PYTHONPATH) instead of the installed one, e.g. a copy of an older revision",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    plan = SMOKE if args.smoke else QUICK if args.quick else FULL
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(only) - set(SUITES)
    if unknown:
        raise SystemExit(f"unknown suites: {', '.join(sorted(unknown))}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        md_path, plot_path = args.out / "BENCHMARKS.md", args.out / "latency.png"
    else:
        md_path, plot_path = ROOT / "BENCHMARKS.md", report.default_plot_path()
    results = Results(quick=args.quick or args.smoke, smoke=args.smoke)
    if args.baseline is not None:
        results.raw["baseline"] = json.loads(args.baseline.read_text(encoding="utf-8"))
        results.raw["baseline_path"] = str(args.baseline)
    if args.ours_src is not None:
        SOURCE_OVERRIDE["ours"] = str(args.ours_src.resolve())
        results.notes.append(f"notes-server ran from `{args.ours_src}` (`--ours-src`).")
    results.raw["loadavg_start"] = loadavg()
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="notes-bench-"))
    try:
        _run(results, plan, only, args.cache_dir, workdir)
    finally:
        results.timings["total"] = time.perf_counter() - started
        results.raw["loadavg_end"] = loadavg()
        wrote_plot = report.write_plot(results, plot_path)
        load_plot = plot_path.parent / "http-load.png"
        if http_load.write_plot(results, load_plot):
            where = os.path.relpath(load_plot, md_path.parent)
            results.notes.append(f"HTTP latency vs load: ![HTTP latency vs load]({where})")
        legacy_plot = plot_path.parent / "http-legacy-load.png"
        if legacy_http_load.write_plot(results, legacy_plot):
            where = os.path.relpath(legacy_plot, md_path.parent)
            results.notes.append(
                f"2025-11-25 HTTP sessions vs load: ![2025-11-25 HTTP latency vs load]({where})"
            )
        shown = [a for a in argv if not a.startswith("--out") and a != str(args.out)]
        report.write_markdown(results, md_path, plot_path if wrote_plot else None, shown)
        dump = args.cache_dir / (
            "last-run-smoke.json"
            if args.smoke
            else "last-run-quick.json"
            if args.quick
            else "last-run.json"
        )
        dump.parent.mkdir(parents=True, exist_ok=True)
        dump.write_text(json.dumps(_summary(results, plan), indent=1, default=str))
        shutil.rmtree(workdir, ignore_errors=True)
    log(f"wrote {md_path} and {plot_path} in {results.timings['total']:.0f} s")
    return 0


def _run(results: Results, plan: Plan, only: list[str], cache: Path, workdir: Path) -> None:
    def stage(name: str) -> float:
        return results.timings.setdefault(name, 0.0)

    base_size = min(plan.search_sizes)
    compile_ours()  # bytecode caches, as an installed package has them
    t0 = time.perf_counter()
    base = datasets.cached(cache / "db", base_size)
    results.timings["datasets"] = time.perf_counter() - t0
    if "cold" in only:
        t0 = time.perf_counter()
        coldstart.run(
            results, base.path, workdir, reps=plan.cold_reps, first_calls=list(plan.cold_first)
        )
        results.timings["cold start"] = stage("cold start") + time.perf_counter() - t0
    if "stdio" in only:
        t0 = time.perf_counter()
        stdio_rates.run(
            results,
            base.path,
            workdir,
            trials=plan.stdio_trials,
            seconds=plan.stdio_seconds,
            pipeline_depth=plan.pipeline_depth,
            pipeline_trials=plan.pipeline_trials,
            payload_count=plan.stdio_payloads,
        )
        results.timings["stdio rates"] = time.perf_counter() - t0
    if "floor" in only:
        t0 = time.perf_counter()
        floor.run(
            results,
            base.path,
            workdir,
            trials=plan.stdio_trials,
            seconds=plan.stdio_seconds,
            cold_reps=plan.floor_cold_reps,
            payload_count=plan.stdio_payloads,
        )
        results.timings["floor"] = time.perf_counter() - t0
    if "deletes" in only:
        t0 = time.perf_counter()
        info = datasets.cached(cache / "db", plan.delete_notes)
        deletes.run(
            results,
            info.path,
            info.notes,
            workdir,
            process_counts=list(plan.delete_procs),
            reps=plan.delete_reps,
            seconds=plan.delete_seconds,
        )
        results.timings["deletes"] = time.perf_counter() - t0
    if "search" in only:
        t0 = time.perf_counter()
        infos = [datasets.cached(cache / "db", n, mixed=True) for n in plan.search_sizes]
        for info in infos:
            if info.generated_now:
                results.notes.append(
                    f"generated the {info.notes:,}-note database in this run "
                    f"({info.load_s + info.index_build_s:.0f} s, now cached)"
                )
        results.timings["search"] = time.perf_counter() - t0
        search.run(
            results, infos, workdir, trials=plan.search_trials, query_count=plan.search_queries
        )
        completion.run(
            results, infos, workdir, trials=plan.search_trials, count=plan.search_queries
        )
        results.timings["search"] = time.perf_counter() - t0
    if "http" in only:
        t0 = time.perf_counter()
        http_bench.run(
            results,
            base.path,
            workdir,
            workers=list(plan.http_workers),
            trials=plan.http_trials,
            seconds=plan.http_seconds,
            clients=plan.http_clients,
            curve=list(plan.http_curve),
        )
        results.timings["http"] = time.perf_counter() - t0
    if "legacy-http" in only:
        t0 = time.perf_counter()
        legacy_http_load.run(
            results,
            base.path,
            workdir,
            clients=list(plan.legacy_http_curve),
            seconds=plan.legacy_http_seconds,
        )
        results.timings["2025-11-25 http"] = time.perf_counter() - t0
    if "pg" in only:
        t0 = time.perf_counter()
        pg.run(
            results,
            base,
            datasets.cached(cache / "db", plan.pg_search_notes),
            workdir,
            clients=plan.pg_clients,
            reps=plan.pg_reps,
            seconds=plan.pg_seconds,
            search_trials=plan.search_trials,
            search_queries=plan.search_queries,
        )
        results.timings["postgresql"] = time.perf_counter() - t0
    if "links" in only:
        t0 = time.perf_counter()
        links.run(
            results,
            workdir,
            notes=plan.links_notes,
            links=plan.links_per_note,
            calls=plan.links_calls,
        )
        results.timings["links"] = time.perf_counter() - t0
    if "history" in only:
        t0 = time.perf_counter()
        problem = pg.reachable()
        if problem is not None:
            results.notes.append(f"note history on PostgreSQL not measured: {problem}")
        history_cost.run(
            results,
            edits=plan.history_edits,
            calls=plan.history_calls,
            pg_admin=None if problem is not None else pg.admin_url(),
        )
        results.timings["note history"] = time.perf_counter() - t0
    if "changes" in only:
        t0 = time.perf_counter()
        changes.run(results, workdir, changes=plan.change_count)
        idle_listens.run(results, workdir, listens=plan.idle_listens, window_s=plan.idle_window_s)
        results.timings["changes"] = time.perf_counter() - t0


def _summary(results: Results, plan: Plan) -> dict[str, object]:
    return {
        "plan": asdict(plan),
        "timings": results.timings,
        "rows": [
            {
                "section": r.section,
                "name": r.name,
                "unit": r.unit,
                "ours": r.ours.trials,
                "peer": r.peer.trials if r.peer else None,
                "advantage": r.advantage,
                "met": r.met,
            }
            for r in results.rows
        ],
        "checks": [asdict(c) for c in results.checks],
        "tables": results.tables,
        "memory": results.memory,
        "notes": results.notes,
    }
