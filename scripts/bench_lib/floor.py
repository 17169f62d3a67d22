"""Speed to the floor (issue 26): notes-server beside what the machine itself can do over stdio.

The rate floor is `replay_floor.py`: a bare Python process that parses each request line and
writes back the reply bytes notes-server sent for that very request (recorded from our server
first, replayed keyed by method and id). It is measured lock-step, one client, in the same run
and with the same client loop as notes-server and the SDK peer, for `server/discover`,
`tools/list` and `notes_read`; the figure that matters is ours ÷ floor.

The cold-start floor is a plain `python -c` that reads one line, parses it and writes our
`server/discover` reply, against `python -m notes_server serve` to its first `server/discover`
answer. Every process is the same interpreter (.venv/bin/python), spawned the same way
(`StdioServer`: pipes, the same environment and working directory), and every one flushes each
reply line as it writes it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench_lib import client
from bench_lib.common import (
    OURS,
    PEER,
    VENV_PY,
    Measure,
    StdioServer,
    log,
    ours_cmd,
    peer_cmd,
    percentile,
    read_call,
    request,
)
from bench_lib.datasets import note_ids
from bench_lib.results import Check, Results, fmt

FLOOR = "floor"
FLOOR_SCRIPT = str(Path(__file__).resolve().parent / "replay_floor.py")
RATE_TABLE = "Speed to the floor: lock-step over stdio, one client, 10k notes (issue 26)"
COLD_TABLE = "Speed to the floor: cold start to the first `server/discover` (issue 26)"
# Least acceptable ours ÷ floor rate (issue 26).
RATE_TARGETS = {"server/discover": 0.5, "tools/list": 0.5, "notes_read": 0.35}
COLD_TARGET = 3.0  # ours at most 3x the floor's start

# Reads one line, parses it, answers it: interpreter start plus one exchange. The reply bytes
# are spliced in as a literal so that the process opens no file.
COLD_FLOOR_CODE = (
    "import sys, json\n"
    "line = sys.stdin.buffer.readline()\n"
    "json.loads(line)\n"
    "sys.stdout.buffer.write({reply!r})\n"
    "sys.stdout.buffer.flush()\n"
)


def _payloads(db: str, count: int) -> dict[str, list[bytes]]:
    ids = note_ids(db, count)
    return {
        "server/discover": [request(1, "server/discover")],
        "tools/list": [request(1, "tools/list")],
        "notes_read": [read_call(i, note) for i, note in enumerate(ids)],
    }


def _record(ours: StdioServer, payloads: dict[str, list[bytes]], path: Path) -> dict[bytes, bytes]:
    """Our reply to every request of the sequence, written as the floor's replay table."""
    replies: dict[bytes, bytes] = {}
    with path.open("w", encoding="utf-8") as out:
        for kind_payloads in payloads.values():
            for payload in kind_payloads:
                reply = ours.roundtrip(payload)
                replies[payload] = reply
                message = json.loads(payload)
                record = {"method": message["method"], "id": message["id"]}
                out.write(json.dumps({**record, "reply": reply.decode()}) + "\n")
    return replies


def run(
    results: Results,
    db: str,
    workdir: Path,
    *,
    trials: int,
    seconds: float,
    cold_reps: int,
    payload_count: int = 500,
) -> None:
    payloads = _payloads(db, payload_count)
    logfile = workdir / "floor.log"
    replies_file = workdir / "floor-replies.jsonl"
    servers: dict[str, StdioServer] = {}
    try:
        servers[OURS] = StdioServer(ours_cmd(db), logfile)
        recorded = _record(servers[OURS], payloads, replies_file)
        servers[PEER] = StdioServer(peer_cmd(db), logfile)
        servers[FLOOR] = StdioServer([VENV_PY, FLOOR_SCRIPT, str(replies_file)], logfile)
        log("floor: warm-up")
        for server in servers.values():
            for kind_payloads in payloads.values():
                client.lockstep(
                    server, kind_payloads * 2, seconds=60, max_count=2 * len(kind_payloads)
                )
        _rates(results, servers, payloads, trials=trials, seconds=seconds)
        _same_bytes(results, servers[OURS], recorded)
    finally:
        for server in servers.values():
            server.close()
    _cold(results, db, workdir, reps=cold_reps, discover=recorded[payloads["server/discover"][0]])


