"""The official Python SDK client (2025-11-25 handshake, which declares form and URL
elicitation) purges through a real stdio server: its elicitation callback gets the URL-mode
request, answers `accept` while "the person" completes the page on another thread (a real
HTTP client, with the code from the server's stderr), and the SDK surfaces
`notifications/elicitation/complete` for that elicitation before the call returns."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, text

from notes_server.security.keyring import KeyRing
from tests.approval.purge_support import WS, add_note, approve_with_code
from tests.helpers import default_db_url, subprocess_env

mcp_stdio = pytest.importorskip("mcp.client.stdio")
mcp_session = pytest.importorskip("mcp.client.session")
mcp_types = pytest.importorskip("mcp.types")


class ServerStderr:
    def __init__(self, path: Path) -> None:
        self.path = path

    def stderr_text(self) -> str:
        return self.path.read_text(encoding="utf-8", errors="replace")


async def drive(tmp_path: Path, seen: dict[str, Any]) -> Any:
    errlog_path = tmp_path / "sdk-server-stderr.log"
    page_done: list[int] = []

    def person_on_the_page(url: str) -> None:
        page_done.append(approve_with_code(ServerStderr(errlog_path), url).status_code)

    async def open_in_browser(context: Any, params: Any) -> Any:
        seen["mode"], seen["url"] = params.mode, params.url
        seen["elicitation_id"] = params.elicitation_id
        worker = threading.Thread(target=person_on_the_page, args=(params.url,), daemon=True)
        seen["worker"] = worker
        worker.start()
        return mcp_types.ElicitResult(action="accept")

    async def notifications(message: Any) -> None:
        params = getattr(message, "params", None)
        if params is not None and hasattr(params, "elicitation_id"):
            seen.setdefault("completed", []).append(params.elicitation_id)

    server = mcp_stdio.StdioServerParameters(
        command=sys.executable,
        args=["-m", "notes_server", "serve", "--db", default_db_url(tmp_path)],
        env=subprocess_env(
            tmp_path,
            {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec(), "NOTES_SERVER_PRINCIPAL": "alice"},
        ),
        cwd=tmp_path,
    )
    with errlog_path.open("w") as errlog:
        async with (
            mcp_stdio.stdio_client(server, errlog=errlog) as (read, write),
            mcp_session.ClientSession(
                read, write, elicitation_callback=open_in_browser, message_handler=notifications
            ) as session,
        ):
            await session.initialize()
            purged = await session.call_tool("notes_purge", {"workspaceUri": WS})
    seen["worker"].join(timeout=30)
    seen["page"] = page_done
    return purged


def test_the_sdk_client_purges_after_the_page_and_sees_elicitation_complete(
    tmp_path: Path, grant: Any, migrated_engine: Engine
) -> None:
    grant("alice", WS)
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    seen: dict[str, Any] = {}

    purged = anyio.run(drive, tmp_path, seen)

    assert seen["mode"] == "url" and "/approval?a=pa-" in seen["url"]
    assert seen["page"] == [200]
    assert seen["completed"] == [seen["elicitation_id"]]
    assert purged.is_error is False
    assert purged.structured_content["purgedIds"] == [old.id]
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0
