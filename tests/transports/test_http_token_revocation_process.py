"""A real `serve --transport http` remembers accepted tokens (`security.token_cache`), yet a
token revoked by `notes-server token revoke`, another process, is refused on its next request."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from sqlalchemy import Engine

from notes_server.config import Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.helpers import subprocess_env
from tests.transports.http_support import rpc, start_http_server


def whoami_status(url: str, token: str) -> int:
    body, headers = rpc("server/discover")
    headers["Authorization"] = f"Bearer {token}"
    return httpx.post(f"{url}/mcp", content=body, headers=headers, timeout=30).status_code


def test_a_token_revoked_from_the_cli_gets_401_on_its_next_request(
    tmp_path: Path, settings: Settings, migrated_engine: Engine
) -> None:
    token_id, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    server = start_http_server(tmp_path, settings.db_url)
    try:
        accepted = [whoami_status(server.url, token) for _ in range(3)]  # now remembered
        revoke = [sys.executable, "-m", "notes_server", "token", "revoke", str(token_id)]
        subprocess.run(
            [*revoke, "--db", settings.db_url],
            check=True,
            capture_output=True,
            env=subprocess_env(tmp_path),
        )

        after = whoami_status(server.url, token)
    finally:
        server.stop()

    assert accepted == [200, 200, 200]
    assert after == 401