def _rates(
    results: Results,
    servers: dict[str, StdioServer],
    payloads: dict[str, list[bytes]],
    *,
    trials: int,
    seconds: float,
) -> None:
    rows: list[list[str]] = []
    for kind, kind_payloads in payloads.items():
        log(f"floor: lock-step {kind}, {trials} trials x {seconds}s each for ours, peer, floor")
        rate = {impl: Measure() for impl in servers}
        latency = {impl: Measure() for impl in servers}
        cpu = {impl: Measure() for impl in servers}
        impls = list(servers)
        for trial in range(trials):
            shift = trial % len(impls)
            for impl in impls[shift:] + impls[:shift]:  # rotate who goes first
                outcome = client.lockstep(servers[impl], kind_payloads, seconds=seconds)
                rate[impl].trials.append(outcome.rate)
                latency[impl].trials.append(percentile(outcome.latencies_us, 50))
                cpu[impl].trials.append(1e6 * outcome.server_cpu_s / outcome.count)
        ratio = rate[OURS].median / rate[FLOOR].median
        target = RATE_TARGETS[kind]
        met = ratio >= target
        rows.append(
            [
                f"`{kind}`",
                f"{fmt(rate[OURS].median)} ({fmt(rate[OURS].low)}-{fmt(rate[OURS].high)})",
                f"{fmt(rate[PEER].median)} ({fmt(rate[PEER].low)}-{fmt(rate[PEER].high)})",
                f"{fmt(rate[FLOOR].median)} ({fmt(rate[FLOOR].low)}-{fmt(rate[FLOOR].high)})",
                f"{ratio:.2f}",
                f"{rate[OURS].median / rate[PEER].median:.2f}",
                f"{fmt(latency[OURS].median)} / {fmt(latency[PEER].median)} / "
                f"{fmt(latency[FLOOR].median)}",
                f"{fmt(cpu[OURS].median)} / {fmt(cpu[PEER].median)} / {fmt(cpu[FLOOR].median)}",
                f"≥ {target:g} {'**met**' if met else '**missed**'}",
            ]
        )
        results.checks.append(
            Check(
                f"floor: lock-step `{kind}` rate ≥ {target:g} of the bare replay process's",
                f"{ratio:.2f} ({fmt(rate[OURS].median)} vs {fmt(rate[FLOOR].median)} req/s)",
                met,
            )
        )
    header = [
        "request",
        "ours req/s (min-max)",
        "SDK peer req/s",
        "floor req/s",
        "ours ÷ floor",
        "ours ÷ peer",
        "p50 µs ours / peer / floor",
        "server CPU µs/req ours / peer / floor",
        "target (ours ÷ floor)",
    ]
    results.tables[RATE_TABLE] = (header, rows)


def _same_bytes(results: Results, ours: StdioServer, recorded: dict[bytes, bytes]) -> None:
    """The floor replays what ours sent once; ours must still send the same bytes now,
    or the floor would not be doing our work's output."""
    differ = sum(1 for payload, reply in recorded.items() if ours.roundtrip(payload) != reply)
    if differ:
        results.notes.append(
            f"floor: {differ} of {len(recorded)} recorded replies differed when asked again "
            "after the timed trials (the replayed bytes are the first answers)"
        )


def _spawn_to_reply(cmd: list[str], payload: bytes, logfile: Path) -> float:
    """Milliseconds from just before spawning to the first reply line."""
    server = StdioServer(cmd, logfile)
    try:
        line = server.roundtrip(payload)
        elapsed_ms = (time.perf_counter_ns() - server.spawned_ns) / 1e6
    finally:
        server.close()
    if b'"result"' not in line:
        raise RuntimeError(f"cold start of {cmd[:3]} answered {line[:200]!r}")
    return elapsed_ms


def _cold(results: Results, db: str, workdir: Path, *, reps: int, discover: bytes) -> None:
    payload = request(1, "server/discover")
    logfile = workdir / "floor-cold.log"
    variants = {
        OURS: ours_cmd(db),
        FLOOR: [VENV_PY, "-c", COLD_FLOOR_CODE.format(reply=discover)],
    }
    log(f"floor: cold start to first server/discover, {reps} samples each (+1 warm-up)")
    samples = {impl: Measure() for impl in variants}
    for rep in range(reps + 1):
        order = list(variants.items())
        if rep % 2:
            order.reverse()
        for impl, cmd in order:
            elapsed = _spawn_to_reply(cmd, payload, logfile)
            if rep:
                samples[impl].trials.append(elapsed)
    ours, floor = samples[OURS], samples[FLOOR]
    factor = ours.median / floor.median
    met = factor <= COLD_TARGET
    results.tables[COLD_TABLE] = (
        ["process", "ms median (min-max)", "÷ floor", "target"],
        [
            [
                "ours (`python -m notes_server serve`)",
                f"{fmt(ours.median)} ({fmt(ours.low)}-{fmt(ours.high)})",
                f"{factor:.2f}x",
                f"≤ {COLD_TARGET:g}x {'**met**' if met else '**missed**'}",
            ],
            [
                "floor (`python -c`: read one line, parse it, write our reply)",
                f"{fmt(floor.median)} ({fmt(floor.low)}-{fmt(floor.high)})",
                "1x",
                "",
            ],
        ],
    )
    results.checks.append(
        Check(
            f"floor: cold start to the first `server/discover` ≤ {COLD_TARGET:g}x the plain "
            "`python -c` that reads one line and answers it",
            f"{factor:.2f}x ({fmt(ours.median)} vs {fmt(floor.median)} ms, {reps} samples each)",
            met,
        )
    )
