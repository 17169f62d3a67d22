"""Two `serve --auth oauth` instances on one database (PostgreSQL in the PostgreSQL run) with
the same public URL: every step of one flow goes to the other instance than the step before,
and both accept the tokens, the refresh and the revocation."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.helpers import free_port
from tests.oauth.oauth_support import WS_A, csrf_of, pkce, query_of, set_password
from tests.transports.http_support import SHARED_STATE_KEYS, start_http_server


@pytest.fixture
def instances(tmp_path: Path, migrated_engine: Any, grant: Any) -> Any:
    grant("alice", WS_A)
    set_password(migrated_engine, "alice", "alice-password-1")
    public = f"http://127.0.0.1:{free_port()}"
    env = {"NOTES_SERVER_STATE_KEYS": SHARED_STATE_KEYS}
    servers = [
        start_http_server(
            tmp_path, str(migrated_engine.url), "--auth", "oauth", "--public-url", public, env=env
        )
        for _ in range(2)
    ]
    yield public, [server.url for server in servers]
    for server in servers:
        server.stop()


def mcp_status(base: str, token: str) -> int:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "notes_search",
            "arguments": {"workspaceUri": WS_A},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "notes_search",
    }
    answer = httpx.post(base + "/mcp", json=body, headers=headers, timeout=30)
    assert answer.status_code != 200 or "error" not in answer.json(), answer.text
    return answer.status_code


def test_any_instance_finishes_a_flow_another_began(instances: Any) -> None:
    public, (a, b) = instances
    redirect = "http://127.0.0.1/callback"
    verifier, challenge = pkce()
    # Cookies do not depend on the port: one browser jar serves both instances.
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        registered = browser.post(
            a + "/oauth/register",
            json={"redirect_uris": [redirect], "token_endpoint_auth_method": "none"},
        ).json()
        client_id = registered["client_id"]
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "xyz",
        }
        assert browser.get(b + "/oauth/authorize?" + urlencode(params)).status_code == 303
        form = browser.get(a + "/oauth/sign-in")
        signed = browser.post(
            b + "/oauth/sign-in",
            data={"csrf": csrf_of(form.text), "principal": "alice", "password": "alice-password-1"},
        )
        assert signed.status_code == 303, signed.text
        consent = browser.get(a + "/oauth/consent")
        allowed = browser.post(
            b + "/oauth/consent",
            data={"csrf": csrf_of(consent.text), "decision": "allow", "workspace": WS_A},
        )
        answer = query_of(allowed.headers["location"])
        assert (answer["state"], answer["iss"]) == ("xyz", public)
        tokens = browser.post(
            a + "/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": answer["code"],
                "client_id": client_id,
                "redirect_uri": redirect,
                "code_verifier": verifier,
            },
        ).json()
        assert mcp_status(a, tokens["access_token"]) == 200
        assert mcp_status(b, tokens["access_token"]) == 200
        rotated = browser.post(
            b + "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": tokens["refresh_token"],
                "client_id": client_id,
            },
        ).json()
        reused = browser.post(
            a + "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": tokens["refresh_token"],
                "client_id": client_id,
            },
        )
        assert reused.json()["error"] == "invalid_grant"
        # The reuse on instance A revoked the family: instance B refuses the rotated token.
        assert mcp_status(b, rotated["access_token"]) == 401
