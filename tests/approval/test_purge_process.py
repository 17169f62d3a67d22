"""notes_purge against a real `serve --transport http --workers 2`: the page and the rounds may
land on either worker (the pending approval is a database row), and concurrent retries of the
same approved state purge exactly once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.config import Settings
from notes_server.errors import STATE_REJECTED
from tests.approval.purge_support import (
    add_note,
    approve,
    csrf_of,
    form_post,
    open_link,
    purge,
    round_of,
)
from tests.helpers import free_port
from tests.transports.http_support import HttpServer, start_http_server

RETRIES = 6


@pytest.fixture
def server(tmp_path: Path, settings: Settings, migrated_engine: Engine) -> Iterator[HttpServer]:
    # The approval URL names the bound port, so the port is chosen here (not `--port 0`).
    running = start_http_server(tmp_path, settings.db_url, "--port", str(free_port()), workers=2)
    try:
        yield running
    finally:
        running.stop()


def test_concurrent_retries_after_approval_purge_exactly_once(
    server: HttpServer, migrated_engine: Engine, alice: str
) -> None:
    old = [add_note(migrated_engine, f"o{i}.md", f"Old {i}", archived=True) for i in range(4)]
    with (
        httpx.Client(base_url=server.url, timeout=30) as mcp,
        httpx.Client(base_url=server.url, timeout=30) as browser,
    ):
        first = round_of(purge(mcp, alice))
        assert first.url.startswith(server.url + "/approval?")
        assert approve(browser, first.url, alice).status_code == 200
        replies = concurrent_accepts(server.url, alice, first.state)

    done = [r for r in replies if "result" in r]
    refused = [r for r in replies if "error" in r]
    assert len(done) == 1 and len(refused) == RETRIES - 1
    assert sorted(done[0]["result"]["structuredContent"]["purgedIds"]) == sorted(n.id for n in old)
    assert all(r["error"] == {"code": -32602, "message": STATE_REJECTED} for r in refused)
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0
        audited = conn.execute(text("SELECT count(*) FROM audit_log WHERE outcome = 'purged'"))
        assert audited.scalar() == len(old)


def concurrent_accepts(url: str, token: str, state: str) -> list[dict[str, Any]]:
    """RETRIES clients send the same accept at once; returns their parsed replies."""
    gate = threading.Barrier(RETRIES)
    replies: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one() -> None:
        with httpx.Client(base_url=url, timeout=60) as client:
            gate.wait(timeout=30)
            reply = purge(client, token, answer="accept", state=state).json()
        with lock:
            replies.append(reply)

    run_all([threading.Thread(target=one) for _ in range(RETRIES)])
    return replies


def run_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not any(thread.is_alive() for thread in threads)


def test_a_real_servers_page_takes_form_posts_only_from_its_own_origin(
    server: HttpServer, migrated_engine: Engine, alice: str
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    with (
        httpx.Client(base_url=server.url, timeout=30) as mcp,
        httpx.Client(base_url=server.url, timeout=30) as browser,
    ):
        first = round_of(purge(mcp, alice))
        assert open_link(browser, first.url).status_code == 303
        csrf = csrf_of(browser.get("/approval"))
        forged = browser.post(
            "/approval",
            data={"csrf": csrf, "token": alice},
            headers={"Origin": "http://localhost:3000"},
        )
        own = form_post(browser, {"csrf": csrf, "token": alice})

    assert forged.status_code == 403
    assert forged.json()["error"]["message"] == "Forbidden: Origin not allowed"
    assert own.status_code == 303


def test_a_real_server_keeps_a_cancelled_approval_for_a_later_accept(
    server: HttpServer, migrated_engine: Engine, alice: str
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    with (
        httpx.Client(base_url=server.url, timeout=30) as mcp,
        httpx.Client(base_url=server.url, timeout=30) as browser,
    ):
        first = round_of(purge(mcp, alice))
        cancelled = round_of(purge(mcp, alice, answer="cancel", state=first.state)).result
        assert approve(browser, first.url, alice).status_code == 200
        final = round_of(purge(mcp, alice, answer="accept", state=first.state)).result

    assert cancelled["structuredContent"] == {"purged": False, "outcome": "cancelled"}
    assert final["structuredContent"]["purgedIds"] == [old.id]
