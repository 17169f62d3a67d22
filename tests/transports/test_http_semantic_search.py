"""Hybrid notes_search over Streamable HTTP (2026-07-28), with the index built by
`notes-server index` as its own process. Needs the `semantic` extra."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from notes_server.config import Settings
from notes_server.store import embedding, grants, migrate, notes, semantic
from notes_server.store.engine import make_engine, read_tx, write_tx
from tests.helpers import subprocess_env
from tests.transports.http_support import rpc, start_http_server

pytestmark = pytest.mark.skipif(not embedding.installed(), reason="needs the semantic extra")
WS = "file:///home/alice/notes"
NOW = datetime(2026, 3, 1, tzinfo=UTC)


def test_hybrid_search_over_http_after_the_index_command(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/notes.db"
    engine = make_engine(url)
    migrate.upgrade(engine)
    with write_tx(engine) as conn:
        grants.upsert(conn, "alice", WS, "write", NOW)
        for title, body in [("Finance sync", "# Q3\n\nQ3 spend review"), ("Pie", "apple pie")]:
            notes.insert_note(
                conn, workspace=WS, path=f"{title}.md", title=title, body=body, now=NOW
            )
    engine.dispose()
    env = subprocess_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "notes_server", "index", "--db", url],
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status = subprocess.run(
        [sys.executable, "-m", "notes_server", "index", "status", "--db", url],
        env=env, capture_output=True, timeout=60, text=True,
    )  # fmt: skip
    assert "pending\t0" in status.stdout and "embedded notes\t2" in status.stdout
    server = start_http_server(tmp_path, url, "--auth", "none", "--principal", "alice")
    try:
        body, headers = rpc(
            "tools/call",
            {"name": "notes_search", "arguments": {"workspaceUri": WS, "query": "budget spending"}},
        )
        response = httpx.post(f"{server.url}/mcp", content=body, headers=headers, timeout=60)
    finally:
        server.stop()
    assert response.status_code == 200
    hits = response.json()["result"]["structuredContent"]["notes"]
    assert hits[0]["title"] == "Finance sync"
    assert hits[0]["matchedBy"] == ["semantic"] and hits[0]["section"] == "Q3"


def _create(server_url: str, title: str, body: str) -> None:
    payload, headers = rpc(
        "tools/call",
        {
            "name": "notes_create",
            "arguments": {"workspaceUri": WS, "title": title, "body": body},
        },
    )
    response = httpx.post(f"{server_url}/mcp", content=payload, headers=headers, timeout=60)
    assert response.status_code == 200
    assert "error" not in response.json() and not response.json()["result"].get("isError")


def _wait_embedded(engine: Engine, count: int, deadline_s: float = 90.0) -> semantic.Status:
    """The index status once `count` notes are embedded and nothing is pending; fails at the
    deadline. The servers of these tests poll for other processes' writes once an hour, so
    only the write signal of the process that took the write can have woken its indexer."""
    ends = time.monotonic() + deadline_s
    while True:
        with read_tx(engine) as conn:
            status = semantic.status(conn)
        if status.embedded_notes >= count and status.pending == 0:
            return status
        assert time.monotonic() < ends, f"not embedded in {deadline_s} s: {status}"
        threading.Event().wait(0.05)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_note_written_over_http_is_embedded_by_the_serving_indexer(
    tmp_path: Path, settings: Settings, migrated_engine: Engine, workers: int
) -> None:
    with write_tx(migrated_engine) as conn:
        grants.upsert(conn, "alice", WS, "write", NOW)
    server = start_http_server(
        tmp_path, settings.db_url, "--auth", "none", "--principal", "alice",
        env={"NOTES_SERVER_INDEX_POLL": "3600"}, workers=workers,
    )  # fmt: skip
    try:
        for i in range(6):
            _create(server.url, f"Finance sync {i}", f"# Q3\n\nQ3 spend review number {i}")
        status = _wait_embedded(migrated_engine, 6)
        payload, headers = rpc(
            "tools/call",
            {
                "name": "notes_search",
                "arguments": {"workspaceUri": WS, "query": "budget spending", "mode": "semantic"},
            },
        )
        response = httpx.post(f"{server.url}/mcp", content=payload, headers=headers, timeout=60)
    finally:
        server.stop()
    # One passage per note: no note was embedded twice over (its passages would be kept once
    # anyway, but a second worker's store would have found its outbox row gone).
    assert status.passages == 6
    hits = response.json()["result"]["structuredContent"]["notes"]
    assert hits and all(h["matchedBy"] == ["semantic"] for h in hits)
    assert {h["title"] for h in hits} <= {f"Finance sync {i}" for i in range(6)}
    log = server.stderr_text()
    assert log.count("Application shutdown complete") == workers, log
    assert "Traceback" not in log and "semantic indexer" not in log, log
