"""Many stateless instances on one PostgreSQL database: the confirmation is settled by the
database alone.

K `serve --transport http` processes (separate ports) share one throw-away PostgreSQL database
and the state keys. Per trial, round 1 runs on one instance; then N client threads, released at
once behind a barrier, present round 2 through the instances in turn. Exactly one transaction
commits per confirmation; an identical retry of the winning accept gets the recorded outcome;
any other loser gets -32602 for the consumed confirmation (never "the note no longer exists",
which READ COMMITTED would give a loser that read the note after the winner's delete).
Runs in every run of the suite when a PostgreSQL server is reachable (skipped otherwise).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants, migrate
from notes_server.store.engine import make_engine, write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import utc_now
from tests import pg_support
from tests.transports.http_support import CLIENT_LIMITS, HttpServer, rpc, start_http_server

INSTANCES = 3
CLIENTS = 16
TRIALS = 200
MIXED_TRIALS = 40
WS = "file:///home/alice/notes"
FORM = {"elicitation": {"form": {}}}
INVALID_PARAMS = -32602
STATE_REJECTED = "Invalid or expired requestState"
LOG_ALARMS = ("Traceback", "Internal error", "internal error", "deadlock", "40001", "40P01")


@dataclass
class Cluster:
    servers: list[HttpServer]
    engine: Engine
    token: str
    clients: list[httpx.Client]

    def post(self, index: int, method: str, params: Any, **kw: Any) -> dict[str, Any]:
        body, headers = rpc(method, params, caps=FORM, **kw)
        headers["Authorization"] = f"Bearer {self.token}"
        server = self.servers[index % len(self.servers)]
        client = self.clients[index % len(self.clients)]
        response = client.post(f"{server.url}/mcp", content=body, headers=headers)
        assert response.status_code == 200, response.text
        reply: dict[str, Any] = response.json()
        return reply

    def scalar(self, sql: str, **values: Any) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(text(sql), values).scalar_one()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    problem = pg_support.reachable()
    if problem is not None:
        pytest.skip(problem)
    tmp_path = tmp_path_factory.mktemp("pg-cluster")
    url = pg_support.database_url(tmp_path, per_test=False)
    engine = make_engine(url)
    with write_tx(engine) as conn:
        grants.upsert(conn, "alice", canonical_workspace(WS), "write", utc_now())
    _, token = create_token(SqlTokenRecords(engine), "alice")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    servers: list[HttpServer] = []
    clients = [httpx.Client(timeout=60, limits=CLIENT_LIMITS) for _ in range(CLIENTS)]
    try:
        for _ in range(INSTANCES):
            servers.append(start_http_server(tmp_path, url, env=env))
        yield Cluster(servers, engine, token, clients)
        for server in servers:
            log = server.stderr_text()
            assert not [alarm for alarm in LOG_ALARMS if alarm in log], log[-3000:]
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.stop()
        engine.dispose()
        pg_support.drop_database(url)


def _round1(cluster: Cluster, index: int, title: str) -> tuple[str, str]:
    args = {"workspaceUri": WS, "title": title, "path": f"{title}.md"}
    created = cluster.post(index, "tools/call", {"name": "notes_create", "arguments": args})
    assert created["result"]["isError"] is False, created
    del args["path"]
    reply = cluster.post(index, "tools/call", {"name": "notes_delete", "arguments": args})
    result = reply["result"]
    assert result["resultType"] == "input_required", reply
    form = result["inputRequests"]["delete_choice"]["params"]["requestedSchema"]
    note_id: str = form["properties"]["note_id"]["oneOf"][0]["const"]
    return note_id, result["requestState"]


def _round2(title: str, state: str, answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "notes_delete",
        "arguments": {"workspaceUri": WS, "title": title},
        "inputResponses": {"delete_choice": answer},
        "requestState": state,
    }


def _race(cluster: Cluster, first: int, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Release every client's round 2 at once; client i goes through instance first + i."""
    barrier = threading.Barrier(len(bodies), timeout=60)
    replies: list[dict[str, Any] | None] = [None] * len(bodies)
    failures: list[BaseException] = []

    def client(i: int) -> None:
        try:
            barrier.wait()
            replies[i] = cluster.post(first + i, "tools/call", bodies[i], id=i + 2)
        except BaseException as exc:  # reported below, never swallowed
            failures.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures[0]
    return [reply for reply in replies if reply is not None]


def _rejected(reply: dict[str, Any]) -> bool:
    error = reply.get("error") or {}
    return error.get("code") == INVALID_PARAMS and error.get("message") == STATE_REJECTED


def _committed(cluster: Cluster, note_id: str) -> tuple[int, int, int]:
    """(notes left with this id, audit rows for it, deletes audited for it)."""
    return (
        cluster.scalar("SELECT count(*) FROM notes WHERE id = :id", id=note_id),
        cluster.scalar("SELECT count(*) FROM audit_log WHERE note_id = :id", id=note_id),
        cluster.scalar(
            "SELECT count(*) FROM audit_log WHERE note_id = :id AND outcome = 'deleted'",
            id=note_id,
        ),
    )


def test_every_instance_reports_healthy_on_the_shared_database(cluster: Cluster) -> None:
    for server, client in zip(cluster.servers, cluster.clients, strict=False):
        response = client.get(f"{server.url}/healthz")
        assert response.status_code == 200, response.text
        assert response.json() == {"status": "ok", "schema": migrate.HEAD}


def test_racing_identical_accepts_across_instances_delete_exactly_once(cluster: Cluster) -> None:
    accept = {"action": "accept", "content": {"confirm": True}}
    for trial in range(TRIALS):
        title = f"race-{trial}"
        note_id, state = _round1(cluster, trial, title)  # round 1 on one instance...
        answer = {**accept, "content": {**accept["content"], "note_id": note_id}}
        # ...round 2 starts on the next one, and the clients spread over all of them.
        replies = _race(cluster, trial + 1, [_round2(title, state, answer)] * CLIENTS)
        outcomes = [reply["result"]["structuredContent"] for reply in replies]
        expected = {
            "deleted": True,
            "outcome": "deleted",
            "noteId": note_id,
            "title": title,
            "uri": f"{WS}/{title}.md",
        }
        assert outcomes == [expected] * CLIENTS, (trial, replies)
        assert _committed(cluster, note_id) == (0, 1, 1), trial
    assert cluster.scalar("SELECT count(*) FROM consumed_nonces") >= TRIALS


def test_racing_accepts_and_declines_across_instances_settle_one_answer(
    cluster: Cluster,
) -> None:
    for trial in range(MIXED_TRIALS):
        title = f"mixed-{trial}"
        note_id, state = _round1(cluster, trial, title)
        accept = {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
        decline = {"action": "decline"}
        bodies = [_round2(title, state, accept if i % 2 else decline) for i in range(CLIENTS)]
        replies = _race(cluster, trial + 2, bodies)
        succeeded = [r for r in replies if "result" in r]
        # Every loser is told the confirmation was consumed; nothing else, never a 5xx.
        assert all(_rejected(r) for r in replies if "error" in r), replies
        outcomes = {r["result"]["structuredContent"]["outcome"] for r in succeeded}
        assert len(outcomes) == 1, replies
        left, audited, deleted = _committed(cluster, note_id)
        if outcomes == {"deleted"}:
            assert (left, audited, deleted) == (0, 1, 1)
            assert len(succeeded) == CLIENTS // 2  # every identical accept got the record
        else:
            assert outcomes == {"declined"}
            assert len(succeeded) == 1
            assert (left, deleted) == (1, 0)
