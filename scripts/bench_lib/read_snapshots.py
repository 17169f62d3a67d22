"""In-process cost of read-only tool calls with SQLite reads on the per-thread held connection
(store.snapshot) against the pooled read transaction it replaced, in one process, the two
taking turns so that a busy moment on the shared machine hits both alike.

Usage: scripts/bench_lib/read_snapshots.py [--count N] [--notes N] [--repeat R]
Prints CPU µs per request (process time, best of R rounds of N requests) through stdio's
`handle_raw` (notes_read, notes_search) and through the HTTP ASGI app (notes_read, token auth).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_lib.common import BENCH_PRINCIPAL, read_call, search_call
from bench_lib.http_inprocess import _drive, bench_database, interleaved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with bench_database(args.notes) as (db, token, ids):
        reads = [read_call(i, ids[i % len(ids)]).rstrip(b"\n") for i in range(args.count)]
        words = ("report", "meeting", "plan", "notes", "budget")
        searches = [
            search_call(i, words[i % len(words)]).rstrip(b"\n") for i in range(args.count // 10)
        ]
        measure(db, token, reads, searches, args.repeat)


def measure(db: Path, token: str, reads: list[bytes], searches: list[bytes], repeat: int) -> None:
    import uvloop

    from notes_server.app import create_http_app, create_server
    from notes_server.config import HttpSettings, build_settings
    from notes_server.store import snapshot
    from notes_server.tools.services import Services

    settings = build_settings(db=f"sqlite:///{db}", principal=BENCH_PRINCIPAL)
    services = Services(settings)
    server = create_server(settings, services)
    app = create_http_app(settings, HttpSettings(auth="token"), services)
    engine = services.engine
    held = snapshot.ThreadSnapshots.of(engine)
    assert held is not None, "the engine has no per-thread snapshots"
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)

    def use(held_reads: bool) -> None:
        # The pooled path is exactly what read_tx does for an engine without snapshots.
        if held_reads:
            setattr(engine, snapshot._ATTRIBUTE, held)
        elif hasattr(engine, snapshot._ATTRIBUTE):
            delattr(engine, snapshot._ATTRIBUTE)

    def stdio(bodies: list[bytes], held_reads: bool) -> Callable[[], float]:
        def run() -> float:
            use(held_reads)
            started = time.process_time()
            for body in bodies:
                reply = server.handle_raw(body, BENCH_PRINCIPAL)
                assert reply is not None and b'"isError":true' not in reply, reply
            return (time.process_time() - started) / len(bodies)

        return run

    def http(held_reads: bool) -> Callable[[], float]:
        def run() -> float:
            use(held_reads)
            return loop.run_until_complete(_drive(app, reads, token)) / len(reads)

        return run

    variants = {
        ("stdio notes_read", "pooled"): stdio(reads, False),
        ("stdio notes_read", "held"): stdio(reads, True),
        ("stdio notes_search", "pooled"): stdio(searches, False),
        ("stdio notes_search", "held"): stdio(searches, True),
        ("HTTP notes_read", "pooled"): http(False),
        ("HTTP notes_read", "held"): http(True),
    }
    for run in variants.values():
        run()  # warm-up: statements compiled, token remembered, pages cached
    best = interleaved(variants, repeat)
    use(True)
    for name in dict.fromkeys(name for name, _ in variants):
        pooled, held_us = best[(name, "pooled")] * 1e6, best[(name, "held")] * 1e6
        print(
            f"{name}: pooled {pooled:.1f} µs, held {held_us:.1f} µs "
            f"({(pooled - held_us) / pooled:.0%} less CPU per request)"
        )
    loop.close()


if __name__ == "__main__":
    main()
