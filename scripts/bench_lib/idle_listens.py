"""Idle cost of change subscriptions (issue 24): "1,000 idle subscribers on one instance cost
< 5% of one core".

One `notes-server serve --transport http --auth token` on SQLite; this process opens N
`subscriptions/listen` POSTs (each its own connection, read until the acknowledgement, then
only drained: keep-alive comments) from N/PER_PRINCIPAL principals (the server allows 32 open
listens per principal), and nothing changes. The server's CPU time (user + system, all its
threads, from /proc) over a window that holds at least two keep-alive rounds (15 s each) is
the figure, as % of one core; the same window with no listen open is measured first, in the
same process, so the difference is what the listens cost.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench_lib.common import cpu_seconds, loadavg, log, server_env
from bench_lib.results import Check, Results

TARGET_PERCENT = 5.0
PER_PRINCIPAL = 25
RUNNING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _tokens(db_url: str, listens: int) -> list[str]:
    """One token per principal, PER_PRINCIPAL listens each (in the bench's own database)."""
    from notes_server.security.tokens import create_token
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine
    from notes_server.store.tokens import SqlTokenRecords

    engine = make_engine(db_url)
    migrate.upgrade(engine)
    records = SqlTokenRecords(engine)
    principals = -(-listens // PER_PRINCIPAL)
    made = [create_token(records, f"idle-{n}")[1] for n in range(principals)]
    engine.dispose()
    return [made[i // PER_PRINCIPAL] for i in range(listens)]


class _Server:
    def __init__(self, db_url: str) -> None:
        command = [sys.executable, "-m", "notes_server", "serve", "--transport", "http"]
        command += ["--port", "0", "--auth", "token", "--db", db_url]
        env = server_env({"NOTES_SERVER_LOG_LEVEL": "INFO"})
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert self.proc.stderr is not None
        self.port = 0
        for line in iter(self.proc.stderr.readline, b""):
            found = RUNNING.search(line)
            self.port = int(found.group(1)) if found else self.port
            if b"Application startup complete" in line:
                break
        if not self.port:
            raise RuntimeError(f"the server did not start (exit {self.proc.wait()})")
        # Keep draining stderr so the server never blocks on a full pipe.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def _listen(port: int, token: str, number: int, opened: asyncio.Queue[int]) -> None:
    """Open one listen, report it once acknowledged, then drain it until the server ends it."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": f"idle-{number}",
            "method": "subscriptions/listen",
            "params": {"notifications": {"resourcesListChanged": True}, "_meta": META},
        }
    ).encode()
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n"
        f"Mcp-Method: subscriptions/listen\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + body)
    await writer.drain()
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"listen {number} refused: {status!r}")
    while b"notifications/subscriptions/acknowledged" not in await reader.readline():
        pass
    await opened.put(number)
    while await reader.read(4096):
        pass
    writer.close()


def _window(pid: int, seconds: float) -> float:
    """% of one core the process used over `seconds` of wall time."""
    start_cpu, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)  # the measurement window itself, not a synchronization
    return (cpu_seconds(pid) - start_cpu) / (time.monotonic() - start) * 100


async def _with_listens(server: _Server, tokens: list[str], window_s: float) -> float:
    opened: asyncio.Queue[int] = asyncio.Queue()
    tasks = [
        asyncio.ensure_future(_listen(server.port, token, n, opened))
        for n, token in enumerate(tokens)
    ]
    for _ in tokens:
        await asyncio.wait_for(opened.get(), 120)
    failed = [t for t in tasks if t.done() and t.exception() is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} listens failed: {failed[0].exception()}")
    percent = await asyncio.get_running_loop().run_in_executor(
        None, _window, server.proc.pid, window_s
    )
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return percent


def measure(workdir: Path, listens: int, window_s: float) -> tuple[float, float]:
    """(% of one core with no listen, % with `listens` idle listens), one server."""
    db = workdir / "idle-listens.db"
    db.unlink(missing_ok=True)
    url = f"sqlite:///{db}"
    tokens = _tokens(url, listens)
    server = _Server(url)
    try:
        baseline = _window(server.proc.pid, window_s)
        loaded = asyncio.run(_with_listens(server, tokens, window_s))
    finally:
        server.stop()
    return baseline, loaded


def run(results: Results, workdir: Path, *, listens: int, window_s: float) -> None:
    log(f"idle listens: {listens} open listens on one HTTP server, {window_s:.0f} s windows")
    baseline, loaded = measure(workdir, listens, window_s)
    results.checks.append(
        Check(
            f"{listens} idle listens on one instance (HTTP, SQLite), < {TARGET_PERCENT:.0f}% "
            "of one core",
            f"{loaded:.2f}% of one core over {window_s:.0f} s (no listen: {baseline:.2f}%; "
            f"load average {loadavg()})",
            loaded < TARGET_PERCENT,
        )
    )
