"""What every benchmark shares: paths, server command lines, requests, a stdio process, stats."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = str(ROOT / ".venv" / "bin" / "python")
CONSOLE_SCRIPT = str(ROOT / ".venv" / "bin" / "notes-server")
PEER_SCRIPT = str(ROOT / "scripts" / "peers" / "sdk_notes_server.py")
ECHO_SCRIPT = str(Path(__file__).resolve().parent / "echo.py")
BENCH_PRINCIPAL = "bench"
WORKSPACE = "file:///bench/notes"
PROTOCOL = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "notes-bench", "version": "1"},
}
# One requestState key per run, shared by every process of one implementation (as in production).
OUR_STATE_KEYS = "bench:" + secrets.token_urlsafe(32).rstrip("=")
PEER_STATE_KEY = secrets.token_hex(32)

OURS = "ours"
PEER = "peer"
NEUTRAL_CWD = tempfile.gettempdir()
# `--ours-src DIR`: run notes-server from another source tree (before/after comparisons).
SOURCE_OVERRIDE: dict[str, str] = {}


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTES_SERVER_")}
    env["NOTES_SERVER_LOG_LEVEL"] = "WARNING"
    env["NOTES_SERVER_STATE_KEYS"] = OUR_STATE_KEYS
    # The rows compare keyword search and the other tools with the peer's: a background
    # semantic indexer would write into the shared cached database mid-run and spend CPU the
    # peer does not. Semantic and hybrid search are measured on their own (bench_lib.retrieval).
    env["NOTES_SERVER_SEMANTIC"] = "off"
    env["SDK_PEER_STATE_KEY"] = PEER_STATE_KEY
    env.pop("PYTHONPATH", None)
    if "ours" in SOURCE_OVERRIDE:
        env["PYTHONPATH"] = SOURCE_OVERRIDE["ours"]
    # Run from bytecode caches, as installed packages do (this machine sets the variable
    # globally, which would make every server start recompile its own sources).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra or {})
    return env


def compile_ours() -> None:
    """Write the bytecode caches of the notes-server package that will run, as `pip install`
    does at install time. Without them, every module a server imports after confining itself
    (Landlock forbids writing `__pycache__`) is compiled from source at every start: in a
    source checkout that was the 2025-11-25 adapter and the purge feature before the first
    reply, about 100M instructions of a 487M-instruction cold start (callgrind, 04:45 UTC)."""
    tree = Path(SOURCE_OVERRIDE.get("ours", ROOT)) / "notes_server"
    subprocess.run(
        [VENV_PY, "-m", "compileall", "-q", str(tree)], check=True, stdout=subprocess.DEVNULL
    )


def ours_cmd(db: str, *, console_script: bool = False, extra: Sequence[str] = ()) -> list[str]:
    head = [CONSOLE_SCRIPT] if console_script else [VENV_PY, "-m", "notes_server"]
    return [*head, "serve", "--db", f"sqlite:///{db}", "--principal", BENCH_PRINCIPAL, *extra]


def peer_cmd(db: str, extra: Sequence[str] = ()) -> list[str]:
    return [VENV_PY, PEER_SCRIPT, "--db", db, "--principal", BENCH_PRINCIPAL, *extra]


def echo_cmd(canned: str) -> list[str]:
    return [VENV_PY, ECHO_SCRIPT, canned]


def command(impl: str, db: str) -> list[str]:
    return ours_cmd(db) if impl == OURS else peer_cmd(db)


# -- requests ---------------------------------------------------------------------------------


def request(request_id: int | str, method: str, params: Mapping[str, Any] | None = None) -> bytes:
    body = {**(params or {}), "_meta": META}
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def tool_call(
    request_id: int | str, name: str, arguments: Mapping[str, Any], **extra: Any
) -> bytes:
    return request(request_id, "tools/call", {"name": name, "arguments": dict(arguments), **extra})


def read_call(request_id: int | str, note_id: str) -> bytes:
    return tool_call(request_id, "notes_read", {"workspaceUri": WORKSPACE, "noteId": note_id})


def search_call(request_id: int | str, query: str) -> bytes:
    return tool_call(request_id, "notes_search", {"workspaceUri": WORKSPACE, "query": query})


def check_reply(line: bytes, *, expect_id: Any = None) -> dict[str, Any]:
    """A parsed successful reply; raises on JSON-RPC errors and isError tool results."""
    if not line:
        raise RuntimeError("server closed stdout")
    reply: dict[str, Any] = json.loads(line)
    if "result" not in reply:
        raise RuntimeError(f"error reply: {line[:300]!r}")
    if reply["result"].get("isError"):
        raise RuntimeError(f"tool error: {line[:300]!r}")
    if expect_id is not None and reply.get("id") != expect_id:
        raise RuntimeError(f"reply id {reply.get('id')!r} != {expect_id!r}")
    return reply


# -- a server over stdio ----------------------------------------------------------------------


class StdioServer:
    """A spawned server with buffered pipes; stderr goes to a log file."""

    def __init__(self, cmd: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        self.cmd = list(cmd)
        self.log = log
        self._log_file = log.open("ab")
        self.spawned_ns = time.perf_counter_ns()
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            env=dict(env) if env is not None else server_env(),
            # Not the repository: `python -m` puts the working directory first on sys.path,
            # which would shadow `--ours-src`.
            cwd=NEUTRAL_CWD,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, data: bytes) -> None:
        self.stdin.write(data)
        self.stdin.flush()

    def roundtrip(self, data: bytes) -> bytes:
        self.send(data)
        line = self.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.cmd[:3]} closed stdout; see {self.log}")
        return line

    def call(self, data: bytes) -> dict[str, Any]:
        return check_reply(self.roundtrip(data))

    def peak_rss_kib(self) -> int | None:
        return peak_rss_kib(self.pid)

    def close(self) -> int:
        with contextlib.suppress(BrokenPipeError):
            self.stdin.close()
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.stdout.close()
        self._log_file.close()
        return code

    def __enter__(self) -> StdioServer:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.returncode is None:
            self.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as source:
            return " ".join(source.read().split()[:3])
    except OSError:
        return "unknown"


def peak_rss_kib(pid: int) -> int | None:
    """VmHWM (peak resident set) of a live process, from /proc."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# -- statistics -------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass
class Measure:
    """One figure for one implementation: per-trial values (their median is reported, their
    min and max are the spread) plus optional raw samples for the plot."""

    trials: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.trials) if self.trials else float("nan")

    @property
    def low(self) -> float:
        return min(self.trials) if self.trials else float("nan")

    @property
    def high(self) -> float:
        return max(self.trials) if self.trials else float("nan")


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
