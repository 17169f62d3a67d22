"""Helpers shared by the test suite: request builders and a real `notes-server serve` process.

Imported as `from tests.helpers import ...`: tests/ is a package (no sys.path changes).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

# Only a safety net so a broken server fails the test instead of hanging the suite.
READ_TIMEOUT_S = 30.0
_DEFAULT_DB = object()


def modern_meta(caps: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {META_VERSION: PROTOCOL_VERSION, META_CAPABILITIES: dict(caps or {})}


def make_request(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    caps: Mapping[str, Any] | None = None,
    id: int | str | None = 1,
) -> dict[str, Any]:
    """A full 2026-07-28 request (or a notification when `id` is None)."""
    body: dict[str, Any] = {**(params or {}), "_meta": modern_meta(caps)}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": body}
    if id is not None:
        message["id"] = id
    return message


def free_port() -> int:
    """A loopback port free right now, for a server whose URL must name its port up front."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def default_db_url(tmp_path: Path) -> str:
    """The test's database: a SQLite file under tmp_path, or (NOTES_SERVER_TEST_DB=postgresql)
    a throw-away migrated PostgreSQL database, dropped when the test ends."""
    from tests import pg_support

    if pg_support.on_postgresql():
        return pg_support.database_url(tmp_path)
    return f"sqlite:///{tmp_path}/notes.db"


def subprocess_env(tmp_path: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The inherited environment without NOTES_SERVER_* (but NOTES_SERVER_STORE_IMPL, so a Core
    run covers the servers too), with XDG data kept under tmp_path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("NOTES_SERVER_") or k == "NOTES_SERVER_STORE_IMPL"
    }
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env.update(extra or {})
    return env


class ServerProcess:
    """A running `notes-server serve` with line-oriented access to its stdin and stdout."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr_path: Path) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self.transcript: list[bytes] = []
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.transcript.append(line)
            self._lines.put(line)
        self._lines.put(b"")

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def read_line(self) -> bytes:
        line = self._lines.get(timeout=READ_TIMEOUT_S)
        if not line:
            raise EOFError("server closed stdout")
        return line

    def read(self) -> dict[str, Any]:
        reply: dict[str, Any] = json.loads(self.read_line())
        return reply

    def request(self, method: str, params: Mapping[str, Any] | None = None, **kw: Any) -> Any:
        self.send(make_request(method, params, **kw))
        return self.read()

    def close(self) -> int:
        """Close stdin (the client's way to end a session) and return the exit code."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=READ_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self._reader.join(timeout=READ_TIMEOUT_S)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        return code

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def spawn_server(
    tmp_path: Path,
    *args: str,
    db_url: Any = _DEFAULT_DB,
    principal: str = "alice",
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """Start `python -m notes_server serve --db URL --principal alice [args...]`.

    `db_url=None` leaves out `--db` (the embedded default under $XDG_DATA_HOME).
    """
    url = default_db_url(tmp_path) if db_url is _DEFAULT_DB else db_url
    command = [sys.executable, "-m", "notes_server", "serve"]
    if url is not None:
        command += ["--db", str(url)]
    command += ["--principal", principal, *args]
    stderr_path = tmp_path / f"server-stderr-{len(list(tmp_path.glob('server-stderr-*')))}.log"
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=tmp_path,
            env=subprocess_env(tmp_path, env),
        )
    return ServerProcess(proc, stderr_path)


def workspace_refusal(error: Any) -> bool:
    """The one refusal of a workspace the caller cannot use: -32602, the fixed first sentence,
    then what to do, with the caller's own usable workspaces listed in `data`."""
    if not isinstance(error, Mapping) or error.get("code") != -32602:
        return False
    data = error.get("data")
    message = error.get("message")
    return (
        isinstance(message, str)
        and message.startswith("Workspace is not available to this principal; ")
        and isinstance(data, Mapping)
        and isinstance(data.get("usableWorkspaces"), list)
    )
