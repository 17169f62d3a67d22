"""HTTP: `notes_read` rate, rate per worker, p99 and server CPU per request with 1 and N
workers, ours (token auth) vs the SDK peer, plus the floor and stdio for scale.

The peer's multi-worker mode gets the TCP_NODELAY fix notes-server applies to itself (see
scripts/peers/sdk_notes_server.py). Trials alternate A B A B; the floor (`http_floor`) and a
stdio run of the same tool are measured in the same run, so the ratios are like for like.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from bench_lib import client, http_load
from bench_lib.common import (
    OURS,
    PEER,
    VENV_PY,
    Measure,
    StdioServer,
    check_reply,
    log,
    ours_cmd,
    peer_cmd,
    percentile,
    read_call,
    server_env,
)
from bench_lib.datasets import note_ids
from bench_lib.http_servers import FLOOR, HttpServer, create_token, load, post
from bench_lib.results import Check, Results, Row

SECTION = "HTTP (`notes_read`, lock-step keep-alive clients, loopback; ours with token auth)"
CPU_TARGET = 1.5  # issue 26: server CPU per HTTP request <= 1.5x the same tool's over stdio
RATE_FACTOR = 5.0  # issue 26: 1 worker, 4 clients, >= 5x the peer's rate


def ours_support() -> tuple[bool, str]:
    out = subprocess.run(
        [VENV_PY, "-m", "notes_server", "serve", "--help"],
        capture_output=True,
        text=True,
        env=server_env(),
    ).stdout
    if "--workers" not in out or "--auth" not in out:
        return False, "`notes-server serve` offers no `--workers` / `--auth`"
    return True, ""


def _stdio_cpu(db: str, bodies: list[bytes], workdir: Path, seconds: float) -> dict[str, float]:
    """Server CPU µs per `notes_read` over stdio, lock-step, for both implementations."""
    out = {}
    for impl, cmd in ((OURS, ours_cmd(db)), (PEER, peer_cmd(db))):
        server = StdioServer(cmd, workdir / "http-stdio.log")
        try:
            client.lockstep(server, bodies, seconds=60, max_count=len(bodies))
            outcome = client.lockstep(server, bodies, seconds=seconds)
            out[impl] = 1e6 * outcome.server_cpu_s / outcome.count
        finally:
            server.close()
    return out


def run(
    results: Results,
    db: str,
    workdir: Path,
    *,
    workers: list[int],
    trials: int,
    seconds: float,
    clients: int,
    curve: list[int],
) -> None:
    available, why = ours_support()
    if not available:
        results.notes.append(f"HTTP benchmark: not available — {why}.")
        return
    copy = str(workdir / "http.db")
    shutil.copyfile(db, copy)
    token = create_token(copy)
    bodies = [read_call(i, n) for i, n in enumerate(note_ids(copy, 200))]
    body_file = workdir / "http-bodies.jsonl"
    body_file.write_bytes(b"".join(bodies))
    logfile = workdir / "http.log"
    floor_reply = workdir / "http-floor-reply.json"
    stdio_cpu = _stdio_cpu(copy, bodies, workdir, seconds)
    per_worker: dict[int, dict[str, float]] = {}
    for count in workers:
        impls = [OURS, PEER, FLOOR] if count == 1 else [OURS, PEER]
        log(f"HTTP notes_read, {count} worker(s), {clients} clients: {trials} trials x {seconds}s")
        rps = {impl: Measure() for impl in impls}
        p99 = {impl: Measure() for impl in impls}
        cpu = {impl: Measure() for impl in impls}
        servers: dict[str, HttpServer] = {}
        try:
            servers[OURS] = HttpServer(OURS, copy, count, logfile, token, floor_reply)
            _status, reply = post(servers[OURS].port, bodies[0], token)
            check_reply(reply)
            floor_reply.write_bytes(reply)
            for impl in impls[1:]:
                servers[impl] = HttpServer(impl, copy, count, logfile, token, floor_reply)
            for server in servers.values():
                load(server, body_file, clients, min(0.5, seconds))  # warm-up
            for trial in range(trials):
                order = impls if trial % 2 == 0 else impls[::-1]
                for impl in order:
                    rate, latencies, cpu_us = load(servers[impl], body_file, clients, seconds)
                    rps[impl].trials.append(rate)
                    p99[impl].trials.append(percentile(latencies, 99) / 1000)
                    cpu[impl].trials.append(cpu_us)
                    rps[impl].samples.extend(latencies)
            results.memory.append(
                (
                    f"after HTTP, {count} worker(s) (max over worker processes)",
                    servers[OURS].peak_rss_kib(),
                    servers[PEER].peak_rss_kib(),
                )
            )
            if count == 1 and curve:
                http_load.run(results, servers, body_file, curve, seconds)
        except RuntimeError as exc:
            results.notes.append(f"HTTP with {count} worker(s): failed — {exc}")
            log(f"HTTP failed: {exc}")
            continue
        finally:
            for server in servers.values():
                server.close()
        per_worker[count] = {impl: rps[impl].median / count for impl in (OURS, PEER)}
        _rows(results, count, clients, rps, p99, cpu, stdio_cpu)
    _scaling_notes(results, per_worker)


def _rows(
    results: Results,
    count: int,
    clients: int,
    rps: dict[str, Measure],
    p99: dict[str, Measure],
    cpu: dict[str, Measure],
    stdio_cpu: dict[str, float],
) -> None:
    label = f"{count} worker{'s' if count > 1 else ''}, {clients} clients"
    one = count == 1 and clients == 4
    results.row(
        Row(
            SECTION,
            f"{label}: rate",
            "req/s",
            True,
            rps[OURS],
            rps[PEER],
            target=f"≥ {RATE_FACTOR:g}x" if one else "",
            target_factor=RATE_FACTOR if one else None,
        )
    )
    per = {impl: Measure([x / count for x in rps[impl].trials]) for impl in (OURS, PEER)}
    results.row(Row(SECTION, f"{label}: rate per worker", "req/s", True, per[OURS], per[PEER]))
    results.row(
        Row(
            SECTION,
            f"{label}: p99",
            "ms",
            False,
            p99[OURS],
            p99[PEER],
            target="≤ peer" if one else "",
            target_factor=1.0 if one else None,
        )
    )
    results.row(
        Row(
            SECTION,
            f"{label}: server CPU per request (all processes)",
            "µs",
            False,
            cpu[OURS],
            cpu[PEER],
        )
    )
    panel = f"HTTP notes_read latency, {count} worker(s) (ms)"
    for impl in (OURS, PEER):
        results.plot(panel, impl, [x / 1000 for x in rps[impl].samples])
    if count != 1:
        return
    if FLOOR in rps:
        results.row(
            Row(
                SECTION,
                f"{label}: rate, floor (ours columns) vs notes-server (peer columns)",
                "req/s",
                True,
                rps[FLOOR],
                rps[OURS],
            )
        )
        results.row(
            Row(
                SECTION,
                f"{label}: server CPU per request, floor vs notes-server",
                "µs",
                False,
                cpu[FLOOR],
                cpu[OURS],
            )
        )
    ours_ratio = cpu[OURS].median / stdio_cpu[OURS]
    results.checks.append(
        Check(
            f"HTTP: server CPU per `notes_read` ≤ {CPU_TARGET:g}x stdio's "
            f"(1 worker, {clients} clients)",
            f"{cpu[OURS].median:.0f} µs vs {stdio_cpu[OURS]:.0f} µs over stdio = {ours_ratio:.1f}x "
            f"(peer: {cpu[PEER].median:.0f} vs {stdio_cpu[PEER]:.0f} µs = "
            f"{cpu[PEER].median / stdio_cpu[PEER]:.1f}x)",
            ours_ratio <= CPU_TARGET,
        )
    )


def _scaling_notes(results: Results, per_worker: dict[int, dict[str, float]]) -> None:
    if 1 not in per_worker:
        return
    for count, rates in sorted(per_worker.items()):
        if count == 1:
            continue
        for impl, name in ((OURS, "notes-server"), (PEER, "the SDK peer")):
            kept = rates[impl] / per_worker[1][impl]
            results.notes.append(
                f"HTTP with {count} workers: {name} keeps {kept:.0%} of its 1-worker rate per "
                f"worker ({rates[impl]:,.0f} vs {per_worker[1][impl]:,.0f} req/s per worker)"
                + (
                    " — this machine has 2 cores shared with the clients, so no figure here can "
                    "scale fully"
                    if impl == OURS
                    else ""
                )
                + "."
            )
