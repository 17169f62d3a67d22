"""Cold start: spawn to the first reply, one fresh process per sample, variants alternating."""

from __future__ import annotations

import time
from pathlib import Path

from bench_lib.common import (
    OURS,
    PEER,
    Measure,
    StdioServer,
    echo_cmd,
    log,
    ours_cmd,
    peer_cmd,
    read_call,
    request,
)
from bench_lib.datasets import note_ids
from bench_lib.results import Results, Row


def _spawn_to_reply(cmd: list[str], payload: bytes, logfile: Path) -> tuple[float, int | None]:
    """Milliseconds from just before spawning to the first reply line; plus peak RSS (KiB)."""
    server = StdioServer(cmd, logfile)
    try:
        line = server.roundtrip(payload)
        elapsed_ms = (time.perf_counter_ns() - server.spawned_ns) / 1e6
        rss = server.peak_rss_kib()
    finally:
        server.close()
    if b'"result"' not in line:
        raise RuntimeError(f"cold start of {cmd[:3]} answered {line[:200]!r}")
    return elapsed_ms, rss


def run(results: Results, db: str, workdir: Path, *, reps: int, first_calls: list[str]) -> None:
    canned = workdir / "canned-discover.json"
    note = note_ids(db, 1)[0]
    payloads = {
        "server/discover": request(1, "server/discover"),
        "tools/list": request(1, "tools/list"),
        "tools/call notes_read": read_call(1, note),
    }
    variants = {
        "ours (python -m notes_server)": ours_cmd(db),
        "ours (.venv/bin/notes-server)": ours_cmd(db, console_script=True),
        "peer (SDK MCPServer)": peer_cmd(db),
    }
    logfile = workdir / "coldstart.log"
    canned.write_bytes(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    for first in first_calls:
        samples: dict[str, Measure] = {name: Measure() for name in variants}
        echo = Measure()
        rss: dict[str, int | None] = {}
        log(f"cold start to first {first}: {reps} samples per variant (+1 warm-up)")
        for rep in range(reps + 1):
            order = list(variants.items())
            if rep % 2:
                order.reverse()
            for name, cmd in order:
                elapsed, peak = _spawn_to_reply(cmd, payloads[first], logfile)
                if rep:
                    samples[name].trials.append(elapsed)
                    samples[name].samples.append(elapsed)
                    rss[name] = peak
            elapsed, _ = _spawn_to_reply(echo_cmd(str(canned)), payloads[first], logfile)
            if rep:
                echo.trials.append(elapsed)
        peer_name = "peer (SDK MCPServer)"
        peer = samples[peer_name]
        target_factor = 4.0 if first != "tools/call notes_read" else None
        for name in ("ours (python -m notes_server)", "ours (.venv/bin/notes-server)"):
            results.row(
                Row(
                    "Cold start (spawn → first reply)",
                    f"first `{first}` — {name}",
                    "ms",
                    False,
                    samples[name],
                    peer,
                    target="ours ≥ 4x faster" if target_factor else "",
                    target_factor=target_factor,
                )
            )
        results.row(
            Row(
                "Cold start (spawn → first reply)",
                f"first `{first}` — bare Python echo process (floor)",
                "ms",
                False,
                echo,
            )
        )
        results.plot(f"cold start → {first} (ms)", OURS, samples[next(iter(variants))].samples)
        results.plot(f"cold start → {first} (ms)", PEER, peer.samples)
        results.memory.append(
            (f"cold start → first `{first}`", rss.get(next(iter(variants))), rss.get(peer_name))
        )
