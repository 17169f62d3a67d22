"""In-process cost of one HTTP `notes_read`: the ASGI app called directly (no sockets, no
server stack), next to the exchange alone and the stdio path's own handling, so that changes
to the HTTP layer can be measured in microseconds without the noise of a loaded machine.

Usage: scripts/bench_lib/http_inprocess.py [--count N] [--notes N] [--repeat R]
Prints CPU µs per request (process time, best of R rounds of N requests) for each layer:
other work on a shared machine then costs little accuracy.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_lib.common import BENCH_PRINCIPAL, OUR_STATE_KEYS, read_call
from bench_lib.datasets import build, note_ids
from bench_lib.http_servers import create_token


def _headers(body: bytes, token: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"host", b"127.0.0.1:8765"),
        (b"user-agent", b"bench"),
        (b"accept-encoding", b"identity"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"notes_read"),
        (b"authorization", b"Bearer " + token.encode()),
        (b"content-length", str(len(body)).encode()),
    ]


async def _drive(app: Any, bodies: list[bytes], token: str) -> float:
    """Seconds for one lock-step pass over `bodies` through the ASGI app."""
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for body in bodies:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "server": ("127.0.0.1", 8765),
            "client": ("127.0.0.1", 50000),
            "scheme": "http",
            "method": "POST",
            "root_path": "",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "headers": _headers(body, token),
            "state": {},
        }
        message = {"type": "http.request", "body": body, "more_body": False}

        async def receive(message: dict[str, Any] = message) -> dict[str, Any]:
            return message

        await app(scope, receive, send)
    elapsed = time.process_time() - started
    if set(statuses) != {200}:
        raise SystemExit(f"unexpected statuses {sorted(set(statuses))}")
    return elapsed


K = TypeVar("K", bound=Hashable)


def interleaved(variants: dict[K, Callable[[], float]], rounds: int) -> dict[K, float]:
    """Best seconds of each variant over `rounds`, the variants taking turns so that a busy
    moment on the machine hits them alike."""
    best = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, run in variants.items():
            best[name] = min(best[name], run())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with bench_database(args.notes) as (db, token, ids):
        bodies = [read_call(i, ids[i % len(ids)]).rstrip(b"\n") for i in range(args.count)]
        measure(db, token, bodies, args.repeat)


@contextlib.contextmanager
def bench_database(notes: int) -> Iterator[tuple[Path, str, list[str]]]:
    """A throw-away database of `notes` notes, a token for it and 200 of its note ids, with
    the environment an in-process notes-server needs (shared keys, quiet logs)."""
    os.environ["NOTES_SERVER_STATE_KEYS"] = OUR_STATE_KEYS
    os.environ["NOTES_SERVER_LOG_LEVEL"] = "WARNING"
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        build(db, notes)
        yield db, create_token(str(db)), note_ids(str(db), 200)


def measure(db: Path, token: str, bodies: list[bytes], repeat: int) -> None:
    import uvloop

    from notes_server.app import create_http_app, create_server
    from notes_server.config import HttpSettings, build_settings
    from notes_server.tools.services import Services
    from notes_server.transports.http.exchange import exchange

    settings = build_settings(db=f"sqlite:///{db}", principal=BENCH_PRINCIPAL)
    services = Services(settings)
    app = create_http_app(settings, HttpSettings(auth="token"), services)
    server = create_server(settings, services)
    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(_drive(app, bodies[:200], token))  # warm-up: token remembered
    headers = {
        "mcp-protocol-version": ["2026-07-28"],
        "mcp-method": ["tools/call"],
        "mcp-name": ["notes_read"],
    }

    def exchange_only() -> float:
        started = time.process_time()
        for body in bodies:
            reply = exchange(server, body, headers, BENCH_PRINCIPAL)
            assert reply.status == 200
        return time.process_time() - started

    def stdio_path() -> float:
        started = time.process_time()
        for body in bodies:
            assert server.handle_raw(body, BENCH_PRINCIPAL) is not None
        return time.process_time() - started

    async def floor(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    variants = {
        "ASGI app, POST /mcp": lambda: loop.run_until_complete(_drive(app, bodies, token)),
        "this driver around a minimal ASGI app": lambda: loop.run_until_complete(
            _drive(floor, bodies, token)
        ),
        "exchange alone (decode .. encode)": exchange_only,
        "stdio's handle_raw (decode .. encode)": stdio_path,
    }
    best = interleaved(variants, repeat)
    for name, seconds in best.items():
        print(f"{name}: {seconds / len(bodies) * 1e6:.1f} µs/request")
    above = best["ASGI app, POST /mcp"] - best["exchange alone (decode .. encode)"]
    print(f"HTTP layer above the exchange: {above / len(bodies) * 1e6:.1f} µs/request")
    loop.close()


if __name__ == "__main__":
    main()
