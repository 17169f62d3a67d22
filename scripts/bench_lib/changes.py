"""Change subscriptions (issue 24): how long a change made through one server process takes
to reach a `subscriptions/listen` of another, on SQLite and (when reachable) PostgreSQL.

Two `notes-server serve` processes on one database: B holds a listen on one note; A is sent
`notes_update` of that note, one at a time. Latency is from writing A's request line to reading
B's `notifications/resources/updated` line (so it includes A's whole tool call and commit).
Targets from the issue: p99 < 500 ms on SQLite, < 200 ms on PostgreSQL.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from bench_lib import pg
from bench_lib.common import log, percentile, server_env
from bench_lib.results import Check, Results

WS = "file:///home/alice/notes"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
TARGETS_MS = {"SQLite": 500.0, "PostgreSQL": 200.0}


class _Serve:
    def __init__(self, db_url: str) -> None:
        command = [sys.executable, "-m", "notes_server", "serve", "--db", db_url]
        command += ["--principal", "alice"]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=server_env(),
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.ids = 0

    def _pump(self) -> None:
        stdout: IO[bytes] | None = self.proc.stdout
        assert stdout is not None
        for line in iter(stdout.readline, b""):
            self.lines.put(line)

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.ids += 1
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        message["params"] = {**params, "_meta": META}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return self.ids

    def read(self) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(self.lines.get(timeout=30))
        return reply

    def reply_to(self, request_id: int) -> dict[str, Any]:
        while True:
            message = self.read()
            if message.get("id") == request_id and "method" not in message:
                return message

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _cli(db_url: str, *args: str) -> None:
    command = [sys.executable, "-m", "notes_server", *args, "--db", db_url]
    subprocess.run(command, env=server_env(), check=True, capture_output=True)


def measure(db_url: str, changes: int) -> list[float]:
    """Milliseconds from A's request to B's notification, one change at a time."""
    _cli(db_url, "migrate")
    _cli(db_url, "workspace", "grant", "alice", WS)
    writer, listener = _Serve(db_url), _Serve(db_url)
    try:
        created = writer.reply_to(
            writer.send(
                "tools/call",
                {"name": "notes_create", "arguments": {"workspaceUri": WS, "title": "Plan"}},
            )
        )
        note = created["result"]["structuredContent"]["note"]
        uri = f"{WS}/{note['path']}"
        listener.send("subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}})
        ack = listener.read()
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        latencies = []
        for i in range(changes):
            arguments = {"workspaceUri": WS, "noteId": note["id"], "body": f"v{i}"}
            start = time.perf_counter()
            request_id = writer.send("tools/call", {"name": "notes_update", "arguments": arguments})
            heard = listener.read()
            latencies.append((time.perf_counter() - start) * 1000)
            assert heard["method"] == "notifications/resources/updated", heard
            writer.reply_to(request_id)
        return latencies
    finally:
        writer.close()
        listener.close()


def run(results: Results, workdir: Path, *, changes: int) -> None:
    log(f"changes: {changes} changes from process A to a listen on process B")
    backends = [("SQLite", f"sqlite:///{workdir / 'changes.db'}")]
    problem = pg.reachable()
    databases = pg.Databases() if problem is None else None
    if databases is not None:
        backends.append(("PostgreSQL", pg.url_for(databases.create("changes"))))
    else:
        results.notes.append(f"change latency on PostgreSQL not measured: {problem}")
    try:
        for backend, url in backends:
            (workdir / "changes.db").unlink(missing_ok=True)
            latencies = measure(url, changes)
            p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
            target = TARGETS_MS[backend]
            results.checks.append(
                Check(
                    f"change A -> listen on B, {backend}, p99 < {target:.0f} ms",
                    f"p50 {p50:.1f} ms, p99 {p99:.1f} ms ({changes} changes)",
                    p99 < target,
                )
            )
    finally:
        if databases is not None:
            databases.drop_all()
