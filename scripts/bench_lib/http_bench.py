"""HTTP: `notes_read` requests/s and p99 with 1 and N server workers, ours vs the SDK peer.

notes-server's HTTP transport is optional here: if `serve --help` does not offer
`--transport http` with `--auth none` (and `--workers` for N > 1), the rows say so instead of
failing. Each client is its own process holding one keep-alive connection, lock-step.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
from pathlib import Path

from bench_lib.common import (
    NEUTRAL_CWD,
    OURS,
    PEER,
    VENV_PY,
    Measure,
    check_reply,
    log,
    ours_cmd,
    peak_rss_kib,
    peer_cmd,
    percentile,
    read_call,
    request,
    server_env,
)
from bench_lib.datasets import note_ids
from bench_lib.results import Results, Row

SECTION = "HTTP (`notes_read`, lock-step keep-alive clients, loopback)"
CLIENT = str(Path(__file__).resolve().parent / "http_client.py")
PATH = "/mcp"


def ours_support() -> tuple[bool, bool, str]:
    """(http available, --workers available, why not)."""
    out = subprocess.run(
        [VENV_PY, "-m", "notes_server", "serve", "--help"],
        capture_output=True,
        text=True,
        env=server_env(),
    ).stdout
    if "http" not in out.split("--transport", 1)[-1].split("\n", 1)[0]:
        return False, False, "`notes-server serve` offers no `--transport http` yet"
    if "--auth" not in out or "none" not in out.split("--auth", 1)[1].split("\n", 1)[0]:
        return False, False, "`notes-server serve` offers no `--auth none` yet"
    return True, "--workers" in out, ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(port: int, body: bytes) -> tuple[int, bytes]:
    message = json.loads(body)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": message["method"],
    }
    if message["method"] == "tools/call":
        headers["Mcp-Name"] = message["params"]["name"]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", PATH, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class HttpServer:
    def __init__(self, impl: str, db: str, workers: int, logfile: Path) -> None:
        self.port = _free_port()
        extra = ["--transport", "http", "--port", str(self.port), "--workers", str(workers)]
        if impl == OURS:
            cmd = ours_cmd(db, extra=[*extra, "--auth", "none"])
        else:
            cmd = peer_cmd(db, extra=extra)
        self._log = logfile.open("ab")
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=self._log,
            env=server_env(),
            stdin=subprocess.DEVNULL,
            cwd=NEUTRAL_CWD,
        )
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{impl} HTTP server exited ({self.proc.returncode}); see {logfile}"
                )
            try:
                status, data = _post(self.port, request(1, "server/discover"))
                if status == 200:
                    check_reply(data)
                    return
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{impl} HTTP server did not come up; see {logfile}")
            time.sleep(0.05)

    def peak_rss_kib(self) -> int | None:
        pids = [self.proc.pid]
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            pids += [int(p) for p in children.split()]
        except OSError:
            pass
        values = [v for v in (peak_rss_kib(p) for p in pids) if v is not None]
        return max(values) if values else None

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _load(port: int, body_file: Path, clients: int, seconds: float) -> tuple[float, list[float]]:
    start_at = time.time() + 0.2 + 0.03 * clients
    procs = [
        subprocess.Popen(
            [VENV_PY, CLIENT, str(port), PATH, str(seconds), str(start_at), str(body_file)],
            stdout=subprocess.PIPE,
        )
        for _ in range(clients)
    ]
    outcomes = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode:
            raise RuntimeError(f"HTTP client failed ({proc.returncode})")
        outcomes.append(json.loads(out))
    count = sum(o["count"] for o in outcomes)
    return count / max(o["elapsed"] for o in outcomes), [x for o in outcomes for x in o["lat"]]


def run(
    results: Results,
    db: str,
    workdir: Path,
    *,
    workers: list[int],
    trials: int,
    seconds: float,
    clients: int,
) -> None:
    available, has_workers, why = ours_support()
    if not available:
        results.notes.append(f"HTTP benchmark: not available — {why}.")
        log(f"HTTP: not available ({why})")
        return
    body_file = workdir / "http-bodies.jsonl"
    body_file.write_bytes(b"".join(read_call(i, n) for i, n in enumerate(note_ids(db, 200))))
    logfile = workdir / "http.log"
    for count in workers:
        if count > 1 and not has_workers:
            results.notes.append(f"HTTP with {count} workers: not available (no `--workers`).")
            continue
        log(f"HTTP notes_read, {count} worker(s), {clients} clients: {trials} trials x {seconds}s")
        servers = {}
        try:
            servers[OURS] = HttpServer(OURS, db, count, logfile)
            servers[PEER] = HttpServer(PEER, db, count, logfile)
            for server in servers.values():
                _status, data = _post(server.port, read_call(1, note_ids(db, 1)[0]))
                check_reply(data)
                _load(server.port, body_file, clients, min(0.5, seconds))  # warm-up
            rps = {OURS: Measure(), PEER: Measure()}
            p99 = {OURS: Measure(), PEER: Measure()}
            for trial in range(trials):
                order = [OURS, PEER] if trial % 2 == 0 else [PEER, OURS]
                for impl in order:
                    rate, latencies = _load(servers[impl].port, body_file, clients, seconds)
                    rps[impl].trials.append(rate)
                    p99[impl].trials.append(percentile(latencies, 99) / 1000)
                    rps[impl].samples.extend(latencies)
            results.memory.append(
                (
                    f"after HTTP, {count} worker(s) (max over worker processes)",
                    servers[OURS].peak_rss_kib(),
                    servers[PEER].peak_rss_kib(),
                )
            )
        except RuntimeError as exc:
            results.notes.append(f"HTTP with {count} worker(s): failed — {exc}")
            log(f"HTTP failed: {exc}")
            continue
        finally:
            for server in servers.values():
                server.close()
        label = f"{count} worker{'s' if count > 1 else ''}, {clients} clients"
        results.row(Row(SECTION, f"{label}: rate", "req/s", True, rps[OURS], rps[PEER]))
        results.row(Row(SECTION, f"{label}: p99", "ms", False, p99[OURS], p99[PEER]))
        results.plot(
            f"HTTP notes_read latency, {count} worker(s) (ms)",
            OURS,
            [x / 1000 for x in rps[OURS].samples],
        )
        results.plot(
            f"HTTP notes_read latency, {count} worker(s) (ms)",
            PEER,
            [x / 1000 for x in rps[PEER].samples],
        )
