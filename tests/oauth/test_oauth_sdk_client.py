"""The official Python SDK's OAuth client provider against a real `serve --auth oauth` with
two worker processes: discovery (RFC 9728, then RFC 8414), dynamic client registration, the
browser steps (the SDK's redirect handler hands the URL to "the person", an HTTP client with
its own cookies that signs in and ticks a workspace), the token exchange with PKCE, tool calls
including a confirmed delete, a refresh, and a revocation after which `/mcp` answers 401 with
the RFC 9728 challenge."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from notes_server.security.keyring import KeyRing
from tests.helpers import free_port
from tests.oauth.oauth_support import (
    WS_A,
    WS_B,
    MetadataDocumentHost,
    csrf_of,
    query_of,
    set_password,
)
from tests.transports.http_support import HttpServer, start_http_server

mcp_client = pytest.importorskip("mcp.client.client")
mcp_http = pytest.importorskip("mcp.client.streamable_http")
mcp_httpx = pytest.importorskip("mcp.shared._httpx_utils")
mcp_auth = pytest.importorskip("mcp.client.auth")
mcp_shared_auth = pytest.importorskip("mcp.shared.auth")
mcp_types = pytest.importorskip("mcp.types")
mcp_exceptions = pytest.importorskip("mcp.shared.exceptions")

REDIRECT = "http://127.0.0.1:33418/callback"


class Storage:
    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None
        self.history: list[str] = []

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens
        self.history.append(tokens.access_token)

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


class Person:
    """The browser: follows the authorization URL, signs in as alice, ticks workspace A."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.result: Any = None
        self.pages: list[str] = []

    async def open(self, authorization_url: str) -> None:
        assert authorization_url.startswith(self.base + "/oauth/authorize?")
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            started = await browser.get(authorization_url)
            assert started.status_code == 303, started.text
            form = await browser.get(self.base + "/oauth/sign-in")
            self.pages.append(form.text)
            signed = await browser.post(
                self.base + "/oauth/sign-in",
                data={
                    "csrf": csrf_of(form.text),
                    "principal": "alice",
                    "password": "alice-password-1",
                },
            )
            assert signed.status_code == 303, signed.text
            consent = await browser.get(self.base + "/oauth/consent")
            self.pages.append(consent.text)
            allowed = await browser.post(
                self.base + "/oauth/consent",
                data={"csrf": csrf_of(consent.text), "decision": "allow", "workspace": WS_A},
            )
            assert allowed.status_code == 302, allowed.text
        location = allowed.headers["location"]
        assert location.startswith(REDIRECT + "?")
        params = query_of(location)
        self.result = mcp_shared_auth.AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )

    async def callback(self) -> Any:
        assert self.result is not None, "the redirect handler ran first"
        return self.result


async def elicit(context: Any, params: Any) -> Any:
    choices = params.requested_schema["properties"]["note_id"]["oneOf"]
    content = {"note_id": choices[0]["const"], "confirm": True}
    return mcp_types.ElicitResult(action="accept", content=content)


