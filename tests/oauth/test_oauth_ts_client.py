"""The TypeScript SDK 1.x's OAuth support against a real `serve --auth oauth`: discovery,
dynamic registration, the browser step (the Python test is the person), token exchange, tool
calls including a confirmed delete, a refresh after a 401, and a revocation after which `/mcp`
answers 401 with the RFC 9728 challenge. Needs `scripts/clients`; skipped without it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import free_port
from tests.oauth.oauth_support import WS_A, WS_B, MetadataDocumentHost, csrf_of, set_password
from tests.transports.http_support import start_http_server

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / ".clients" / "node_modules" / "@modelcontextprotocol" / "sdk"
CLIENT = Path(__file__).resolve().parent / "ts_oauth_client.mjs"
REDIRECT = "http://127.0.0.1:41999/callback"

pytestmark = pytest.mark.skipif(
    not (SDK / "package.json").exists() or shutil.which("node") is None,
    reason="TypeScript SDK not installed: run scripts/clients (needs npm; Node >= 22.19)",
)


def person(authorize_url: str, base: str) -> str:
    """Sign in as alice, tick workspace A, allow; the redirect URL with the code."""
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        assert browser.get(authorize_url).status_code == 303
        form = browser.get(base + "/oauth/sign-in")
        browser.post(
            base + "/oauth/sign-in",
            data={"csrf": csrf_of(form.text), "principal": "alice", "password": "alice-password-1"},
        )
        consent = browser.get(base + "/oauth/consent")
        assert "TS SDK test host" in consent.text
        allowed = browser.post(
            base + "/oauth/consent",
            data={"csrf": csrf_of(consent.text), "decision": "allow", "workspace": WS_A},
        )
        assert allowed.status_code == 302, allowed.text
        return str(allowed.headers["location"])


def metadata_document(url: str) -> dict[str, Any]:
    return {
        "client_id": url,
        "client_name": "TS SDK test host",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


@pytest.mark.parametrize("identified_by", ["registration", "metadata-document"])
def test_the_typescript_sdk_signs_in_consents_calls_refreshes_and_is_revoked(
    tmp_path: Path, migrated_engine: Any, grant: Any, identified_by: str
) -> None:
    """Dynamic registration, or (no registration) a Client ID Metadata Document over https on
    loopback that the server fetches with development addresses allowed."""
    grant("alice", WS_A)
    grant("alice", WS_B)
    set_password(migrated_engine, "alice", "alice-password-1")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    document_host, extra, env, metadata_url = None, [], {}, []
    if identified_by == "metadata-document":
        document_host = MetadataDocumentHost(tmp_path, metadata_document)
        extra = ["--oauth-dev-addresses"]
        env = {"SSL_CERT_FILE": str(document_host.cert_file)}
        metadata_url = [document_host.url]
    server = start_http_server(
        tmp_path,
        str(migrated_engine.url),
        "--auth",
        "oauth",
        "--port",
        str(port),
        "--public-url",
        base,
        *extra,
        env=env,
        workers=2,
    )
    node = shutil.which("node")
    assert node is not None
    try:
        host = subprocess.Popen(
            [node, str(CLIENT), str(SDK), base + "/mcp", REDIRECT, WS_A, WS_B, *metadata_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert host.stdin is not None and host.stderr is not None
        for line in host.stderr:
            if line.startswith("OPEN "):
                host.stdin.write(person(line[5:].strip(), base) + "\n")
                host.stdin.flush()
                break
        out, err = host.communicate(timeout=120)
        assert host.returncode == 0, err[-4000:]
        report = json.loads(out)
        with httpx.Client(base_url=base, timeout=30) as http:
            for token in (report["tokens"]["refresh_token"], report["tokens"]["access_token"]):
                revoked = http.post(
                    "/oauth/revoke", data={"token": token, "client_id": report["clientId"]}
                )
                assert revoked.status_code == 200
            answer = http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
                headers={
                    "Authorization": f"Bearer {report['tokens']['access_token']}",
                    "Accept": "application/json, text/event-stream",
                },
            )
    finally:
        server.stop()
        if document_host is not None:
            document_host.close()

    if document_host is not None:
        assert report["clientId"] == document_host.url  # not registered: the URL is the id
        assert document_host.hits >= 1  # the server fetched it
    else:
        assert "://" not in report["clientId"]  # an id the registration issued
    assert report["unauthorizedFirst"] is True  # 401 first: that is how the SDK discovers
    assert "notes_delete" in report["tools"]
    assert report["deleted"]["deleted"] is True
    assert report["denied"] == -32602  # workspace B was not ticked
    assert report["after"] == ["from TypeScript"]
    assert len(report["saved"]) == 2 and report["saved"][0] != report["saved"][1]  # refreshed
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", '
        'error="invalid_token"'
    )
