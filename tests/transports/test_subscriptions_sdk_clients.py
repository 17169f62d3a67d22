"""Real clients hear a change made by another process (issue 24's proof). The change is a
`tools/call notes_update` sent to a second `notes-server serve` process on the same database;
the client is connected to the first:

- the Python SDK `mcp` 2.x: `Client.listen()` (2026-07-28 `subscriptions/listen`) over stdio
  and over Streamable HTTP with a token, and in `legacy` mode `subscribe_resource()`
  (2025-11-25 `resources/subscribe`) with its message handler, over stdio and over Streamable
  HTTP (there the notification comes on the session's GET stream, which the SDK opens itself);
- the TypeScript clients of `scripts/clients` (skipped without them): the v2 client's
  `listen()` (2026-07-28) over stdio and over Streamable HTTP with a token (the listen is the
  SSE response of its POST), and the SDK 1.x's `subscribeResource()` (2025-11-25), over
  stdio."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, select

from notes_server.security.tokens import create_token
from notes_server.store import notes
from notes_server.store.engine import read_tx, write_tx
from notes_server.store.models import legacy_streams_table
from notes_server.store.tokens import SqlTokenRecords
from tests.helpers import ServerProcess
from tests.transports.http_support import HttpServer, start_http_server
from tests.transports.matrix_cells import PACKAGES, node

mcp_client = pytest.importorskip("mcp.client.client")
mcp_stdio = pytest.importorskip("mcp.client.stdio")
mcp_http = pytest.importorskip("mcp.client.streamable_http")
mcp_httpx = pytest.importorskip("mcp.shared._httpx_utils")
mcp_subscriptions = pytest.importorskip("mcp.client.subscriptions")
mcp_types = pytest.importorskip("mcp.types")
mcp_exceptions = pytest.importorskip("mcp.shared.exceptions")

Spawn = Callable[..., ServerProcess]
Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"
URI = f"{NOTES}/plan.md"
NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
TS_CLIENT = Path(__file__).resolve().parent / "ts_subscriptions_client.mjs"
WAIT_S = 30.0  # a safety net only: the notification normally arrives within milliseconds
RUN_TIMEOUT_S = 120


class Change:
    """The other process: a `serve` on the same database, asked to update the note."""

    def __init__(self, engine: Engine, spawn_server: Spawn) -> None:
        with write_tx(engine) as conn:
            self.note = notes.insert_note(
                conn,
                workspace=NOTES,
                path="plan.md",
                title="Plan",
                body="v1",
                now=NOW,
                author=notes.Author("writer", "test"),
            )
        self.writer = spawn_server()
        self.replies: list[Any] = []

    def __call__(self) -> None:
        arguments = {"workspaceUri": NOTES, "noteId": self.note.id, "body": "v2"}
        reply = self.writer.request("tools/call", {"name": "notes_update", "arguments": arguments})
        self.replies.append(reply["result"]["isError"])


@pytest.fixture
def change(migrated_engine: Engine, spawn_server: Spawn, grant: Grant) -> Change:
    grant("alice", NOTES)
    return Change(migrated_engine, spawn_server)


def serve_args(engine: Engine) -> list[str]:
    return ["-m", "notes_server", "serve", "--db", str(engine.url), "--principal", "alice"]


def client_env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_DATA_HOME": str(tmp_path / "xdg"), "PATH": "/usr/bin:/bin"}


def stdio_target(tmp_path: Path, engine: Engine) -> Any:
    return mcp_stdio.StdioServerParameters(
        command=sys.executable, args=serve_args(engine), env=client_env(tmp_path)
    )


@pytest.fixture
def http_server(tmp_path: Path, migrated_engine: Engine) -> Iterator[tuple[HttpServer, str]]:
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    server = start_http_server(tmp_path, str(migrated_engine.url), "--auth", "token")
    yield server, token
    server.stop()


async def listen_for_a_change(stack: AsyncExitStack, target: Any, change: Change) -> Any:
    client = await stack.enter_async_context(mcp_client.Client(target))
    subscription = await stack.enter_async_context(client.listen(resource_subscriptions=[URI]))
    await anyio.to_thread.run_sync(change)
    with anyio.fail_after(WAIT_S):
        event = await subscription.__anext__()
    return client.protocol_version, subscription.honored.resource_subscriptions, event


async def listen_over_stdio(target: Any, change: Change) -> Any:
    async with AsyncExitStack() as stack:
        return await listen_for_a_change(stack, target, change)


async def listen_over_http(server: HttpServer, token: str, change: Change) -> Any:
    async with AsyncExitStack() as stack:
        headers = {"Authorization": f"Bearer {token}"}
        http = await stack.enter_async_context(mcp_httpx.create_mcp_http_client(headers=headers))
        target = mcp_http.streamable_http_client(f"{server.url}/mcp", http_client=http)
        return await listen_for_a_change(stack, target, change)


def wait_for_a_get_stream(engine: Engine) -> None:
    """Until a 2025 session's GET stream is open (claimed in the database): a stream opened
    after the change would start after it (a GET without `Last-Event-ID` starts now)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        with read_tx(engine) as conn:
            claimed = conn.execute(
                select(legacy_streams_table.c.session_hash).where(
                    legacy_streams_table.c.stream_id.is_not(None)
                )
            ).first()
        if claimed is not None:
            return
        assert time.monotonic() < deadline, "the SDK client never opened its GET stream"


