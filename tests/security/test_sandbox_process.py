"""The sandbox layer: a server process cannot write outside its data directory or open TCP
connections, even when (deliberately wrong) tool code tries to."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from notes_server.security.sandbox import abi_version

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

pytestmark = pytest.mark.skipif(abi_version() < 4, reason="needs Landlock ABI >= 4 (Linux)")


def _escape(tmp_path: Path, sandbox: str, target: Path, port: int) -> dict[str, str]:
    data = tmp_path / "data"
    data.mkdir()
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    # The server's temp dir is writable by design; point it away from the target's directory.
    env = {**os.environ, "PYTHONPATH": str(FIXTURES), "TMPDIR": str(private_tmp)}
    url = f"sqlite:///{data / 'notes.db'}"
    migrate = [sys.executable, "-m", "notes_server", "migrate", "--db", url]
    subprocess.run(migrate, capture_output=True, env=env, timeout=60, check=True)
    command = [
        sys.executable,
        "-m",
        "notes_server",
        "serve",
        "--db",
        url,
        "--principal",
        "alice",
        "--sandbox",
        sandbox,
        "--tools-module",
        "escape_tools",
    ]
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "test_escape",
            "arguments": {"path": str(target), "port": port},
            "_meta": META,
        },
    }
    done = subprocess.run(
        command,
        input=json.dumps(request).encode() + b"\n",
        capture_output=True,
        env=env,
        timeout=60,
        check=True,
    )
    reply = json.loads(done.stdout.decode().splitlines()[0])
    return dict(reply["result"]["structuredContent"])


@pytest.fixture
def listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock
    sock.close()


def test_sandboxed_server_cannot_write_outside_its_data_dir_or_connect(
    tmp_path: Path, listener: socket.socket
) -> None:
    outside = tmp_path / "outside" / "escaped.txt"
    outside.parent.mkdir()
    result = _escape(tmp_path, "require", outside, listener.getsockname()[1])
    assert result == {"write": "denied", "connect": "denied"}
    assert not outside.exists()


def test_the_same_escape_succeeds_without_the_sandbox(
    tmp_path: Path, listener: socket.socket
) -> None:
    outside = tmp_path / "outside" / "escaped.txt"
    outside.parent.mkdir()
    result = _escape(tmp_path, "off", outside, listener.getsockname()[1])
    assert result == {"write": "written", "connect": "connected"}
    assert outside.read_text(encoding="utf-8") == "escaped"
