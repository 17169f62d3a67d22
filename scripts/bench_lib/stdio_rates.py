"""Request rates over stdio on warm servers: lock-step (one in flight) and pipelined."""

from __future__ import annotations

import json
from pathlib import Path

from bench_lib import client
from bench_lib.common import (
    OURS,
    PEER,
    Measure,
    StdioServer,
    echo_cmd,
    log,
    ours_cmd,
    peer_cmd,
    percentile,
    read_call,
    request,
    search_call,
)
from bench_lib.datasets import note_ids, queries
from bench_lib.results import Check, Results, Row

SECTION = "Lock-step over stdio (1 request in flight), 10k notes"
PIPE_SECTION = "Pipelined over stdio"
TARGETS = {"tools/list": 20.0, "notes_read": 4.0, "notes_search": 4.0}


def _payloads(db: str, count: int) -> dict[str, list[bytes]]:
    ids = note_ids(db, count)
    return {
        "server/discover": [request(1, "server/discover")],
        "tools/list": [request(1, "tools/list")],
        "notes_read": [read_call(i, note) for i, note in enumerate(ids)],
        "notes_search": [search_call(i, q) for i, q in enumerate(queries(max(1, count * 2 // 5)))],
    }


def run(
    results: Results,
    db: str,
    workdir: Path,
    *,
    trials: int,
    seconds: float,
    pipeline_depth: int,
    pipeline_trials: int,
    payload_count: int = 500,
) -> None:
    payloads = _payloads(db, payload_count)
    logfile = workdir / "stdio.log"
    ours = StdioServer(ours_cmd(db), logfile)
    peer = StdioServer(peer_cmd(db), logfile)
    servers = {OURS: ours, PEER: peer}
    try:
        canned = workdir / "canned-tools-list.json"
        canned.write_bytes(ours.roundtrip(payloads["tools/list"][0]))
        echo = StdioServer(echo_cmd(str(canned)), logfile)
        log("lock-step warm-up")
        for server in (ours, peer):
            for kind_payloads in payloads.values():
                client.lockstep(
                    server, kind_payloads * 2, seconds=60, max_count=2 * len(kind_payloads)
                )
        client.lockstep(echo, payloads["tools/list"], seconds=60, max_count=200)
        for kind, kind_payloads in payloads.items():
            log(f"lock-step {kind}: {trials} trials x {seconds}s per implementation, alternating")
            measures = {OURS: Measure(), PEER: Measure(), "echo": Measure()}
            latency = {OURS: Measure(), PEER: Measure(), "echo": Measure()}
            cpu = {OURS: Measure(), PEER: Measure(), "echo": Measure()}
            for trial in range(trials):
                order = [OURS, PEER] if trial % 2 == 0 else [PEER, OURS]
                if kind == "tools/list":
                    order.append("echo")
                for impl in order:
                    server = echo if impl == "echo" else servers[impl]
                    outcome = client.lockstep(server, kind_payloads, seconds=seconds)
                    measures[impl].trials.append(outcome.rate)
                    latency[impl].trials.append(percentile(outcome.latencies_us, 50))
                    cpu[impl].trials.append(1e6 * outcome.server_cpu_s / outcome.count)
                    latency[impl].samples.extend(outcome.latencies_us[:: max(1, trial + 1)])
            factor = TARGETS.get(kind)
            results.row(
                Row(
                    SECTION,
                    f"`{kind}` rate",
                    "req/s",
                    True,
                    measures[OURS],
                    measures[PEER],
                    target=f"ours ≥ {factor:g}x the peer" if factor else "",
                    target_factor=factor,
                )
            )
            results.row(
                Row(SECTION, f"`{kind}` latency p50", "µs", False, latency[OURS], latency[PEER])
            )
            results.row(
                Row(
                    SECTION,
                    f"`{kind}` server CPU per request (all threads)",
                    "µs",
                    False,
                    cpu[OURS],
                    cpu[PEER],
                )
            )
            if kind in ("tools/list", "notes_read", "notes_search"):
                results.plot(f"lock-step {kind} latency (µs)", OURS, latency[OURS].samples)
                results.plot(f"lock-step {kind} latency (µs)", PEER, latency[PEER].samples)
            if kind == "tools/list":
                results.row(
                    Row(
                        SECTION,
                        "bare echo process, canned `tools/list` reply (floor)",
                        "req/s",
                        True,
                        measures["echo"],
                    )
                )
                overhead = latency[OURS].median / latency["echo"].median
                results.checks.append(
                    Check(
                        "protocol overhead: our `tools/list` p50 latency within 3x of the bare "
                        "echo process returning the same bytes",
                        f"{overhead:.2f}x ({latency[OURS].median:.1f} µs vs "
                        f"{latency['echo'].median:.1f} µs)",
                        overhead <= 3.0,
                    )
                )
        results.memory.append(
            ("after lock-step (10k notes)", ours.peak_rss_kib(), peer.peak_rss_kib())
        )
        _pipelined(results, servers, payloads, pipeline_depth, pipeline_trials)
        results.memory.append(("after pipelined", ours.peak_rss_kib(), peer.peak_rss_kib()))
        echo.close()
    finally:
        for server in servers.values():
            server.close()


def _pipelined(
    results: Results,
    servers: dict[str, StdioServer],
    payloads: dict[str, list[bytes]],
    depth: int,
    trials: int,
) -> None:
    for kind in ("notes_read", "tools/list"):
        source = payloads[kind]
        batch = [_with_id(source[i % len(source)], i) for i in range(depth)]
        log(f"pipelined {kind}: {depth} in flight, {trials} trials per implementation")
        measures = {OURS: Measure(), PEER: Measure()}
        for server in servers.values():
            client.pipelined(server, batch[: min(50, depth)])  # warm-up
        for trial in range(trials):
            order = [OURS, PEER] if trial % 2 == 0 else [PEER, OURS]
            for impl in order:
                elapsed = client.pipelined(servers[impl], batch)
                measures[impl].trials.append(depth / elapsed)
        results.row(
            Row(
                PIPE_SECTION,
                f"`{kind}`, {depth} requests in flight",
                "req/s",
                True,
                measures[OURS],
                measures[PEER],
            )
        )


def _with_id(payload: bytes, request_id: int) -> bytes:
    """Give a request a unique id so pipelined replies can be matched and counted."""
    message = json.loads(payload)
    message["id"] = request_id
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"
