"""One HTTP load-generating client: lock-step POSTs of one JSON-RPC body over a keep-alive
connection for a fixed time. Stdlib only; run as a separate process per connection.

Usage: http_client.py PORT PATH SECONDS START_AT BODY_FILE  -> prints {"count", "elapsed", "lat"}
With NOTES_BENCH_TOKEN set, every request carries `Authorization: Bearer $NOTES_BENCH_TOKEN`.

The clients share 2 cores with the server under test, so every microsecond they spend is one
the server does not get: each request is encoded once up front (head and body in one buffer,
one `send`), and a response is read straight off the socket with only what a check needs
(status line, Content-Length, then the body, which must be a JSON-RPC result for the id sent).
`http.client` cost several times more CPU per request, the same for every server measured.
"""

import json
import os
import socket
import sys
import time


def encode(path: str, host: str, body: bytes, token: str | None) -> tuple[bytes, bytes]:
    """(the whole request, the bytes its reply must hold: `"id":<id>,`)."""
    message = json.loads(body)
    meta = message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"MCP-Protocol-Version: {meta}",
        f"Mcp-Method: {message['method']}",
    ]
    if message["method"] == "tools/call":
        lines.append(f"Mcp-Name: {message['params']['name']}")
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + body, b'"id":' + json.dumps(message["id"]).encode() + b","


class Connection:
    """One keep-alive connection; `exchange` sends a request and returns (status, body)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        status = int(head[9:12])
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise SystemExit(f"HTTP {status} without Content-Length: {head[:300]!r}")
        while len(rest) < length:
            self.buffer = rest
            self._fill()
            rest = self.buffer
        self.buffer = rest[length:]
        return status, rest[:length]

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise SystemExit("the server closed the connection")
        self.buffer += chunk


def main() -> None:
    port, path, seconds, start_at, body_file = sys.argv[1:6]
    with open(body_file, "rb") as source:
        bodies = [line.rstrip(b"\n") for line in source if line.strip()]
    token = os.environ.get("NOTES_BENCH_TOKEN")
    requests = [encode(path, f"127.0.0.1:{port}", body, token) for body in bodies]
    conn = Connection(int(port))
    while time.time() < float(start_at):
        time.sleep(0.001)
    clock = time.perf_counter_ns
    started = clock()
    deadline = started + int(float(seconds) * 1e9)
    latencies = []
    i = 0
    now = started
    while now < deadline:
        request, expected_id = requests[i % len(requests)]
        t0 = clock()
        status, data = conn.exchange(request)
        now = clock()
        if status != 200 or b'"result"' not in data or expected_id not in data:
            raise SystemExit(f"HTTP {status}: {data[:300]!r}")
        latencies.append((now - t0) / 1000)
        i += 1
    print(json.dumps({"count": i, "elapsed": (now - started) / 1e9, "lat": latencies}))


if __name__ == "__main__":
    main()
