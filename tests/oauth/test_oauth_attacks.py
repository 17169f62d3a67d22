"""Refusals: each with the right OAuth error and status, no redirect to an unverified URI, and
no secret in what comes back."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.oauth.oauth_support import ISSUER, WS_A, Flow, csrf_of, query_of
from tests.oauth.test_oauth_flow import call


def test_an_authorization_request_without_pkce_goes_back_as_invalid_request(flow: Flow) -> None:
    answer = flow.start(code_challenge=None, code_challenge_method=None)
    assert answer.status_code == 302
    params = query_of(answer.headers["location"])
    assert params["error"] == "invalid_request"
    assert (params["state"], params["iss"]) == ("state-123", ISSUER)


def test_plain_pkce_is_refused(flow: Flow) -> None:
    answer = flow.start(code_challenge="x" * 43, code_challenge_method="plain")
    assert answer.status_code == 302
    assert query_of(answer.headers["location"])["error"] == "invalid_request"


def test_pkce_without_a_method_is_refused(flow: Flow) -> None:
    answer = flow.start(code_challenge_method=None)
    assert query_of(answer.headers["location"])["error"] == "invalid_request"


def test_a_wrong_code_verifier_gets_invalid_grant(flow: Flow) -> None:
    code = flow.code()
    answer = flow.exchange(code, code_verifier=secrets.token_urlsafe(48))
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"


def test_a_missing_code_verifier_gets_invalid_request(flow: Flow) -> None:
    answer = flow.exchange(flow.code(), code_verifier=None)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    "redirect",
    [
        "http://127.0.0.1/callback/extra",
        "http://127.0.0.1/callback?x=1",
        "https://evil.example/callback",
        "http://127.0.0.1.evil.example/callback",
        "http://evil@127.0.0.1/callback",
    ],
)
def test_an_unregistered_redirect_uri_is_never_followed(flow: Flow, redirect: str) -> None:
    answer = flow.start(redirect_uri=redirect)
    assert answer.status_code == 400
    assert "location" not in answer.headers
    assert "set-cookie" not in answer.headers


def test_a_missing_redirect_uri_is_refused_on_a_page(flow: Flow) -> None:
    answer = flow.start(redirect_uri=None)
    assert answer.status_code == 400
    assert "location" not in answer.headers


def test_a_loopback_redirect_may_use_any_port(flow: Flow) -> None:
    answer = flow.start(redirect_uri="http://127.0.0.1:49152/callback")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/oauth/sign-in"


def test_an_unknown_client_is_refused_on_a_page(flow: Flow) -> None:
    answer = flow.start(client_id="nobody")
    assert answer.status_code == 400
    assert "location" not in answer.headers


def test_the_token_redirect_uri_must_equal_the_authorization_ones(flow: Flow) -> None:
    answer = flow.exchange(flow.code(), redirect_uri="http://127.0.0.1:9/callback")
    assert answer.json()["error"] == "invalid_grant"


def test_a_code_of_another_client_is_refused(flow: Flow, app_client: TestClient) -> None:
    code = flow.code()
    other = Flow(app_client)
    answer = other.exchange(code)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_grant"


def test_another_resource_is_refused_at_authorization(flow: Flow) -> None:
    answer = flow.start(resource="https://other.example/mcp")
    assert answer.status_code == 302
    params = query_of(answer.headers["location"])
    assert params["error"] == "invalid_target"
    assert params["state"] == "state-123"


def test_another_resource_is_refused_at_the_token_endpoint(flow: Flow) -> None:
    answer = flow.exchange(flow.code(), resource="https://other.example/mcp")
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_target"


def test_a_token_bound_to_another_resource_is_refused_by_mcp(
    flow: Flow, app_client: TestClient, migrated_engine: Any
) -> None:
    from sqlalchemy import update

    from notes_server.store.engine import write_tx
    from notes_server.store.models import oauth_grants_table as grants

    tokens = flow.tokens()
    with write_tx(migrated_engine) as conn:
        conn.execute(update(grants).values(resource="https://other.example/mcp"))
    assert call(app_client, tokens["access_token"], WS_A).status_code == 401


@pytest.mark.parametrize("csrf", [None, "forged"])
def test_sign_in_without_the_pages_csrf_token_is_refused(flow: Flow, csrf: str | None) -> None:
    flow.start()
    data = {"principal": "alice", "password": "alice-password-1"}
    if csrf is not None:
        data["csrf"] = csrf
    answer = flow.client.post("/oauth/sign-in", data=data)
    assert answer.status_code == 403
    assert "location" not in answer.headers


def test_consent_without_the_pages_csrf_token_is_refused(flow: Flow) -> None:
    flow.consent_page()
    answer = flow.client.post(
        "/oauth/consent", data={"csrf": "forged", "decision": "allow", "workspace": WS_A}
    )
    assert answer.status_code == 403
    assert "location" not in answer.headers


def test_consent_in_a_browser_that_never_signed_in_is_refused(flow: Flow) -> None:
    flow.start()  # has the flow cookie, not signed in
    page = flow.client.get("/oauth/sign-in")
    answer = flow.client.post(
        "/oauth/consent", data={"csrf": csrf_of(page.text), "decision": "allow", "workspace": WS_A}
    )
    assert answer.status_code == 403


def test_a_cross_site_form_post_is_refused_by_the_origin_guard(flow: Flow) -> None:
    flow.start()
    page = flow.client.get("/oauth/sign-in")
    answer = flow.client.post(
        "/oauth/sign-in",
        data={"csrf": csrf_of(page.text), "principal": "alice", "password": "alice-password-1"},
        headers={"Origin": "https://evil.example"},
    )
    assert answer.status_code == 403


def test_wrong_passwords_lock_the_account_name_even_for_the_right_password(flow: Flow) -> None:
    from notes_server.store.oauth import MAX_SIGN_IN_FAILURES

    statuses = [flow.sign_in("alice", f"wrong-{i}-password").status_code for i in range(5)]
    assert statuses == [401] * (MAX_SIGN_IN_FAILURES - 1) + [429]
    right = flow.sign_in("alice", "alice-password-1")
    assert right.status_code == 429
    assert "Too many wrong sign-ins" in right.text


def test_a_wrong_sign_in_does_not_say_whether_the_account_exists(flow: Flow) -> None:
    unknown = flow.sign_in("mallory", "some-password-1")
    wrong = flow.sign_in("alice", "some-password-1")
    assert unknown.status_code == wrong.status_code == 401
    assert unknown.text.replace("mallory", "alice") == wrong.text.replace(
        csrf_of(wrong.text), csrf_of(unknown.text)
    )


def test_an_api_token_of_another_principal_named_is_refused(
    flow: Flow, migrated_engine: Any
) -> None:
    from notes_server.security.tokens import create_token
    from notes_server.store.tokens import SqlTokenRecords

    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    assert flow.sign_in("alice", secret).status_code == 401


def test_token_errors_leak_no_secret(flow: Flow) -> None:
    code = flow.code()
    answer = flow.exchange(code, code_verifier=secrets.token_urlsafe(48))
    assert code not in answer.text and flow.verifier not in answer.text
    assert answer.headers["cache-control"] == "no-store"


def test_an_access_token_is_not_a_refresh_token(flow: Flow) -> None:
    tokens = flow.tokens()
    answer = flow.refresh(tokens["access_token"])
    assert answer.json()["error"] == "invalid_grant"


def test_an_oauth_access_token_cannot_approve_a_purge(flow: Flow) -> None:
    """The approval page asks the person, not the assistant holding the access token."""
    from notes_server.transports.http.app import lend_authenticator

    seen: list[Any] = []

    class Page:
        def use_authenticator(self, verify: Any) -> None:
            seen.append(verify)

    from notes_server.transports.http.middleware.auth import BearerAuthenticator

    tokens = flow.tokens()
    auth = _authenticator(flow)
    assert isinstance(auth, BearerAuthenticator)
    lend_authenticator([Page()], auth)  # type: ignore[list-item]
    assert auth.principal_for([f"Bearer {tokens['access_token']}"]) == "alice"
    assert seen[0](tokens["access_token"]) is None


def _authenticator(flow: Flow) -> Any:
    from notes_server.transports.http.middleware.auth import build_authenticator
    from tests.oauth.oauth_support import OAUTH

    services = flow.services  # type: ignore[attr-defined]
    return build_authenticator(services.settings, OAUTH, services)


def test_an_authorization_request_too_long_for_the_flow_cookie_is_refused(flow: Flow) -> None:
    answer = flow.start(state="s" * 3000)
    assert answer.status_code == 400
    assert "set-cookie" not in answer.headers
