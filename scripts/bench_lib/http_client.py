"""One HTTP load-generating client: lock-step POSTs of one JSON-RPC body over a keep-alive
connection for a fixed time. Stdlib only; run as a separate process per connection.

Usage: http_client.py PORT PATH SECONDS START_AT BODY_FILE  -> prints {"count", "elapsed", "lat"}
With NOTES_BENCH_TOKEN set, every request carries `Authorization: Bearer $NOTES_BENCH_TOKEN`.
"""

import http.client
import json
import os
import sys
import time


def main() -> None:
    port, path, seconds, start_at, body_file = sys.argv[1:6]
    with open(body_file, "rb") as source:
        bodies = [line.rstrip(b"\n") for line in source if line.strip()]
    first = json.loads(bodies[0])
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": first["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        "Mcp-Method": first["method"],
    }
    if first["method"] == "tools/call":
        headers["Mcp-Name"] = first["params"]["name"]
    if os.environ.get("NOTES_BENCH_TOKEN"):
        headers["Authorization"] = "Bearer " + os.environ["NOTES_BENCH_TOKEN"]
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
    while time.time() < float(start_at):
        time.sleep(0.001)
    clock = time.perf_counter_ns
    started = clock()
    deadline = started + int(float(seconds) * 1e9)
    latencies = []
    i = 0
    now = started
    while now < deadline:
        t0 = clock()
        conn.request("POST", path, body=bodies[i % len(bodies)], headers=headers)
        response = conn.getresponse()
        data = response.read()
        now = clock()
        if response.status != 200 or b'"result"' not in data:
            raise SystemExit(f"HTTP {response.status}: {data[:300]!r}")
        latencies.append((now - t0) / 1000)
        i += 1
    print(json.dumps({"count": i, "elapsed": (now - started) / 1e9, "lat": latencies}))


if __name__ == "__main__":
    main()
