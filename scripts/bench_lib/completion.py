"""`completion/complete` latency end to end over stdio at the search databases' sizes.

The peer in the same run is `notes_read` on the same warm server and database (one note by
key after the grant check, the cheapest tool call there is): completion should cost about as
much, whatever the number of notes, because a prefix is a range on an index. Paths
(`n/0001234.md`) and titles (`note 0001234`) of the generated notes, prefixes from one to seven
digits long, alternating with the reads trial by trial.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from bench_lib import client
from bench_lib.common import (
    OURS,
    WORKSPACE,
    Measure,
    StdioServer,
    log,
    ours_cmd,
    percentile,
    read_call,
    request,
)
from bench_lib.datasets import DatasetInfo
from bench_lib.results import Check, Results

TARGET_NOTES = 100_000
TARGET_P50_MS = 2.0


def completion_calls(notes: int, count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    calls = []
    for i in range(count):
        digits = f"{rng.randrange(notes):07d}"[: rng.randrange(1, 8)]
        if i % 2:
            ref = {"type": "ref/prompt", "name": "notes_summarize"}
            argument = {"name": "path", "value": f"n/{digits}"}
        else:
            ref = {"type": "ref/prompt", "name": "notes_related"}
            argument = {"name": "title", "value": f"note {digits}"}
        params = {
            "ref": ref,
            "argument": argument,
            "context": {"arguments": {"workspaceUri": WORKSPACE}},
        }
        calls.append(request(i, "completion/complete", params))
    return calls


def note_ids(info: DatasetInfo, count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [f"note_{rng.randrange(info.notes):020x}" for _ in range(count)]


def run(
    results: Results, datasets: list[DatasetInfo], workdir: Path, *, trials: int, count: int
) -> None:
    logfile = workdir / "completion.log"
    for info in datasets:
        log(f"completion at {info.notes:,} notes: {trials} trials x {count} requests")
        completions = completion_calls(info.notes, count)
        reads = [read_call(i, note) for i, note in enumerate(note_ids(info, count))]
        server = StdioServer(ours_cmd(info.path), logfile)
        p50 = {"completion": Measure(), "read": Measure()}
        try:
            first = json.loads(server.roundtrip(completions[1]))
            if "result" not in first:
                raise RuntimeError(f"completion/complete failed: {first}")
            for payloads in (completions, reads):  # warm-up
                client.lockstep(server, payloads, seconds=3600, max_count=len(payloads))
            for trial in range(trials):
                order = ["completion", "read"] if trial % 2 == 0 else ["read", "completion"]
                for kind in order:
                    payloads = completions if kind == "completion" else reads
                    outcome = client.lockstep(
                        server, payloads, seconds=3600, max_count=len(payloads)
                    )
                    lat_ms = [x / 1000 for x in outcome.latencies_us]
                    p50[kind].trials.append(percentile(lat_ms, 50))
        finally:
            server.close()
        ratio = p50["completion"].median / p50["read"].median
        size = f"{info.notes:,} notes"
        results.checks.append(
            Check(
                f"(context) completion/complete at {size}: p50 vs notes_read p50 on the same "
                f"server ({OURS}), same run",
                f"{p50['completion'].median:.2f} ms vs {p50['read'].median:.2f} ms ({ratio:.2f}x)",
                None,
            )
        )
        if info.notes == TARGET_NOTES:
            results.checks.append(
                Check(
                    f"completion/complete at {size}: p50 < {TARGET_P50_MS:g} ms end to end "
                    "over stdio",
                    f"{p50['completion'].median:.2f} ms",
                    p50["completion"].median < TARGET_P50_MS,
                )
            )
