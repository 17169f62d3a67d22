"""Shared by the HTTP transport tests: request builders with the standard MCP headers, a real
`serve --transport http` subprocess, and test-only tools (loaded with --tools-module http_support).
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import httpx

from notes_server.security.keyring import KeyRing
from notes_server.tools.base import CallContext, Tool, ToolResult, tool_hints
from tests.helpers import make_request, subprocess_env

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
START_TIMEOUT_S = 60.0
RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
NAME_SOURCES = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LOOPBACK_URL = "http://127.0.0.1:8765"
# The state keys of the HTTP processes of a PostgreSQL run (SQLite: the key file beside it).
SHARED_STATE_KEYS = KeyRing.generate_spec()
# Below the server's 5 s keep-alive timeout, so a long-lived test client never sends on a
# connection the server is closing at that moment (httpx does not retry a POST; under load the
# race shows as "Server disconnected without sending a response").
CLIENT_LIMITS = httpx.Limits(keepalive_expiry=2.0)
SSE_WAIT_S = 20.0
CLEAN = "clean end"
CUT = "cut"


def mcp_headers(message: Mapping[str, Any]) -> dict[str, str]:
    """The standard headers a correct 2026-07-28 client sends for `message`."""
    headers = dict(BASE_HEADERS)
    params = message.get("params") or {}
    meta = params.get("_meta") or {}
    headers["MCP-Protocol-Version"] = str(meta.get("io.modelcontextprotocol/protocolVersion"))
    headers["Mcp-Method"] = str(message.get("method"))
    source = NAME_SOURCES.get(str(message.get("method")))
    if source is not None and isinstance(params.get(source), str):
        headers["Mcp-Name"] = params[source]
    return headers


def rpc(
    method: str, params: Mapping[str, Any] | None = None, **kw: Any
) -> tuple[bytes, dict[str, str]]:
    """A JSON body and matching headers for a well-formed request."""
    message = make_request(method, params, **kw)
    return json.dumps(message).encode(), mcp_headers(message)


class SlowTool(Tool):
    """Blocks until released; proves that a stuck handler is bounded by the request timeout."""

    name = "test_slow"
    title = "Slow"
    description = "Waits for the test to release it."
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    tool_annotations = tool_hints("Slow", read_only=True)
    release = threading.Event()

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        self.release.wait(timeout=30)
        return ToolResult({"done": True})


class WhoAmI(Tool):
    """Echoes the principal the transport authenticated."""

    name = "test_whoami"
    title = "Who am I"
    description = "Returns the authenticated principal."
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    tool_annotations = tool_hints("Who am I", read_only=True)

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        return ToolResult({"principal": ctx.principal})


class BlockingTool(Tool):
    """Blocks until the test releases it, and counts how many calls are blocked at once: proves
    that stuck requests cannot occupy more worker threads than the bound. `reset()` first."""

    name = "test_block"
    title = "Block"
    description = "Blocks until the test releases it."
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    tool_annotations = tool_hints("Block", read_only=True)
    release = threading.Event()
    entered = threading.Semaphore(0)
    lock = threading.Lock()
    running = 0
    calls = 0

    @classmethod
    def reset(cls) -> None:
        cls.release = threading.Event()
        cls.entered = threading.Semaphore(0)
        cls.running = cls.calls = 0

    def call(self, ctx: CallContext, args: dict[str, Any]) -> ToolResult:
        cls = type(self)
        with cls.lock:
            cls.running += 1
            cls.calls += 1
        cls.entered.release()
        try:
            cls.release.wait(timeout=30)
        finally:
            with cls.lock:
                cls.running -= 1
        return ToolResult({"done": True})


TOOLS: list[type[Tool]] = [SlowTool, WhoAmI, BlockingTool]


class HttpServer:
    """A running `notes-server serve --transport http` on an OS-chosen loopback port."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path, workers: int = 1) -> None:
        self.proc = proc
        self.log_path = log_path
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        self.port = self._wait_until_ready(workers)
        self.url = f"http://127.0.0.1:{self.port}"

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        with self.log_path.open("w", encoding="utf-8") as log:
            for raw in iter(self.proc.stderr.readline, b""):
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                self.lines.put(line)
        self.lines.put("")

    def _wait_until_ready(self, workers: int) -> int:
        """Read stderr until uvicorn reports the bound port and every worker has started (a
        multi-worker parent binds first; its workers listen only once their app is up)."""
        port, started = None, 0
        while port is None or started < workers:
            line = self.lines.get(timeout=START_TIMEOUT_S)
            if not line:
                raise RuntimeError(f"server exited {self.proc.wait()}: {self.stderr_text()}")
            match = RUNNING.search(line)
            port = int(match.group(1)) if match else port
            started += "Application startup complete" in line
        return port

    def stderr_text(self) -> str:
        self._reader.join(timeout=0)
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=30)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return self.proc.returncode


