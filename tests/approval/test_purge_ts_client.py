"""The TypeScript SDK 1.x (2025-11-25 only; installed by `scripts/clients`) as a host over
Streamable HTTP declaring URL-mode elicitation, against a real `serve --transport http`: its
elicitation handler gets the 2025-11-25 URL shape and accepts; the test then completes the
approval page with a real HTTP client; the SDK receives `notifications/elicitation/complete`
for that elicitation and the purge result."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from tests.approval.purge_support import WS, add_note, approve
from tests.helpers import free_port
from tests.transports.http_support import HttpServer, start_http_server

HERE = Path(__file__).resolve().parent
SDK = HERE.parent.parent / ".clients" / "node_modules" / "@modelcontextprotocol" / "sdk"
CLIENT = HERE / "ts_purge_client.mjs"
RUN_TIMEOUT_S = 120  # a safety net against a hung child, not a timing assertion

pytestmark = pytest.mark.skipif(
    not (SDK / "package.json").exists() or shutil.which("node") is None,
    reason="TypeScript SDK not installed: run scripts/clients (needs npm; Node >= 22.19)",
)


@pytest.fixture
def server(tmp_path: Path, settings: Any, migrated_engine: Engine) -> Iterator[HttpServer]:
    running = start_http_server(tmp_path, settings.db_url, "--port", str(free_port()))
    yield running
    running.stop()


def test_the_typescript_sdk_accepts_the_url_gets_complete_and_the_purge(
    server: HttpServer, migrated_engine: Engine, alice: str
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    node = shutil.which("node")
    assert node is not None
    host = subprocess.Popen(
        [node, str(CLIENT), str(SDK), f"{server.url}/mcp", alice, WS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stderr is not None
        line = host.stderr.readline()  # blocks until the SDK's handler saw the URL
        assert line.startswith("OPEN "), line
        with httpx.Client(base_url=server.url, timeout=30) as browser:
            approved = approve(browser, line[5:].strip(), alice)
        out, err = host.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()

    assert approved.status_code == 200
    assert host.returncode == 0, err
    seen = json.loads(out)
    assert seen["version"] == "2025-11-25"
    (params,) = seen["asked"]
    assert params["mode"] == "url" and params["url"].startswith(server.url + "/approval?a=pa-")
    assert seen["completed"] == [params["elicitationId"]]
    assert seen["purged"]["isError"] is False
    assert seen["purged"]["structuredContent"]["purgedIds"] == [old.id]
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0
