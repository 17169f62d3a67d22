"""One confirmed-delete client over real HTTP, spread over several instances.

For each of its titles: round 1 (`notes_delete` by title) to instance k, round 2 (the accepted
answer with the sealed requestState) to instance k + 1, k advancing per delete, so every delete
crosses instances. One keep-alive connection per instance, lock-step. Deletes one title as a
warm-up on every instance in both roles
(one per instance, concurrently with the other clients, so connection pools are filled), prints
`ready`, waits for `go` on stdin (the parent releases every client at once),
then deletes for SECONDS; prints a JSON line {"count", "elapsed", "lat", "ids"} where `ids` holds
every note id the server reported deleted (warm-up included), for the caller to verify.

Usage: pg_delete_client.py PORTS(comma-separated) FIRST TITLES_FILE SECONDS
With NOTES_BENCH_TOKEN set, every request carries it as a bearer token.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_lib.client import delete_round1, delete_round2
from bench_lib.common import PROTOCOL

HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "notes_delete",
}


def _post(conn: http.client.HTTPConnection, body: bytes) -> dict[str, Any]:
    conn.request("POST", "/mcp", body=body, headers=HEADERS)
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise SystemExit(f"HTTP {response.status}: {data[:300]!r}")
    reply: dict[str, Any] = json.loads(data)
    if "result" not in reply or reply["result"].get("isError"):
        raise SystemExit(f"error reply: {data[:300]!r}")
    return reply


def main() -> None:
    ports_arg, first_arg, titles_file, seconds_arg = sys.argv[1:5]
    if os.environ.get("NOTES_BENCH_TOKEN"):
        HEADERS["Authorization"] = "Bearer " + os.environ["NOTES_BENCH_TOKEN"]
    conns = [
        http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
        for port in ports_arg.split(",")
    ]
    titles = Path(titles_file).read_text(encoding="utf-8").splitlines()
    k = int(first_arg)
    ids: list[str] = []
    request_id = 0

    def delete(title: str) -> None:
        nonlocal k, request_id
        request_id += 2
        asked = _post(conns[k % len(conns)], delete_round1(request_id - 1, title))
        done = _post(conns[(k + 1) % len(conns)], delete_round2(request_id, title, asked))
        structured = done["result"].get("structuredContent") or {}
        if structured.get("deleted") is not True:
            raise SystemExit(f"delete not confirmed: {json.dumps(done)[:300]}")
        ids.append(structured["noteId"])
        k += 1

    warm_up = len(conns)
    for title in titles[:warm_up]:
        delete(title)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("not released")
    clock = time.perf_counter_ns
    started = now = clock()
    deadline = started + int(float(seconds_arg) * 1e9)
    latencies = []
    for title in titles[warm_up:]:
        if now >= deadline:
            break
        t0 = clock()
        delete(title)
        now = clock()
        latencies.append((now - t0) / 1000)
    else:
        raise SystemExit("ran out of titles before the time was up")
    elapsed = (now - started) / 1e9
    print(json.dumps({"count": len(latencies), "elapsed": elapsed, "lat": latencies, "ids": ids}))


if __name__ == "__main__":
    main()