def serve_command(db_url: str, *args: str) -> list[str]:
    serve = [sys.executable, "-m", "notes_server", "serve", "--transport", "http"]
    return [*serve, "--port", "0", "--db", db_url, *args]


def start_http_server(
    tmp_path: Path,
    db_url: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    workers: int = 1,
) -> HttpServer:
    extra = {"PYTHONPATH": f"{HERE}:{HERE.parent}:{ROOT}", **(env or {})}
    if not db_url.startswith("sqlite"):
        # A server database has no key file beside it: the processes of a test share these.
        extra.setdefault("NOTES_SERVER_STATE_KEYS", SHARED_STATE_KEYS)
    index = len(list(tmp_path.glob("http-server-*.log")))
    proc = subprocess.Popen(
        serve_command(db_url, "--workers", str(workers), *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=subprocess_env(tmp_path, extra),
    )
    return HttpServer(proc, tmp_path / f"http-server-{index}.log", workers)


@contextlib.contextmanager
def token_server(tmp_path: Path, db_url: str) -> Iterator[HttpServer]:
    """`serve --transport http --auth token` for the test, stopped after it; the server must
    not have logged a traceback."""
    started = start_http_server(tmp_path, db_url, "--auth", "token")
    yield started
    started.stop()
    assert "Traceback" not in started.stderr_text()


class LegacyHttpHost:
    """A 2025-11-25 host over Streamable HTTP with a bearer token: it opens a session at one
    instance and may send each later POST (requests, answers, notifications) to any other."""

    protocol = "2025-11-25"

    def __init__(
        self,
        token: str,
        capabilities: Mapping[str, Any] | None = None,
        name: str = "legacy-http-test",
        timeout: float = 60,
    ) -> None:
        self.http = httpx.Client(timeout=timeout, limits=CLIENT_LIMITS)
        self.token = token
        self.capabilities = dict(capabilities if capabilities is not None else {"elicitation": {}})
        self.name = name
        self.session = ""
        self.ids = 0

    def headers(self) -> dict[str, str]:
        headers = {**BASE_HEADERS, "Authorization": f"Bearer {self.token}"}
        if self.session:
            headers |= {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": self.protocol}
        return headers

    def message(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            message["params"] = dict(params)
        return message

    def post(self, server: HttpServer, message: Mapping[str, Any]) -> httpx.Response:
        return self.http.post(f"{server.url}/mcp", json=message, headers=self.headers())

    def initialize(self, server: HttpServer) -> httpx.Response:
        """`initialize` then `notifications/initialized`, both at `server`."""
        params = {
            "protocolVersion": self.protocol,
            "capabilities": self.capabilities,
            "clientInfo": {"name": self.name, "version": "1"},
        }
        reply = self.post(server, self.message("initialize", params))
        assert reply.status_code == 200, reply.text
        self.session = reply.headers["mcp-session-id"]
        notice = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.post(server, notice).status_code == 202
        return reply

    def close(self) -> None:
        self.http.close()


@contextlib.contextmanager
def server_instances(
    tmp_path: Path,
    db_url: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    count: int = 2,
    own_args: Callable[[], Sequence[str]] = tuple,
) -> Iterator[list[HttpServer]]:
    """`count` separate `serve` processes on one database (each also given `own_args()`),
    all stopped on the way out, also when a later one fails to start."""
    started: list[HttpServer] = []
    try:
        for _ in range(count):
            started.append(start_http_server(tmp_path, db_url, *args, *own_args(), env=env))
        yield started
    finally:
        for server in started:
            server.stop()


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """The fields of each event of an SSE body's lines (comments skipped, an event ends at a
    blank line)."""
    fields: dict[str, str] = {}
    for line in lines:
        if line.startswith(":"):
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
        elif fields:
            yield fields
            fields = {}


class SseReader:
    """An open SSE response read by a thread: each event's fields into a queue, then CLEAN when
    the response body completed, or CUT when the connection broke before it did."""

    def __init__(self, client: httpx.Client, request: httpx.Request) -> None:
        self.response = client.send(request, stream=True)
        self.items: queue.Queue[dict[str, str] | str] = queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for fields in sse_events(self.response.iter_lines()):
                self.items.put(fields)
        except httpx.HTTPError:
            self.items.put(CUT)
        else:
            self.items.put(CLEAN)

    def next(self, wait_s: float = SSE_WAIT_S) -> dict[str, str] | str:
        return self.items.get(timeout=wait_s)

    def message(self, wait_s: float = SSE_WAIT_S) -> Any:
        item = self.next(wait_s)
        assert isinstance(item, dict) and item.get("data"), item
        return json.loads(item["data"])
