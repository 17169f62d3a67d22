"""`serve --transport http --port 0` (no `--public-url`) serves notes_purge: the server binds
before it composes anything, so the approval URL names the port it actually listens on, in
every worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.config import Settings
from tests.approval.purge_support import add_note, approve, purge, round_of
from tests.transports.http_support import HttpServer, rpc, start_http_server


@pytest.fixture
def server(tmp_path: Path, settings: Settings, migrated_engine: Engine) -> Iterator[HttpServer]:
    running = start_http_server(tmp_path, settings.db_url, workers=2)  # --port 0
    try:
        yield running
    finally:
        running.stop()


def test_port_zero_lists_notes_purge(server: HttpServer, alice: str) -> None:
    body, headers = rpc("tools/list")
    headers["Authorization"] = f"Bearer {alice}"

    reply = httpx.post(f"{server.url}/mcp", content=body, headers=headers, timeout=30)

    assert reply.status_code == 200
    assert "notes_purge" in {tool["name"] for tool in reply.json()["result"]["tools"]}


def test_port_zero_approval_url_names_the_bound_port_and_the_purge_completes(
    server: HttpServer, migrated_engine: Engine, alice: str
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    with (
        httpx.Client(base_url=server.url, timeout=30) as mcp,
        httpx.Client(base_url=server.url, timeout=30) as browser,
    ):
        first = round_of(purge(mcp, alice))
        assert first.url.startswith(f"http://127.0.0.1:{server.port}/approval?a=pa-")
        assert approve(browser, first.url, alice).status_code == 200
        done = purge(mcp, alice, answer="accept", state=first.state).json()

    assert done["result"]["structuredContent"]["purgedIds"] == [old.id]
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0