async def subscribe_the_2025_way(
    target: Any, change: Change, stream_open: Callable[[], None] | None = None
) -> Any:
    send, receive = anyio.create_memory_object_stream[Any](16)

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ResourceUpdatedNotification):
            await send.send(message)

    async with send, receive:
        client = mcp_client.Client(target, mode="legacy", message_handler=on_message)
        async with client:
            with warnings.catch_warnings():  # removed in 2026-07-28, current in 2025-11-25
                warnings.simplefilter("ignore", mcp_exceptions.MCPDeprecationWarning)
                subscribed = await client.subscribe_resource(URI)
            if stream_open is not None:
                await anyio.to_thread.run_sync(stream_open)
            await anyio.to_thread.run_sync(change)
            with anyio.fail_after(WAIT_S):
                notification = await receive.receive()
            return client.protocol_version, subscribed, notification


async def subscribe_the_2025_way_over_http(
    server: HttpServer, token: str, change: Change, engine: Engine
) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    async with mcp_httpx.create_mcp_http_client(headers=headers) as http:
        target = mcp_http.streamable_http_client(f"{server.url}/mcp", http_client=http)
        return await subscribe_the_2025_way(
            target, change, functools.partial(wait_for_a_get_stream, engine)
        )


def test_the_python_sdk_listens_over_stdio_and_hears_another_process_change(
    tmp_path: Path, migrated_engine: Engine, change: Change
) -> None:
    target = stdio_target(tmp_path, migrated_engine)

    version, honored, event = anyio.run(listen_over_stdio, target, change)

    assert change.replies == [False]
    assert version == "2026-07-28"
    assert honored == [URI]
    assert event == mcp_subscriptions.ResourceUpdated(uri=URI)


def test_the_python_sdk_listens_over_http_and_hears_another_process_change(
    http_server: tuple[HttpServer, str], change: Change
) -> None:
    version, honored, event = anyio.run(listen_over_http, *http_server, change)

    assert change.replies == [False]
    assert version == "2026-07-28"
    assert honored == [URI]
    assert event == mcp_subscriptions.ResourceUpdated(uri=URI)


def test_the_python_sdk_subscribes_the_2025_way_and_hears_another_process_change(
    tmp_path: Path, migrated_engine: Engine, change: Change
) -> None:
    target = stdio_target(tmp_path, migrated_engine)

    version, subscribed, notification = anyio.run(subscribe_the_2025_way, target, change)

    assert change.replies == [False]
    assert version == "2025-11-25"
    assert subscribed.model_dump(exclude_none=True) == {}
    assert str(notification.params.uri) == URI


def test_the_python_sdk_subscribes_the_2025_way_over_http_and_hears_it_on_the_get_stream(
    http_server: tuple[HttpServer, str], change: Change, migrated_engine: Engine
) -> None:
    version, subscribed, notification = anyio.run(
        subscribe_the_2025_way_over_http, *http_server, change, migrated_engine
    )

    assert change.replies == [False]
    assert version == "2025-11-25"
    assert subscribed.model_dump(exclude_none=True) == {}
    assert str(notification.params.uri) == URI


TS_MISSING = node() is None or not (PACKAGES / "sdk").exists() or not (PACKAGES / "client").exists()
needs_ts = pytest.mark.skipif(
    TS_MISSING, reason="TypeScript clients not installed: run scripts/clients (needs npm)"
)


def run_ts_client(config: dict[str, Any], change: Change) -> tuple[str, dict[str, Any]]:
    """Run ts_subscriptions_client.mjs; make the change once it says it is subscribed. Its
    ready line and what it saw."""
    executable = node()
    assert executable is not None
    client = subprocess.Popen(
        [executable, str(TS_CLIENT), json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None
        ready = client.stdout.readline()
        if ready.strip() == '{"ready":true}':
            change()
        out, err = client.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()

    assert ready.strip() == '{"ready":true}', err
    assert client.returncode == 0, err
    seen: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return ready, seen


@needs_ts
@pytest.mark.parametrize(("flavor", "version"), [("v2", "2026-07-28"), ("sdk1", "2025-11-25")])
def test_a_typescript_client_hears_another_process_change_over_stdio(
    tmp_path: Path, migrated_engine: Engine, change: Change, flavor: str, version: str
) -> None:
    config = {
        "flavor": flavor,
        "packageDir": str(PACKAGES / ("sdk" if flavor == "sdk1" else "client")),
        "command": sys.executable,
        "args": serve_args(migrated_engine),
        "env": client_env(tmp_path),
        "uri": URI,
    }

    _, seen = run_ts_client(config, change)

    assert change.replies == [False]
    assert seen == {
        "version": version,
        "honored": {"resourceSubscriptions": [URI]} if flavor == "v2" else None,
        "method": "notifications/resources/updated",
        "uri": URI,
    }


@needs_ts
def test_the_typescript_v2_client_listens_over_http_and_hears_another_process_change(
    http_server: tuple[HttpServer, str], change: Change
) -> None:
    server, token = http_server
    config = {
        "flavor": "v2",
        "packageDir": str(PACKAGES / "client"),
        "url": f"{server.url}/mcp",
        "token": token,
        "uri": URI,
    }

    _, seen = run_ts_client(config, change)

    assert change.replies == [False]
    assert seen == {
        "version": "2026-07-28",
        "honored": {"resourceSubscriptions": [URI]},
        "method": "notifications/resources/updated",
        "uri": URI,
    }
