"""The official Python SDK client in `legacy` mode over Streamable HTTP, with a bearer token,
against a real `serve --transport http` process: initialize, tools/list, create, search, and a
confirmed delete through its elicitation callback, accepted and declined.

Before 2025-era HTTP sessions this client could not connect at all (400 -32602)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.transports.http_support import start_http_server

NOTES = "file:///home/alice/notes"

mcp_client = pytest.importorskip("mcp.client.client")
mcp_http = pytest.importorskip("mcp.client.streamable_http")
mcp_httpx = pytest.importorskip("mcp.shared._httpx_utils")
mcp_types = pytest.importorskip("mcp.types")


def answer_with(action: str, asked: list[str]) -> Any:
    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        if action != "accept":
            return mcp_types.ElicitResult(action=action)
        choices = params.requested_schema["properties"]["note_id"]["oneOf"]
        content = {"note_id": choices[0]["const"], "confirm": True}
        return mcp_types.ElicitResult(action="accept", content=content)

    return elicit


async def session(url: str, token: str, action: str, asked: list[str]) -> dict[str, Any]:
    http = mcp_httpx.create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        mcp_client.Client(
            mcp_http.streamable_http_client(url, http_client=http),
            mode="legacy",
            elicitation_callback=answer_with(action, asked),
        ) as client,
    ):
        tools = await client.list_tools()
        args = {"workspaceUri": NOTES, "title": f"TPS report {action}"}
        created = await client.call_tool("notes_create", args)
        found = await client.call_tool("notes_search", {"workspaceUri": NOTES})
        deleted = await client.call_tool("notes_delete", args)
        after = await client.call_tool("notes_search", {"workspaceUri": NOTES})
    return {
        "tools": [tool.name for tool in tools.tools],
        "created": created.structured_content,
        "found": found.structured_content,
        "deleted": deleted.structured_content,
        "after": after.structured_content,
    }


@pytest.fixture(params=[1, 2], ids=["one-worker", "two-workers"])
def live(request: pytest.FixtureRequest, tmp_path: Path, migrated_engine: Any, grant: Any) -> Any:
    """A server with one or two worker processes: with two, the session, the question and its
    answer may each be handled by either."""
    grant("alice", NOTES)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    url = str(migrated_engine.url)
    server = start_http_server(tmp_path, url, "--auth", "token", env=env, workers=request.param)
    yield server, token
    server.stop()


def titles(search: dict[str, Any]) -> list[str]:
    return [note["title"] for note in search["notes"]]


def test_the_sdk_client_in_legacy_mode_over_http_deletes_after_the_user_accepts(live: Any) -> None:
    server, token = live
    asked: list[str] = []

    outcome = anyio.run(session, f"{server.url}/mcp", token, "accept", asked)

    assert "notes_delete" in outcome["tools"]
    assert titles(outcome["found"]) == ["TPS report accept"]
    assert len(asked) == 1 and "TPS report accept" in asked[0]
    assert outcome["deleted"]["deleted"] is True
    assert outcome["after"] == {"notes": []}


def test_the_sdk_client_in_legacy_mode_over_http_keeps_the_note_when_the_user_declines(
    live: Any,
) -> None:
    server, token = live
    asked: list[str] = []

    outcome = anyio.run(session, f"{server.url}/mcp", token, "decline", asked)

    assert len(asked) == 1
    assert outcome["deleted"]["deleted"] is False
    assert titles(outcome["after"]) == ["TPS report decline"]
