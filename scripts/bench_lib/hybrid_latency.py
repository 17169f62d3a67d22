"""Hybrid and keyword `notes_search` latency end to end over stdio at one generated size, with
every note embedded first (indexing throughput measured on the way), and the memory of `serve`
with the model loaded. Run from scripts/: `../.venv/bin/python -m bench_lib.hybrid_latency
100000` (needs the `semantic` extra). Not part of `scripts/bench`' report: no peer has a
hybrid search to compare with; these are absolute figures of one run on a shared machine.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench_lib import client, datasets
from bench_lib.common import (
    WORKSPACE,
    StdioServer,
    ours_cmd,
    percentile,
    server_env,
    tool_call,
)

CACHE = Path(__file__).resolve().parents[2] / "bench-results" / "db"


def measure(notes: int, query_count: int = 200) -> dict[str, float]:
    from notes_server.store import embedding, indexer, semantic
    from notes_server.store.engine import make_engine, write_tx

    info = datasets.cached(CACHE, notes)
    out: dict[str, float] = {"notes": notes}
    with tempfile.TemporaryDirectory() as tmp:
        path = datasets.working_copy(info.path, Path(tmp) / "hybrid.db")
        engine = make_engine(f"sqlite:///{path}")
        with write_tx(engine) as conn:
            semantic.enqueue(conn)
        embedder = embedding.Embedder()
        embedder.embed(["load the model before the clock starts"])
        started = time.perf_counter()
        out["passages"] = indexer.drain(engine, embedder)
        out["index_s"] = time.perf_counter() - started
        engine.dispose()
        texts = datasets.queries(query_count)
        env = server_env()
        env["NOTES_SERVER_SEMANTIC"] = "on"
        server = StdioServer(ours_cmd(str(path)), Path(tmp) / "serve.log", env=env)
        try:
            for mode in ("keyword", "hybrid", "keyword", "hybrid"):  # the first pair warms up
                arguments = [{"workspaceUri": WORKSPACE, "query": q, "mode": mode} for q in texts]
                payloads = [tool_call(i, "notes_search", a) for i, a in enumerate(arguments)]
                outcome = client.lockstep(server, payloads, seconds=600, max_count=len(payloads))
                lat_ms = [x / 1000 for x in outcome.latencies_us]
                out[f"{mode}_p50_ms"] = percentile(lat_ms, 50)
                out[f"{mode}_p99_ms"] = percentile(lat_ms, 99)
            rss = server.peak_rss_kib()
            out["serve_peak_rss_mib"] = (rss or 0) / 1024
        finally:
            server.close()
    return out


if __name__ == "__main__":
    for size in [int(a) for a in sys.argv[1:]] or [10_000]:
        figures = measure(size)
        rate = figures["passages"] / figures["index_s"]
        print(
            f"{size:,} notes: {figures['passages']:,.0f} passages embedded in "
            f"{figures['index_s']:.1f} s ({rate:,.0f} passages/s); over stdio, lock-step: "
            f"keyword p50 {figures['keyword_p50_ms']:.2f} ms / p99 {figures['keyword_p99_ms']:.2f}"
            f" ms, hybrid p50 {figures['hybrid_p50_ms']:.2f} ms / p99 "
            f"{figures['hybrid_p99_ms']:.2f} ms; serve peak RSS "
            f"{figures['serve_peak_rss_mib']:.0f} MiB"
        )
