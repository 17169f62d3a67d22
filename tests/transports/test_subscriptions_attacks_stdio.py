"""Issue 24's attack tests through real stdio `serve` processes: past the cap of open listens
a listen is refused with the documented -32602 (a cancelled listen frees its place; the cap
is per server process, so another `serve` accepts the same principal's listen); a 2025-11-25
session that subscribes 10,000 URIs has the first 1,000 and is refused the other 9,000 with the
documented message and data, and still hears its notes; a client that never reads stdout has
its listen dropped at its bound (it reads, at last, what was in flight, then
`notifications/cancelled` and the closing result, and its session goes on), while a client of
another server process on the same database hears every change and is answered throughout.

A "marker" change written after the ones under test proves what came before it, since the
feed delivers in commit order."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from notes_server.features.subscriptions.hub import (
    MAX_LISTENS_PER_PRINCIPAL,
    MAX_URIS,
    QUEUE_LIMIT,
    SUBSCRIPTION_ID,
)
from notes_server.store import notes
from notes_server.store.engine import write_tx
from tests.helpers import (
    READ_TIMEOUT_S,
    ServerProcess,
    default_db_url,
    make_request,
    subprocess_env,
)
from tests.transports.subscription_support import NOW, WRITER, insert, insert_many, touch

Spawn = Callable[..., ServerProcess]
Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"
WORK = "file:///home/alice/work"
CAP_MESSAGE = f"Too many open subscriptions: at most {MAX_LISTENS_PER_PRINCIPAL} per principal"


def listen_message(tag: Any, uris: list[str]) -> dict[str, Any]:
    return make_request(
        "subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}}, id=tag
    )


def acknowledged(reply: dict[str, Any], tag: Any) -> bool:
    return reply.get("method") == "notifications/subscriptions/acknowledged" and reply["params"][
        "_meta"
    ] == {SUBSCRIPTION_ID: tag}


def updated(uri: str, tag: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"uri": uri}
    if tag is not None:
        params["_meta"] = {SUBSCRIPTION_ID: tag}
    return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params}


def test_past_the_cap_a_listen_is_refused_a_cancel_frees_a_place_and_the_cap_is_per_process(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    plan = f"{NOTES}/plan.md"
    process = spawn_server()
    acks = []
    for n in range(MAX_LISTENS_PER_PRINCIPAL):
        process.send(listen_message(n, [plan]))
        acks.append(process.read())

    process.send(listen_message("over", [plan]))
    refused = process.read()
    process.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}
    )
    process.send(listen_message("again", [plan]))
    again = process.read()
    other = spawn_server()
    other.send(listen_message("there", [plan]))
    there = other.read()

    assert all(acknowledged(ack, n) for n, ack in enumerate(acks)), acks
    assert refused == {
        "jsonrpc": "2.0",
        "id": "over",
        "error": {
            "code": -32602,
            "message": CAP_MESSAGE,
            "data": {"limit": MAX_LISTENS_PER_PRINCIPAL},
        },
    }
    assert acknowledged(again, "again"), again
    assert acknowledged(there, "there"), there


def test_a_2025_session_subscribing_ten_thousand_uris_keeps_the_first_thousand(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant
) -> None:
    grant("alice", NOTES)
    note = insert(migrated_engine, NOTES, "n0.md")
    process = spawn_server()
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "attack", "version": "1"},
    }
    process.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init})
    assert "result" in process.read()
    process.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    lines = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "resources/subscribe",
                "params": {"uri": f"{NOTES}/n{i}.md"},
            }
        )
        for i in range(10_000)
    ]
    writer = threading.Thread(target=process.send_raw, args=("\n".join(lines).encode() + b"\n",))
    writer.start()
    replies = [process.read() for _ in range(10_000)]
    writer.join()
    process.send(
        {
            "jsonrpc": "2.0",
            "id": "again",
            "method": "resources/subscribe",
            "params": {"uri": f"{NOTES}/n0.md"},
        }
    )
    again = process.read()
    touch(migrated_engine, note)

    assert [r["id"] for r in replies] == list(range(10_000))
    assert all(r.get("result") == {} for r in replies[:MAX_URIS])
    refusal = {
        "code": -32602,
        "message": f"Too many resource subscriptions: at most {MAX_URIS} URIs per session",
        "data": {"limit": MAX_URIS},
    }
    assert all(r.get("error") == refusal for r in replies[MAX_URIS:])
    assert again == {"jsonrpc": "2.0", "id": "again", "result": {}}
    assert process.read() == updated(f"{NOTES}/n0.md")


class UnreadServer:
    """A stdio `serve` whose stdout nobody reads until `read_line()`; its log lines queued."""

    def __init__(self, tmp_path: Path) -> None:
        command = [sys.executable, "-m", "notes_server", "serve", "--db", default_db_url(tmp_path)]
        self.proc = subprocess.Popen(
            [*command, "--principal", "alice"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env=subprocess_env(tmp_path),
        )
        self.log: queue.Queue[bytes] = queue.Queue()
        self._pumping = threading.Thread(target=self._pump, daemon=True)
        self._pumping.start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self.log.put(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def logged(self, text: bytes) -> bool:
        while not self.log.empty():
            if text in self.log.get_nowait():
                return True
        return False

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "stdout closed"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def kill(self) -> None:
        """After a failed test: the process, its pipes and its log reader gone."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._pumping.join(timeout=READ_TIMEOUT_S)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def close(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.stdout.read()
        self.proc.stdout.close()
        code = self.proc.wait(timeout=READ_TIMEOUT_S)
        self._pumping.join(timeout=READ_TIMEOUT_S)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return code


