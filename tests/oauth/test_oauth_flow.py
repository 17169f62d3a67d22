"""The authorization server end to end over the composed app: discovery, the browser steps,
the token endpoint, and what `/mcp` then allows."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from sqlalchemy import text
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings
from tests.oauth.oauth_support import ISSUER, RESOURCE, WS_A, WS_B, WS_C, Flow, csrf_of, query_of
from tests.transports.http_support import rpc


def call(client: TestClient, token: str | None, workspace: str) -> Any:
    body, headers = rpc(
        "tools/call",
        {"name": "notes_create", "arguments": {"workspaceUri": workspace, "title": "hello"}},
    )
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return client.post("/mcp", content=body, headers=headers)


def test_metadata_describes_the_authorization_server(app_client: TestClient) -> None:
    answer = app_client.get("/.well-known/oauth-authorization-server")
    assert answer.status_code == 200
    document = answer.json()
    assert document["issuer"] == ISSUER
    assert document["authorization_endpoint"] == ISSUER + "/oauth/authorize"
    assert document["token_endpoint"] == ISSUER + "/oauth/token"
    assert document["revocation_endpoint"] == ISSUER + "/oauth/revoke"
    assert document["registration_endpoint"] == ISSUER + "/oauth/register"
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["authorization_response_iss_parameter_supported"] is True
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["response_types_supported"] == ["code"]


def test_resource_metadata_names_this_server_as_its_authorization_server(
    app_client: TestClient,
) -> None:
    document = app_client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert document["resource"] == RESOURCE
    assert document["authorization_servers"] == [ISSUER]


def test_mcp_without_a_token_answers_401_with_the_resource_metadata_challenge(
    app_client: TestClient, accounts: dict[str, str]
) -> None:
    answer = call(app_client, None, WS_A)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{ISSUER}/.well-known/oauth-protected-resource/mcp"'
    )


def test_a_consented_token_reaches_only_the_ticked_workspaces(
    flow: Flow, app_client: TestClient
) -> None:
    tokens = flow.tokens([WS_A])
    assert tokens["token_type"] == "Bearer"
    assert 0 < tokens["expires_in"] <= 900
    allowed = call(app_client, tokens["access_token"], WS_A)
    assert allowed.status_code == 200
    assert "error" not in allowed.json(), allowed.json()
    # alice owns beta too, but did not tick it: refused like any workspace she lacks.
    refused = call(app_client, tokens["access_token"], WS_B)
    assert refused.json()["error"]["code"] == -32602


def test_the_consent_page_lists_only_the_principals_workspaces(flow: Flow) -> None:
    page = flow.consent_page()
    assert WS_A in page and WS_B in page
    assert WS_C not in page  # bob's
    assert "Test Assistant" in page
    assert "http://127.0.0.1/callback" in page


def test_a_forged_checkbox_for_another_principals_workspace_grants_nothing_of_it(
    flow: Flow, app_client: TestClient
) -> None:
    tokens = flow.tokens([WS_A, WS_C])
    assert call(app_client, tokens["access_token"], WS_C).json()["error"]["code"] == -32602
    assert "error" not in call(app_client, tokens["access_token"], WS_A).json()


def test_a_consent_with_only_foreign_workspaces_is_refused(flow: Flow) -> None:
    answer = flow.consent([WS_C])
    assert answer.status_code == 400
    assert "location" not in answer.headers
    assert "Tick at least one workspace" in answer.text


def test_deny_sends_access_denied_with_state_and_issuer(flow: Flow) -> None:
    page = flow.consent_page()
    answer = flow.client.post("/oauth/consent", data={"csrf": csrf_of(page), "decision": "deny"})
    assert answer.status_code == 302
    params = query_of(answer.headers["location"])
    assert params["error"] == "access_denied"
    assert (params["state"], params["iss"]) == ("state-123", ISSUER)
    assert "code" not in params


def test_a_refresh_rotates_and_a_reused_refresh_token_revokes_the_family(
    flow: Flow, app_client: TestClient
) -> None:
    first = flow.tokens()
    rotated = flow.refresh(first["refresh_token"])
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert "error" not in call(app_client, second["access_token"], WS_A).json()
    reused = flow.refresh(first["refresh_token"])
    assert reused.status_code == 400
    assert reused.json()["error"] == "invalid_grant"
    # The whole family is gone: the rotated refresh token and both access tokens.
    assert flow.refresh(second["refresh_token"]).json()["error"] == "invalid_grant"
    assert call(app_client, second["access_token"], WS_A).status_code == 401
    assert call(app_client, first["access_token"], WS_A).status_code == 401


def test_a_replayed_code_is_refused_and_revokes_what_it_issued(
    flow: Flow, app_client: TestClient
) -> None:
    code = flow.code()
    issued = flow.exchange(code).json()
    replayed = flow.exchange(code)
    assert replayed.status_code == 400
    assert replayed.json()["error"] == "invalid_grant"
    assert call(app_client, issued["access_token"], WS_A).status_code == 401
    assert flow.refresh(issued["refresh_token"]).json()["error"] == "invalid_grant"


def test_revocation_ends_the_token_and_the_next_call_gets_the_challenge(
    flow: Flow, app_client: TestClient
) -> None:
    tokens = flow.tokens()
    revoked = app_client.post(
        "/oauth/revoke", data={"token": tokens["access_token"], "client_id": flow.client_id}
    )
    assert revoked.status_code == 200
    answer = call(app_client, tokens["access_token"], WS_A)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith(
        f'Bearer resource_metadata="{ISSUER}/.well-known/oauth-protected-resource/mcp"'
    )
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]


def test_revoking_the_refresh_token_revokes_its_access_tokens(
    flow: Flow, app_client: TestClient
) -> None:
    tokens = flow.tokens()
    app_client.post(
        "/oauth/revoke", data={"token": tokens["refresh_token"], "client_id": flow.client_id}
    )
    assert call(app_client, tokens["access_token"], WS_A).status_code == 401


def test_revoking_an_unknown_token_answers_200(flow: Flow, app_client: TestClient) -> None:
    answer = app_client.post("/oauth/revoke", data={"token": "nsa_x", "client_id": flow.client_id})
    assert answer.status_code == 200


def test_sign_in_with_an_api_token_of_the_principal(
    flow: Flow, migrated_engine: Any, app_client: TestClient
) -> None:
    from notes_server.security.tokens import create_token
    from notes_server.store.tokens import SqlTokenRecords

    _, secret = create_token(SqlTokenRecords(migrated_engine), "alice")
    signed = flow.sign_in("", secret)
    assert signed.status_code == 303
    assert signed.headers["location"] == "/oauth/consent"
    assert "Signed in as <code>alice</code>" in flow.client.get("/oauth/consent").text


def test_the_pages_cookie_is_httponly_lax_and_scoped(flow: Flow) -> None:
    started = flow.start()
    cookie = started.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/oauth" in cookie
    assert "secure" not in cookie  # plain http on loopback; https --public-url sets it
    page = flow.client.get("/oauth/sign-in")
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"


def test_no_secret_is_in_any_url_after_the_first_redirect(flow: Flow) -> None:
    started = flow.start()
    assert started.headers["location"] == "/oauth/sign-in"
    signed = flow.client.post(
        "/oauth/sign-in",
        data={
            "csrf": csrf_of(flow.client.get("/oauth/sign-in").text),
            "principal": "alice",
            "password": "alice-password-1",
        },
    )
    assert signed.headers["location"] == "/oauth/consent"


def test_registration_off_serves_no_registration_endpoint(settings: Any, services: Any) -> None:
    from notes_server.app import create_http_app
    from notes_server.config import HttpSettings
    from tests.oauth.oauth_support import OAUTH

    http = HttpSettings(**{**OAUTH.__dict__, "registration": "off"})
    app = create_http_app(settings, http, services)
    with TestClient(app, base_url=ISSUER) as client:
        assert (
            "registration_endpoint"
            not in client.get("/.well-known/oauth-authorization-server").json()
        )
        answer = client.post("/oauth/register", json={"redirect_uris": [ISSUER]})
        assert answer.status_code == 401  # not a route here: the credential check answers


def test_registration_is_rate_limited(app_client: TestClient) -> None:
    from notes_server.features.oauth.routes import REGISTRATIONS_PER_WINDOW

    metadata = {"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}
    statuses = [
        app_client.post("/oauth/register", json=metadata).status_code
        for _ in range(REGISTRATIONS_PER_WINDOW + 1)
    ]
    assert statuses[:-1] == [201] * REGISTRATIONS_PER_WINDOW
    assert statuses[-1] == 429


@pytest.mark.parametrize(
    ("uri", "error", "problem"),
    [
        ("http://evil.example/cb", "invalid_redirect_uri", "loopback"),
        # Authlib's own RFC 7591 claim check refuses a fragment first.
        ("https://ok.example/cb#frag", "invalid_client_metadata", "redirect_uris"),
        ("javascript://x/cb", "invalid_redirect_uri", "forbidden"),
    ],
)
def test_registration_refuses_unsafe_redirect_uris(
    app_client: TestClient, uri: str, error: str, problem: str
) -> None:
    answer = app_client.post(
        "/oauth/register", json={"redirect_uris": [uri], "token_endpoint_auth_method": "none"}
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == error
    assert problem in answer.json()["error_description"]


def test_a_confidential_client_authenticates_with_its_secret(
    app_client: TestClient, accounts: Any
) -> None:
    registered = app_client.post(
        "/oauth/register",
        json={
            "redirect_uris": ["http://127.0.0.1/cb"],
            "token_endpoint_auth_method": "client_secret_post",
        },
    ).json()
    assert registered["client_secret"]
    flow = Flow.__new__(Flow)
    flow.client, flow.redirect_uri, flow.client_id = (
        app_client,
        "http://127.0.0.1/cb",
        registered["client_id"],
    )
    from tests.oauth.oauth_support import pkce

    flow.verifier, flow.challenge = pkce()
    code = flow.code()
    assert flow.exchange(code).json()["error"] == "invalid_client"
    code = flow.code()
    answer = flow.exchange(code, client_secret=registered["client_secret"])
    assert answer.status_code == 200, answer.text
    assert registered["client_secret"] not in json.dumps(answer.json())


def test_revoking_a_workspace_grant_takes_it_from_every_consent(
    flow: Flow, app_client: TestClient, settings: Any
) -> None:
    from click.testing import CliRunner

    from notes_server.cli.main import main

    tokens = flow.tokens([WS_A])
    revoked = CliRunner().invoke(
        main, ["workspace", "revoke", "alice", WS_A, "--db", settings.db_url]
    )
    assert revoked.exit_code == 0, revoked.output
    assert call(app_client, tokens["access_token"], WS_A).json()["error"]["code"] == -32602


def test_an_expired_access_token_gets_the_challenge(
    flow: Flow, app_client: TestClient, migrated_engine: Any
) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from notes_server.store.engine import write_tx
    from notes_server.store.models import oauth_tokens_table as tokens_table
    from notes_server.tools.services import utc_now

    tokens = flow.tokens()
    with write_tx(migrated_engine) as conn:
        conn.execute(
            update(tokens_table)
            .where(tokens_table.c.kind == "access")
            .values(expires_at=utc_now() - timedelta(seconds=1))
        )
    answer = call(app_client, tokens["access_token"], WS_A)
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    # The refresh token still works: that is what it is for.
    assert flow.refresh(tokens["refresh_token"]).status_code == 200


def test_the_purge_approval_page_takes_the_principals_account_password(
    app_client: TestClient, accounts: dict[str, str], services: Any, migrated_engine: Any
) -> None:
    """Under --auth oauth a person may have no token: the approval page asks for the password
    of the account whose purge it is, and nobody else's."""
    from datetime import timedelta

    from notes_server.features.purge.login import TokenLogin
    from notes_server.store import approvals
    from notes_server.store.engine import write_tx
    from notes_server.tools.services import utc_now

    now = utc_now()
    with write_tx(migrated_engine) as conn:
        approvals.create(
            conn,
            approval_id="a1",
            principal="alice",
            workspace=WS_A,
            link_hash="x" * 64,
            items=[],
            set_digest="d",
            now=now,
            expires_at=now + timedelta(minutes=5),
        )
        approval = approvals.get(conn, "a1")
    assert approval is not None
    login = TokenLogin(services)
    assert login.principal_for(approval, "alice-password-1") == "alice"
    assert login.principal_for(approval, "bob-password-12") is None  # bob's, not alice's
    assert login.principal_for(approval, "wrong-password-1") is None