async def session(
    base: str, storage: Storage, person: Person, mode: str, metadata_url: str | None = None
) -> dict[str, Any]:
    metadata = mcp_shared_auth.OAuthClientMetadata(
        client_name="SDK test host",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    provider = mcp_auth.OAuthClientProvider(
        server_url=base + "/mcp",
        client_metadata=metadata,
        storage=storage,
        redirect_handler=person.open,
        callback_handler=person.callback,
        client_metadata_url=metadata_url,
    )
    outcome: dict[str, Any] = {}
    http = mcp_httpx.create_mcp_http_client(auth=provider)
    async with (
        http,
        mcp_client.Client(
            mcp_http.streamable_http_client(base + "/mcp", http_client=http),
            mode=mode,
            elicitation_callback=elicit,
        ) as client,
    ):

        async def call(name: str, workspace: str = WS_A, **args: Any) -> Any:
            return await client.call_tool(name, {"workspaceUri": workspace, **args})

        outcome["tools"] = [tool.name for tool in (await client.list_tools()).tools]
        await call("notes_create", title="from the SDK")
        await call("notes_create", title="to delete")
        try:
            await call("notes_search", workspace=WS_B)
        except mcp_exceptions.MCPError as exc:
            outcome["denied"] = exc.error.code

        outcome["deleted"] = (await call("notes_delete", title="to delete")).structured_content
        # The access token is short-lived; make the SDK see it expired so it refreshes.
        provider.context.token_expiry_time = time.time() - 1
        found = (await call("notes_search")).structured_content
        outcome["after_refresh"] = sorted(note["title"] for note in found["notes"])
    return outcome


def start_oauth_server(
    tmp_path: Path, engine: Any, *extra: str, env: dict[str, str] | None = None
) -> tuple[str, HttpServer]:
    """`serve --auth oauth` with two worker processes, alice owning workspaces A and B."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec(), **(env or {})}
    args = ("--auth", "oauth", "--port", str(port), "--public-url", base, *extra)
    return base, start_http_server(tmp_path, str(engine.url), *args, env=env, workers=2)


@pytest.fixture
def alice(migrated_engine: Any, grant: Any) -> Any:
    grant("alice", WS_A)
    grant("alice", WS_B)
    set_password(migrated_engine, "alice", "alice-password-1")
    return migrated_engine


@pytest.fixture
def live(tmp_path: Path, alice: Any) -> Any:
    base, server = start_oauth_server(tmp_path, alice)
    yield base
    server.stop()


def revoke_and_call(base: str, tokens: Any, client_id: str) -> httpx.Response:
    """Revoke both tokens, then call `/mcp` with the access token."""
    with httpx.Client(base_url=base, timeout=30) as http:
        for token in (tokens.refresh_token, tokens.access_token):
            revoked = http.post("/oauth/revoke", data={"token": token, "client_id": client_id})
            assert revoked.status_code == 200
        return http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}},
            headers={
                "Authorization": f"Bearer {tokens.access_token}",
                "Accept": "application/json, text/event-stream",
            },
        )


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25-session"])
def test_the_sdk_oauth_client_signs_in_consents_calls_refreshes_and_is_revoked(
    live: str, mode: str
) -> None:
    """In both eras: a 2025-11-25 session carries the consent's limit like a modern call."""
    storage, person = Storage(), Person(live)

    outcome = anyio.run(session, live, storage, person, mode)

    assert "notes_delete" in outcome["tools"]
    assert outcome["denied"] == -32602  # workspace B was not ticked
    assert outcome["deleted"]["deleted"] is True
    assert outcome["after_refresh"] == ["from the SDK"]
    assert len(storage.history) == 2 and storage.history[0] != storage.history[1]
    assert "SDK test host" in person.pages[0] and WS_B in person.pages[1]

    answer = revoke_and_call(live, storage.tokens, storage.client.client_id)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{live}/.well-known/oauth-protected-resource/mcp", '
        'error="invalid_token"'
    )


def test_the_sdk_oauth_client_identifies_itself_with_a_client_id_metadata_document(
    tmp_path: Path, alice: Any
) -> None:
    """No registration: the SDK's `client_metadata_url` is the client_id, and the server
    fetches the document (https on loopback, development addresses allowed)."""
    host = MetadataDocumentHost(
        tmp_path,
        lambda url: {
            "client_id": url,
            "client_name": "SDK metadata host",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    base, server = start_oauth_server(
        tmp_path, alice, "--oauth-dev-addresses", env={"SSL_CERT_FILE": str(host.cert_file)}
    )
    try:
        storage, person = Storage(), Person(base)
        outcome = anyio.run(session, base, storage, person, "auto", host.url)
        answer = revoke_and_call(base, storage.tokens, storage.client.client_id)
        registered = httpx.get(base + "/.well-known/oauth-authorization-server", timeout=30)
    finally:
        server.stop()
        host.close()

    assert storage.client.client_id == host.url
    assert host.hits >= 1  # fetched by the server (once per worker at most, then cached)
    assert "SDK metadata host" in person.pages[0]  # the sign-in page names the document's client
    assert outcome["deleted"]["deleted"] is True
    assert outcome["denied"] == -32602
    assert outcome["after_refresh"] == ["from the SDK"]
    assert registered.json()["client_id_metadata_document_supported"] is True
    assert answer.status_code == 401