def test_a_client_that_never_reads_has_its_listen_dropped_and_another_is_not_slowed(
    migrated_engine: Engine, spawn_server: Spawn, grant: Grant, tmp_path: Path
) -> None:
    grant("alice", NOTES)
    grant("alice", WORK)
    flood = insert_many(migrated_engine, NOTES, MAX_URIS)
    marker = insert(migrated_engine, WORK, "marker.md")
    slow = UnreadServer(tmp_path)
    try:
        check_the_dropped_listen(slow, flood, marker, migrated_engine, spawn_server)
    finally:
        slow.kill()


def check_the_dropped_listen(
    slow: UnreadServer,
    flood: list[notes.NoteRecord],
    marker: notes.NoteRecord,
    migrated_engine: Engine,
    spawn_server: Spawn,
) -> None:
    slow.send(listen_message("slow", [f"{NOTES}/{note.path}" for note in flood]))
    assert acknowledged(slow.read(), "slow")
    fast = spawn_server()
    assert acknowledged(
        fast.request(
            "subscriptions/listen",
            {"notifications": {"resourceSubscriptions": [f"{WORK}/marker.md"]}},
            id="fast",
        ),
        "fast",
    )
    rounds, dropped = 0, False
    while not dropped:
        assert rounds < 60, "the listen of the client that never reads was never dropped"
        with write_tx(migrated_engine) as conn:
            flood = [
                notes.update_fields(conn, n, now=NOW, author=WRITER, body=n.body + "+") or n
                for n in flood
            ]
        marker = touch(migrated_engine, marker)
        heard = fast.read()
        answer = fast.request("tools/list", id=rounds)
        rounds += 1
        assert heard == updated(f"{WORK}/marker.md", "fast")
        assert answer["id"] == rounds - 1 and "tools" in answer["result"]
        dropped = slow.logged(b"a subscription was dropped")

    received: list[dict[str, Any]] = []
    while "id" not in (received[-1] if received else {}):
        received.append(slow.read())
    slow.send(make_request("tools/list", id="after"))
    after = slow.read()

    made = rounds * MAX_URIS
    got = sum(m.get("method") == "notifications/resources/updated" for m in received)
    assert 0 < got < made - QUEUE_LIMIT, (got, made)
    assert received[-2:] == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "slow", "reason": "The subscription fell too far behind"},
        },
        {
            "jsonrpc": "2.0",
            "id": "slow",
            "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: "slow"}},
        },
    ]
    assert after["id"] == "after" and "tools" in after["result"]
    assert slow.close() == 0