def test_codes_and_tokens_are_stored_only_as_their_sha256(flow: Flow) -> None:
    code = flow.code()
    tokens = flow.exchange(code).json()
    secrets = {"code": code, "access": tokens["access_token"], "refresh": tokens["refresh_token"]}
    with flow.services.engine.connect() as conn:  # type: ignore[attr-defined]
        stored_codes = [tuple(row) for row in conn.execute(text("SELECT * FROM oauth_codes"))]
        stored = [tuple(row) for row in conn.execute(text("SELECT * FROM oauth_tokens"))]
    dumped = repr(stored_codes + stored)
    for secret in secrets.values():
        assert secret not in dumped
    digest = {name: hashlib.sha256(value.encode()).hexdigest() for name, value in secrets.items()}
    assert digest["code"] in {row[0] for row in stored_codes}
    assert {row[0] for row in stored} >= {digest["access"], digest["refresh"]}


def test_behind_an_https_public_url_the_flow_cookie_is_secure(
    settings: Any, services: Any, accounts: dict[str, str]
) -> None:
    public = "https://notes.example"
    http = HttpSettings(auth="oauth", public_url=public)
    app = create_http_app(settings, http, services)
    with TestClient(app, base_url=public, follow_redirects=False) as client:
        started = Flow(client, issuer=public).start()
    assert started.status_code == 303, started.text
    cookie = started.headers["set-cookie"].lower()
    assert "secure" in cookie and "httponly" in cookie and "samesite=lax" in cookie


def test_a_stored_api_token_still_calls_mcp_beside_oauth(
    app_client: TestClient, accounts: dict[str, str], migrated_engine: Any
) -> None:
    from notes_server.security.tokens import create_token
    from notes_server.store.tokens import SqlTokenRecords

    _, secret = create_token(SqlTokenRecords(migrated_engine), "alice")
    answer = call(app_client, secret, WS_A)
    assert answer.status_code == 200
    assert "error" not in answer.json(), answer.json()
