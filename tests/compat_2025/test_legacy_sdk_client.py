"""The official Python SDK client, forced into the 2025-11-25 handshake, drives a real server:
initialize, ping, tools/list and a confirmed delete through its elicitation callback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from notes_server.security.keyring import KeyRing
from tests.compat_2025.legacy_support import NOTES
from tests.helpers import default_db_url, subprocess_env

mcp_stdio = pytest.importorskip("mcp.client.stdio")
mcp_session = pytest.importorskip("mcp.client.session")
mcp_types = pytest.importorskip("mcp.types")


async def drive(tmp_path: Path, asked: list[str]) -> dict[str, Any]:
    async def confirm_first_choice(context: Any, params: Any) -> Any:
        asked.append(params.message)
        choices = params.requested_schema["properties"]["note_id"]["oneOf"]
        content = {"note_id": choices[0]["const"], "confirm": True}
        return mcp_types.ElicitResult(action="accept", content=content)

    server = mcp_stdio.StdioServerParameters(
        command=sys.executable,
        args=["-m", "notes_server", "serve", "--db", default_db_url(tmp_path)],
        env=subprocess_env(
            tmp_path,
            {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec(), "NOTES_SERVER_PRINCIPAL": "alice"},
        ),
        cwd=tmp_path,
    )
    with (tmp_path / "sdk-server-stderr.log").open("w") as errlog:
        async with (
            mcp_stdio.stdio_client(server, errlog=errlog) as (read, write),
            mcp_session.ClientSession(
                read, write, elicitation_callback=confirm_first_choice
            ) as session,
        ):
            initialized = await session.initialize()
            await session.send_ping()
            tools = await session.list_tools()
            args = {"workspaceUri": NOTES, "title": "TPS report"}
            await session.call_tool("notes_create", args)
            deleted = await session.call_tool("notes_delete", args)
            found = await session.call_tool("notes_search", {"workspaceUri": NOTES})
    return {
        "version": initialized.protocol_version,
        "tools": [tool.name for tool in tools.tools],
        "deleted": deleted.structured_content,
        "found": found.structured_content,
    }


def test_the_sdk_client_in_legacy_mode_confirms_a_delete_through_elicitation(
    tmp_path: Path, grant: Any
) -> None:
    grant("alice", NOTES)
    asked: list[str] = []

    outcome = anyio.run(drive, tmp_path, asked)

    assert outcome["version"] == "2025-11-25"
    assert "notes_delete" in outcome["tools"]
    assert len(asked) == 1 and "TPS report" in asked[0]
    assert outcome["deleted"]["deleted"] is True
    assert outcome["found"] == {"notes": []}
