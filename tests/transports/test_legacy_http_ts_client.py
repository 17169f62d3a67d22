"""The TypeScript SDK 1.x (2025-11-25 only; installed by `scripts/clients`) as a host over
Streamable HTTP with a bearer token, against a real `serve --transport http` process: connect,
list tools, create, search, and a delete confirmed through its elicitation handler, accepted
once and declined once. Before 2025-era HTTP sessions it could not connect (400 -32602)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.transports.http_support import HttpServer, start_http_server

HERE = Path(__file__).resolve().parent
SDK = HERE.parent.parent / ".clients" / "node_modules" / "@modelcontextprotocol" / "sdk"
CLIENT = HERE / "ts_legacy_client.mjs"
NOTES = "file:///home/alice/notes"
RUN_TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(
    not (SDK / "package.json").exists() or shutil.which("node") is None,
    reason="TypeScript SDK not installed: run scripts/clients (needs npm; Node >= 22.19)",
)


@pytest.fixture
def live(tmp_path: Path, migrated_engine: Engine, grant: Any) -> Iterator[tuple[HttpServer, str]]:
    grant("alice", NOTES)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    server = start_http_server(tmp_path, str(migrated_engine.url), "--auth", "token", env=env)
    yield server, token
    server.stop()


def test_the_typescript_sdk_connects_over_http_and_confirms_through_elicitation(
    live: tuple[HttpServer, str],
) -> None:
    server, token = live
    node = shutil.which("node")
    assert node is not None

    done = subprocess.run(
        [node, str(CLIENT), str(SDK), f"{server.url}/mcp", token, NOTES],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["version"] == "2025-11-25"
    assert "notes_delete" in seen["tools"]
    assert sorted(seen["found"]) == ["Accept me", "Decline me"]
    assert seen["asked"] == 2
    assert seen["accepted"] is True
    assert seen["declined"] is False
    assert seen["after"] == ["Decline me"]
