"""Roots with a real client: the Python SDK `mcp` 2.x in `legacy` mode with a roots callback,
over stdio and over Streamable HTTP with a token. Its roots narrow what it may touch, a call
without workspaceUri lands in the one granted workspace among them, and after it announces new
roots (`notifications/roots/list_changed`) the server asks again and the new ones apply."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine

from notes_server.errors import WORKSPACE_DENIED
from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.transports.http_support import HttpServer, start_http_server

NOTES = "file:///home/alice/notes"
SHARED = "file:///srv/shared"

mcp_client = pytest.importorskip("mcp.client.client")
mcp_stdio = pytest.importorskip("mcp.client.stdio")
mcp_http = pytest.importorskip("mcp.client.streamable_http")
mcp_httpx = pytest.importorskip("mcp.shared._httpx_utils")
mcp_types = pytest.importorskip("mcp.types")
mcp_exceptions = pytest.importorskip("mcp.shared.exceptions")


@pytest.fixture
def live(
    tmp_path: Path, migrated_engine: Engine, grant: Any
) -> Iterator[tuple[HttpServer, str, dict[str, str], str]]:
    grant("alice", NOTES)
    grant("alice", SHARED)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    keys = KeyRing.generate_spec()
    url = str(migrated_engine.url)
    server = start_http_server(
        tmp_path, url, "--auth", "token", env={"NOTES_SERVER_STATE_KEYS": keys}
    )
    env = {
        "NOTES_SERVER_STATE_KEYS": keys,
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "PATH": "/usr/bin:/bin",
    }
    yield server, token, env, url
    server.stop()


async def scenario(transport: str, live: tuple[HttpServer, str, dict[str, str], str]) -> Any:
    server, token, env, db_url = live
    roots = [NOTES]

    async def list_roots(context: Any) -> Any:
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=uri) for uri in roots])

    async with AsyncExitStack() as stack:
        if transport == "http":
            headers = {"Authorization": f"Bearer {token}"}
            http = await stack.enter_async_context(
                mcp_httpx.create_mcp_http_client(headers=headers)
            )
            target: Any = mcp_http.streamable_http_client(f"{server.url}/mcp", http_client=http)
        else:
            args = ["-m", "notes_server", "serve", "--db", db_url, "--principal", "alice"]
            target = mcp_stdio.StdioServerParameters(command=sys.executable, args=args, env=env)
        client = await stack.enter_async_context(
            mcp_client.Client(target, mode="legacy", list_roots_callback=list_roots)
        )
        defaulted = await client.call_tool("notes_create", {"title": f"first {transport}"})
        try:
            await client.call_tool("notes_create", {"workspaceUri": SHARED, "title": "outside"})
            outside = "created"
        except mcp_exceptions.MCPError as exc:
            outside = str(exc)
        roots[:] = [SHARED]
        with warnings.catch_warnings():  # roots are deprecated in 2026-07-28, not in 2025
            warnings.simplefilter("ignore", mcp_exceptions.MCPDeprecationWarning)
            await client.send_roots_list_changed()
        moved = await client.call_tool("notes_create", {"title": f"second {transport}"})
    return defaulted, outside, moved


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_sdk_clients_roots_narrow_default_and_change(transport: str, live: Any) -> None:
    defaulted, outside, moved = anyio.run(scenario, transport, live)

    assert defaulted.structured_content["note"]["uri"].startswith(NOTES + "/")
    assert outside.startswith(WORKSPACE_DENIED + "; ")
    assert moved.structured_content["note"]["uri"].startswith(SHARED + "/")
