"""Multi-process harness: real `notes-server serve` processes on one SQLite file.

Each `Server` owns one process and speaks newline-delimited JSON-RPC over its pipes. Reader
threads pump stdout (replies) and stderr (logs, checkpoint banners) into queues, so every wait
has a safety-net timeout and nothing ever sleeps to synchronize. `Db` inspects the database with
the stdlib driver, independently of the code under test.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2026-07-28"
WORKSPACE = "file:///home/alice/notes"
PRINCIPAL = "alice"
# Safety nets only: a hung server fails the test instead of hanging the suite.
TIMEOUT_S = 60.0
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
STATE_REJECTED = "Invalid or expired requestState"
WORKSPACE_DENIED = "Workspace is not available to this principal"
INVALID_CONFIRMATION = "Invalid confirmation: choose one of the offered notes and confirm it"
# Where each confirmed tool asks its question.
INPUT_KEYS = {"notes_delete": "delete_choice", "notes_archive": "archive_choice"}
# What must never show up in a server's stderr during these tests.
LOG_ALARMS = ("Traceback", "database is locked", "Internal error", "internal error")

META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


def request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}


def accept(tool: str, note_id: str) -> dict[str, Any]:
    content = {"note_id": note_id, "confirm": True}
    return {INPUT_KEYS[tool]: {"action": "accept", "content": content}}


def decline(tool: str) -> dict[str, Any]:
    return {INPUT_KEYS[tool]: {"action": "decline"}}


def generate_keys() -> str:
    from notes_server.security.keyring import KeyRing

    return KeyRing.generate_spec()


def state_nonce(keys: str, state: str) -> str:
    """The nonce sealed inside a requestState (the test holds the shared keys)."""
    from notes_server.security.keyring import KeyRing
    from notes_server.security.state import StateSealer

    nonce: str = StateSealer(KeyRing.parse(keys)).open(state)["n"]
    return nonce


def prepare_database(url: str) -> None:
    """Migrate and grant alice write access to WORKSPACE, in-process, before any server starts."""
    from notes_server.security.uri import canonical_workspace
    from notes_server.store import grants, migrate
    from notes_server.store.engine import make_engine, write_tx
    from notes_server.tools.services import utc_now

    engine = make_engine(url)
    try:
        migrate.upgrade(engine)
        with write_tx(engine) as conn:
            grants.upsert(conn, PRINCIPAL, canonical_workspace(WORKSPACE), "write", utc_now())
    finally:
        engine.dispose()


def revoke_grant(url: str) -> None:
    from notes_server.security.uri import canonical_workspace
    from notes_server.store import grants
    from notes_server.store.engine import make_engine, write_tx

    engine = make_engine(url)
    try:
        with write_tx(engine) as conn:
            assert grants.revoke(conn, PRINCIPAL, canonical_workspace(WORKSPACE))
    finally:
        engine.dispose()


def _pump(stream: Any, sink: queue.Queue[bytes], keep: list[bytes] | None) -> None:
    for line in iter(stream.readline, b""):
        if keep is not None:
            keep.append(line)
        sink.put(line)
    sink.put(b"")


class Server:
    """One `notes-server serve --db URL --principal alice` process."""

    def __init__(
        self,
        url: str,
        keys: str,
        cwd: Path,
        *,
        pause_at: str | None = None,
        store_impl: str | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NOTES_SERVER_")}
        env.update(settings or {})
        env["NOTES_SERVER_STATE_KEYS"] = keys
        env["NOTES_SERVER_STORE_IMPL"] = store_impl or os.environ.get("NOTES_SERVER_STORE_IMPL", "")
        env["XDG_DATA_HOME"] = str(cwd / "xdg")
        if pause_at is not None:
            env["NOTES_SERVER_TEST_PAUSE_AT"] = pause_at
        command = [sys.executable, "-m", "notes_server", "serve", "--db", url]
        self.proc = subprocess.Popen(
            [*command, "--principal", PRINCIPAL],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
        )
        self.pause_at = pause_at
        self.ids = itertools.count(1)
        self.stderr_lines: list[bytes] = []
        self._out: queue.Queue[bytes] = queue.Queue()
        self._err: queue.Queue[bytes] = queue.Queue()
        self._pumps = [
            threading.Thread(target=_pump, args=(self.proc.stdout, self._out, None), daemon=True),
            threading.Thread(
                target=_pump, args=(self.proc.stderr, self._err, self.stderr_lines), daemon=True
            ),
        ]
        for pump in self._pumps:
            pump.start()

    # -- messages -------------------------------------------------------------------------

    def encode(self, method: str, params: dict[str, Any]) -> bytes:
        """One request line with a fresh id: build it before a barrier, write it after."""
        return json.dumps(request(next(self.ids), method, params)).encode() + b"\n"

    def write(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        line = self._out.get(timeout=TIMEOUT_S)
        if not line:
            raise EOFError(f"server exited ({self.proc.poll()}): {self.stderr_text()[-2000:]}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.write(self.encode(method, params))
        return self.read()

    def tool(self, name: str, arguments: dict[str, Any], **mrtr: Any) -> dict[str, Any]:
        return self.call("tools/call", tool_params(name, arguments, **mrtr))

    def wait_ready(self) -> None:
        reply = self.call("tools/list", {})
        assert "result" in reply, reply

    # -- stderr ---------------------------------------------------------------------------

    def wait_for_stderr(self, text: str) -> None:
        """Block until a stderr line contains `text` (a checkpoint banner, for instance)."""
        while True:
            line = self._err.get(timeout=TIMEOUT_S)
            if not line:
                raise EOFError(f"server exited before {text!r}: {self.stderr_text()[-2000:]}")
            if text.encode() in line:
                return

    def stderr_text(self) -> str:
        return b"".join(self.stderr_lines).decode("utf-8", "replace")

    def alarms(self) -> list[str]:
        text = self.stderr_text()
        return [alarm for alarm in LOG_ALARMS if alarm in text]

    # -- ending ---------------------------------------------------------------------------

    def hang_up(self) -> None:
        """Close stdin: the client's way to end a session (the server exits on EOF)."""
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def close(self) -> None:
        """End the session and reap the process (killed if it does not exit); idempotent.
        A server started with a pause point may be frozen there for good: it is killed."""
        if self.pause_at is not None and self.proc.poll() is None:
            self.proc.kill()
        self.hang_up()
        try:
            self.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT_S)
        self._release()

    def sigkill(self) -> int:
        """Kill the process without warning (no cleanup runs in it) and reap it."""
        self.proc.send_signal(signal.SIGKILL)
        code = self.proc.wait(timeout=TIMEOUT_S)
        self.hang_up()
        self._release()
        return code

    def _release(self) -> None:
        for pump in self._pumps:
            pump.join(timeout=TIMEOUT_S)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def tool_params(
    name: str,
    arguments: dict[str, Any],
    *,
    state: str | None = None,
    responses: dict[str, Any] | None = None,
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if state is not None:
        params["requestState"] = state
        params["inputResponses"] = responses
    return params


def start_servers(
    url: str,
    keys: str,
    cwd: Path,
    count: int,
    *,
    store_impls: tuple[str | None, ...] = (None,),
    settings: Mapping[str, str] | None = None,
) -> list[Server]:
    """Start `count` servers concurrently (their store implementations taken in turn from
    `store_impls`; `settings`: NOTES_SERVER_* values for all of them), then wait until each
    answers."""
    servers: list[Server] = []
    try:
        for index in range(count):
            impl = store_impls[index % len(store_impls)]
            servers.append(Server(url, keys, cwd, store_impl=impl, settings=settings))
        for server in servers:
            server.wait_ready()
    except BaseException:
        stop_servers(servers)
        raise
    return servers


def stop_servers(servers: list[Server]) -> None:
    """Hang up on every server first, then reap them: they shut down in parallel."""
    for server in servers:
        server.hang_up()
    for server in servers:
        server.close()


def create_note(server: Server, title: str, path: str) -> str:
    reply = server.tool("notes_create", {"workspaceUri": WORKSPACE, "title": title, "path": path})
    result = reply["result"]
    assert result["isError"] is False, reply
    note_id: str = result["structuredContent"]["note"]["id"]
    return note_id


@dataclass(frozen=True)
class Round1:
    """What round 1 handed the client: the offered note ids (in order) and the sealed state."""

    candidates: list[str]
    state: str


def round1(server: Server, tool: str, title: str) -> Round1:
    reply = server.tool(tool, {"workspaceUri": WORKSPACE, "title": title})
    result = reply["result"]
    assert result["resultType"] == "input_required", reply
    form = result["inputRequests"][INPUT_KEYS[tool]]["params"]["requestedSchema"]
    candidates = [choice["const"] for choice in form["properties"]["note_id"]["oneOf"]]
    return Round1(candidates, result["requestState"])


def race(servers: list[Server], lines: list[bytes]) -> list[dict[str, Any]]:
    """Release every server's request line at once (one client thread per server, behind a
    barrier) and return the replies in server order."""
    assert len(servers) == len(lines)
    barrier = threading.Barrier(len(servers), timeout=TIMEOUT_S)
    replies: list[dict[str, Any] | None] = [None] * len(servers)
    failures: list[BaseException] = []

    def racer(index: int) -> None:
        try:
            barrier.wait()
            servers[index].write(lines[index])
            replies[index] = servers[index].read()
        except BaseException as exc:  # reported by the caller, never swallowed
            failures.append(exc)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(servers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT_S * 2)
    if failures:
        raise failures[0]
    assert all(reply is not None for reply in replies), "a racer never got its reply"
    return [reply for reply in replies if reply is not None]


class Db:
    """Direct reads of the database with the plain driver: the stdlib one for a SQLite file,
    psycopg for a PostgreSQL URL (`?` placeholders either way)."""

    def __init__(self, path: Path | str) -> None:
        self.path = path

    def query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if isinstance(self.path, str):
            return _pg_query(self.path, sql.replace("?", "%s"), args)
        with closing(sqlite3.connect(self.path, timeout=TIMEOUT_S)) as conn:
            return conn.execute(sql, args).fetchall()

    def note(self, note_id: str) -> tuple[int, int] | None:
        """(version, archived) of a note, or None when it no longer exists."""
        rows = self.query("SELECT version, archived FROM notes WHERE id = ?", (note_id,))
        return None if not rows else (int(rows[0][0]), int(rows[0][1]))

    def nonces(self, nonces: list[str]) -> dict[str, tuple[str, str | None]]:
        """nonce -> (outcome, result_json) for the consumed ones among `nonces`."""
        marks = ",".join("?" * len(nonces))
        rows = self.query(
            f"SELECT nonce, outcome, result_json FROM consumed_nonces WHERE nonce IN ({marks})",
            tuple(nonces),
        )
        return {row[0]: (row[1], row[2]) for row in rows}

    def audits(self, nonces: list[str]) -> list[tuple[str, str, str | None]]:
        """(nonce, outcome, note_id) of audit rows written under any of `nonces`."""
        marks = ",".join("?" * len(nonces))
        return [
            (row[0], row[1], row[2])
            for row in self.query(
                f"SELECT nonce, outcome, note_id FROM audit_log WHERE nonce IN ({marks})",
                tuple(nonces),
            )
        ]

    def counts(self) -> tuple[int, int, int]:
        """(notes, consumed_nonces, audit_log) row counts."""
        row = self.query(
            "SELECT (SELECT count(*) FROM notes), (SELECT count(*) FROM consumed_nonces), "
            "(SELECT count(*) FROM audit_log)"
        )[0]
        return int(row[0]), int(row[1]), int(row[2])


def _pg_query(url: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    import psycopg
    from sqlalchemy.engine.url import make_url

    parsed = make_url(url)
    conninfo = {
        "host": parsed.host,
        "port": parsed.port or 5432,
        "user": parsed.username,
        "dbname": parsed.database,
        "password": parsed.password,
    }
    with psycopg.connect(**{k: v for k, v in conninfo.items() if v is not None}) as conn:
        return [tuple(row) for row in conn.execute(sql, args).fetchall()]
