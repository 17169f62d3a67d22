"""Hybrid notes_search over Streamable HTTP (2026-07-28), with the index built by
`notes-server index` as its own process. Needs the `semantic` extra."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from notes_server.store import embedding, grants, migrate, notes
from notes_server.store.engine import make_engine, write_tx
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
