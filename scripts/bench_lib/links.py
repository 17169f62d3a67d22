"""Links and tags (issue 22): what parsing and indexing on every write costs, notes_links at
scale, and a rename that rewrites many backlinks.

The peer of a write is the same write in the same process with the index hook switched off
(`content_index.index_note_content` and `forget_note` replaced by no-ops), alternated with the
new one call by call, so both see the same machine. An update has a second peer, the write as
it was before issue 22: neither the index nor the revision (`history.keep_revision` a no-op).
Figures are CPU time of the worker (the whole server runs in it), so a loaded machine does not
count its waits. NOTES 0: the writes only.
Runs in a worker process of its own (`python scripts/bench_lib/links.py WORKDIR NOTES LINKS
CALLS OUT`), on the notes-server under test (`--ours-src` applies).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_lib.common import Measure, log, percentile, server_env
from bench_lib.results import Check, Results, Row

WS = "file:///home/alice/notes"
WITH_LINKS = (
    "Notes from the weekly meeting. " * 10
    + "See [[Project Plan]], [[Budget#Q3|the budget]] and [the minutes](minutes/2026-03.md). "
    + "#project/q3 #meeting\n"
    + "More discussion of the schedule and the open questions. " * 10
)
PLAIN = "Notes from the weekly meeting. " * 10 + "More discussion of the schedule. " * 12


def run(results: Results, workdir: Path, *, notes: int, links: int, calls: int) -> None:
    log(f"links: writes with and without the index, notes_links at {notes:,} notes")
    out = workdir / "links.json"
    subprocess.run(
        [sys.executable, __file__, str(workdir), str(notes), str(links), str(calls), str(out)],
        env=server_env(),
        check=True,
    )
    data = json.loads(out.read_text())
    section = "Links and tags (issue 22)"
    for name, key in (
        ("notes_create with 3 links and 2 tags, p50", "create_links"),
        ("notes_create without links or tags, p50", "create_plain"),
        ("notes_update of the body with 3 links and 2 tags, p50", "update_links"),
        ("notes_update ... against no index and no revision, p50", "update_bare"),
    ):
        peer_note = (
            "peer: the same write, neither index nor revision (before issue 22)"
            if key == "update_bare"
            else "peer: the same write, index hook off"
        )
        results.row(
            Row(
                section,
                name,
                "ms CPU",
                False,
                Measure(trials=[data[key]["on"]]),
                Measure(trials=[data[key]["off"]]),
                target="<= 1.15x the write without the index"
                + (" or the revision" if key == "update_bare" else ""),
                target_factor=1 / 1.15,
                note=peer_note,
            )
        )
    results.checks.append(
        Check(
            f"notes_links p50 < 2 ms at {notes:,} notes x {links} links",
            f"{data['links_p50']:.3f} ms (p95 {data['links_p95']:.3f} ms)",
            data["links_p50"] < 2.0,
        )
    )
    results.tables["Links and tags at scale"] = (
        ["measure", "value"],
        [
            ["notes (links each)", f"{notes:,} ({links})"],
            ["index build (reindex_all, CPU)", f"{data['index_s']:.1f} s"],
            [
                "notes_links p50 / p95 (CPU)",
                f"{data['links_p50']:.3f} / {data['links_p95']:.3f} ms",
            ],
            [
                "rename rewriting 100 backlinks, one transaction (CPU)",
                f"{data['rename_ms']:.1f} ms",
            ],
        ],
    )


def _worker(workdir: Path, notes: int, links: int, calls: int, out: Path) -> None:
    from notes_server.app import create_server
    from notes_server.config import Settings
    from notes_server.security.keyring import KeyRing
    from notes_server.store import content_index, grants, history, migrate
    from notes_server.store import notes as notes_store
    from notes_server.store.engine import make_engine, write_tx
    from notes_server.tools.services import Services, utc_now

    url = f"sqlite:///{workdir}/links-bench.db"
    settings = Settings(db_url=url, principal="alice", state_keys=KeyRing.generate_spec())
    engine = make_engine(url)
    migrate.upgrade(engine)
    now = utc_now()
    with write_tx(engine) as conn:
        grants.upsert(conn, "alice", WS, "write", now)
    server = create_server(settings, Services(settings, engine=engine))
    counter = iter(range(1, 10**9))

    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        message = {
            "jsonrpc": "2.0",
            "id": next(counter),
            "method": "tools/call",
            "params": {
                "name": name,
                "arguments": {"workspaceUri": WS, **arguments},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
        raw = server.handle_raw(json.dumps(message).encode(), principal="alice")
        assert raw is not None
        reply = json.loads(raw)
        assert reply["result"]["isError"] is False, reply
        return dict(reply["result"]["structuredContent"])

    real = (content_index.index_note_content, content_index.forget_note)
    keep = history.keep_revision

    def hook(on: bool, *, revisions: bool = True) -> None:
        index, forget = real if on else (lambda *a, **k: None, lambda *a, **k: None)
        notes_store.content_index.index_note_content = index  # type: ignore[assignment]
        notes_store.content_index.forget_note = forget  # type: ignore[assignment]
        history.keep_revision = keep if revisions else lambda *a, **k: True  # type: ignore[assignment]

    def timed(name: str, arguments: dict[str, Any]) -> float:
        """CPU milliseconds of one call (this process is the whole server: on a shared,
        loaded machine wall time is mostly waiting for a core)."""
        start = time.process_time()
        call(name, arguments)
        return (time.process_time() - start) * 1000

    result: dict[str, Any] = {}
    for key, body in (("create_links", WITH_LINKS), ("create_plain", PLAIN)):
        samples: dict[str, list[float]] = {"on": [], "off": []}
        for i in range(calls):
            for state in ("on", "off") if i % 2 else ("off", "on"):
                hook(state == "on")
                samples[state].append(
                    timed("notes_create", {"title": f"{key} {state} {i}", "body": body})
                )
        result[key] = {s: statistics.median(v) for s, v in samples.items()}
    hook(True)
    states = ("on", "off", "bare")
    targets = [call("notes_create", {"title": f"u{i}", "body": PLAIN})["note"] for i in range(3)]
    samples = {state: [] for state in states}
    for i in range(calls):
        order = list(zip(states, targets, strict=True))
        for state, note in order[i % 3 :] + order[: i % 3]:  # each state first in turn
            hook(state == "on", revisions=state != "bare")
            body = WITH_LINKS + f" edit {i}"
            samples[state].append(timed("notes_update", {"noteId": note["id"], "body": body}))
    medians = {s: statistics.median(v) for s, v in samples.items()}
    result["update_links"] = {"on": medians["on"], "off": medians["off"]}
    result["update_bare"] = {"on": medians["on"], "off": medians["bare"]}
    hook(True)
    if notes == 0:  # the writes only (a quick before/after comparison)
        engine.dispose()
        out.write_text(json.dumps(result))
        return

    # notes_links at scale: `notes` notes, each linking to `links` others by title.
    rng = random.Random(22)
    with write_tx(engine) as conn:
        rows = []
        for i in range(notes):
            body = " ".join(f"[[Note {rng.randrange(notes)}]]" for _ in range(links))
            rows.append(
                {
                    "id": f"note_bench{i:012d}",
                    "workspace": WS,
                    "path": f"bench/{i}.md",
                    "title": f"Note {i}",
                    "title_key": f"note {i}",
                    "body": body,
                    "created_at": now,
                    "updated_at": now,
                    "version": 1,
                    "archived": False,
                    "archived_at": None,
                }
            )
        from sqlalchemy import insert

        from notes_server.store.models import notes_table

        conn.execute(insert(notes_table), rows)
    start = time.process_time()
    with write_tx(engine) as conn:
        content_index.reindex_all(conn)
    result["index_s"] = time.process_time() - start
    latencies = [
        timed("notes_links", {"noteId": f"note_bench{rng.randrange(notes):012d}"})
        for _ in range(max(calls, 200))
    ]
    result["links_p50"] = percentile(latencies, 50)
    result["links_p95"] = percentile(latencies, 95)

    target = call("notes_create", {"title": "Rename me", "body": ""})["note"]
    for i in range(100):
        call("notes_create", {"title": f"Backlink {i}", "body": f"see [[Rename me]] {i}"})
    start = time.process_time()
    renamed = call("notes_update", {"noteId": target["id"], "title": "Renamed"})
    result["rename_ms"] = (time.process_time() - start) * 1000
    assert len(renamed["rewritten"]) == 100
    engine.dispose()
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    _worker(
        Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
    )
