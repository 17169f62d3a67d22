"""The HTTP servers the benchmark runs (notes-server, the SDK peer, the floor) and its load.

notes-server runs with `--auth token` (a token created in the benchmark's copy of the
database; every client presents it); the peer has no authentication of its own and ignores
the header. Each load client is its own process holding one keep-alive connection, lock-step.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_lib.common import (
    BENCH_PRINCIPAL,
    NEUTRAL_CWD,
    OURS,
    PEER,
    VENV_PY,
    check_reply,
    cpu_seconds,
    ours_cmd,
    peak_rss_kib,
    peer_cmd,
    request,
    server_env,
)

FLOOR = "floor"
HERE = Path(__file__).resolve().parent
CLIENT = str(HERE / "http_client.py")
FLOOR_APP = str(HERE / "http_floor.py")
PATH = "/mcp"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_token(db: str) -> str:
    """A bearer token for the benchmark principal, in `db` (a copy made for this run)."""
    out = subprocess.run(
        [
            VENV_PY,
            "-m",
            "notes_server",
            "token",
            "create",
            BENCH_PRINCIPAL,
            "--db",
            f"sqlite:///{db}",
        ],
        capture_output=True,
        text=True,
        env=server_env(),
        check=True,
    ).stdout
    return next(word for word in out.split() if word.startswith("nst_"))


def post(port: int, body: bytes, token: str | None) -> tuple[int, bytes]:
    message = json.loads(body)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": message["method"],
    }
    if message["method"] == "tools/call":
        headers["Mcp-Name"] = message["params"]["name"]
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", PATH, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class HttpServer:
    def __init__(
        self,
        impl: str,
        db: str,
        workers: int,
        logfile: Path,
        token: str,
        floor_reply: Path,
        *,
        peer_args: Sequence[str] = (),
    ) -> None:
        self.port = free_port()
        self.token = token
        extra = ["--transport", "http", "--port", str(self.port), "--workers", str(workers)]
        if impl == OURS:
            cmd = ours_cmd(db, extra=[*extra, "--auth", "token"])
        elif impl == PEER:
            cmd = peer_cmd(db, extra=[*extra, *peer_args])
        else:
            cmd = [VENV_PY, FLOOR_APP, str(self.port), str(floor_reply)]
        self._log = logfile.open("ab")
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=self._log,
            env=server_env(),
            stdin=subprocess.DEVNULL,
            cwd=NEUTRAL_CWD,
        )
        self._wait_ready(impl, logfile)

    def _wait_ready(self, impl: str, logfile: Path) -> None:
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{impl} HTTP server exited ({self.proc.returncode}); see {logfile}"
                )
            try:
                status, data = post(self.port, request(1, "server/discover"), self.token)
                if status == 200:
                    check_reply(data)
                    return
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{impl} HTTP server did not come up; see {logfile}")
            time.sleep(0.05)

    def pids(self) -> list[int]:
        pids = [self.proc.pid]
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            pids += [int(p) for p in children.split()]
        except OSError:
            pass
        return pids

    def cpu_seconds(self) -> float:
        """User + system CPU of the server and its worker processes so far."""
        total = 0.0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                total += cpu_seconds(pid)
        return total

    def peak_rss_kib(self) -> int | None:
        values = [v for v in (peak_rss_kib(p) for p in self.pids()) if v is not None]
        return max(values) if values else None

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def load(
    server: HttpServer, body_file: Path, clients: int, seconds: float
) -> tuple[float, list[float], float]:
    """(requests/s, latencies in µs, server CPU µs per request) of `clients` lock-step clients."""
    start_at = time.time() + 0.2 + 0.03 * clients
    args = [VENV_PY, CLIENT, str(server.port), PATH, str(seconds), str(start_at), str(body_file)]
    outcomes, cpu = run_clients(server, [args] * clients, "HTTP client", timeout=180)
    count = sum(o["count"] for o in outcomes)
    rate = count / max(o["elapsed"] for o in outcomes)
    return rate, [x for o in outcomes for x in o["lat"]], 1e6 * cpu / max(count, 1)


def run_clients(
    server: HttpServer, commands: Sequence[Sequence[str]], what: str, *, timeout: float
) -> tuple[list[dict[str, Any]], float]:
    """Start one client process per command, each with the server's token and printing one
    JSON object, and wait for all: their objects, and the server's CPU seconds meanwhile."""
    env = {**os.environ, "NOTES_BENCH_TOKEN": server.token}
    procs = [subprocess.Popen(list(cmd), stdout=subprocess.PIPE, env=env) for cmd in commands]
    cpu_before = server.cpu_seconds()
    outcomes = []
    for proc in procs:
        out, _ = proc.communicate(timeout=timeout)
        if proc.returncode:
            raise RuntimeError(f"{what} failed ({proc.returncode})")
        outcomes.append(json.loads(out))
    return outcomes, server.cpu_seconds() - cpu_before
