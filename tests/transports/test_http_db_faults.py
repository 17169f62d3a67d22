"""HTTP in front of a database that cannot be written: reads go on, nothing is plain text.

In process through the ASGI app, on real faults (tests/db_faults.py): a read-only database file
and a full disk. Authenticating records the token's use (`last_used_at`); that write failing
must not fail the request, and is logged once. A failure during authentication that cannot be
shrugged off (a garbage file, an authenticator bug) is a JSON-RPC -32603 with status 500.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app, create_server
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.security.uri import canonical_workspace
from notes_server.store import grants, migrate
from notes_server.store.engine import make_engine, write_tx
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services, utc_now
from notes_server.transports.http.app import build_http_app
from tests.db_faults import fill, read_only, small_disk, write_garbage
from tests.transports.http_support import LOOPBACK_URL, rpc

NOTES = "file:///home/alice/notes"
INTERNAL_ERROR = -32603
TOUCH_WARNING = "cannot record token use"


def prepare(settings: Settings, count: int) -> list[str]:
    """Migrate, grant alice NOTES, and mint `count` never-used tokens for alice."""
    engine = make_engine(settings.db_url)
    try:
        migrate.upgrade(engine)
        with write_tx(engine) as conn:
            grants.upsert(conn, "alice", canonical_workspace(NOTES), "write", utc_now())
        return [create_token(SqlTokenRecords(engine), "alice")[1] for _ in range(count)]
    finally:
        engine.dispose()


def client_for(settings: Settings, services: Services | None = None) -> TestClient:
    app = create_http_app(settings, HttpSettings(), services)
    return TestClient(app, base_url=LOOPBACK_URL, raise_server_exceptions=False)


def post(client: TestClient, token: str, method: str, params: Any = None) -> httpx.Response:
    body, headers = rpc(method, params)
    return client.post(
        "/mcp", content=body, headers={**headers, "Authorization": f"Bearer {token}"}
    )


def create_note(client: TestClient, token: str) -> httpx.Response:
    arguments = {"workspaceUri": NOTES, "title": "Refused", "body": "x" * 8192}
    return post(client, token, "tools/call", {"name": "notes_create", "arguments": arguments})


def search(client: TestClient, token: str) -> httpx.Response:
    arguments = {"workspaceUri": NOTES}
    return post(client, token, "tools/call", {"name": "notes_search", "arguments": arguments})


def assert_served(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    reply: dict[str, Any] = response.json()
    assert "result" in reply, reply
    return reply


def assert_tool_fault(response: httpx.Response, cause: str) -> None:
    assert response.status_code == 200  # a handler error is an ordinary JSON-RPC error
    error = response.json()["error"]
    assert error == {"code": INTERNAL_ERROR, "message": f"Internal error: {cause}"}


def touch_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(TOUCH_WARNING)]


def test_a_read_only_database_still_authenticates_and_serves_reads(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = prepare(settings, 2)
    caplog.set_level(logging.WARNING)
    with read_only(tmp_path / "notes.db"), client_for(settings) as client:
        tools = assert_served(post(client, first, "tools/list"))
        assert assert_served(search(client, second))["result"]["structuredContent"]["notes"] == []
        assert_tool_fault(create_note(client, first), "the database is read-only")

    assert "notes_search" in {tool["name"] for tool in tools["result"]["tools"]}
    assert touch_warnings(caplog) == [
        "cannot record token use (the database is read-only); requests go on"
    ]


def test_a_full_disk_still_authenticates_and_serves_reads(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        settings = dataclasses.replace(settings, db_url=f"sqlite:///{disk / 'notes.db'}")
        (token,) = prepare(settings, 1)
        # An open reader keeps the WAL and its index in place: the server reads while the disk
        # is full, and only growing the WAL (a write) needs a block that is no longer there.
        with closing(sqlite3.connect(disk / "notes.db")) as reader:
            reader.execute("SELECT count(*) FROM alembic_version").fetchall()
            fill(disk)
            caplog.set_level(logging.WARNING)
            with client_for(settings) as client:
                assert_served(post(client, token, "tools/list"))
                assert_served(search(client, token))
                assert_tool_fault(create_note(client, token), "the disk is full")

    assert touch_warnings(caplog) == ["cannot record token use (the disk is full); requests go on"]


def test_a_database_fault_during_authentication_is_a_json_rpc_500(
    settings: Settings, tmp_path: Path
) -> None:
    write_garbage(tmp_path / "notes.db")
    with client_for(settings) as client:
        response = post(client, "nst_" + "A" * 43, "tools/list")

    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error: the file is not a database"},
    }
    assert str(tmp_path) not in response.text


class BrokenAuthenticator:
    requires_credentials = True

    def principal_for(self, authorization: Sequence[str]) -> str | None:
        raise RuntimeError("an authenticator bug with a /secret/path in its message")


def test_any_unexpected_error_during_http_handling_is_a_json_rpc_500_without_details(
    settings: Settings,
) -> None:
    server = create_server(settings, Services(settings))
    app = build_http_app(server, BrokenAuthenticator(), HttpSettings())
    with TestClient(app, base_url=LOOPBACK_URL, raise_server_exceptions=False) as client:
        response = post(client, "nst_" + "A" * 43, "tools/list")

    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INTERNAL_ERROR, "message": "Internal error"},
    }
