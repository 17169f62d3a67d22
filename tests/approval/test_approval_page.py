"""The approval page as a browser meets it: one-time link, sign-in with the principal's own
token, CSRF, framing/caching/script policy, and what each refusal leaves behind."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.store.engine import write_tx
from tests.approval.purge_support import (
    WS,
    add_note,
    approve,
    csrf_of,
    form_post,
    open_link,
    page_path,
    purge,
    round_of,
    sign_in,
)
from tests.transports.http_support import LOOPBACK_URL


@pytest.fixture
def link(client: TestClient, alice: str, migrated_engine: Engine) -> str:
    """The approval URL of a purge alice started over two archived notes."""
    add_note(migrated_engine, "a.md", "Seeds <b>2024</b>", archived=True)
    add_note(migrated_engine, "b.md", "Compost", archived=True)
    return round_of(purge(client, alice)).url


def approved_at(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT approved_at FROM purge_approvals"))]


def assert_locked_down(response: httpx.Response) -> None:
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "form-action 'self'" in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["referrer-policy"] == "same-origin"
    assert "<script" not in response.text.lower()


def cookie_header(response: httpx.Response) -> str:
    value: str = response.headers["set-cookie"]
    return value.lower()


def test_the_link_works_once_and_its_secret_leaves_the_url(
    link: str, browser: TestClient, client: TestClient
) -> None:
    opened = open_link(browser, link)
    again = open_link(TestClient(client.app, base_url=LOOPBACK_URL), link)

    assert opened.status_code == 303 and opened.headers["location"] == "/approval"
    cookie = cookie_header(opened)
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/approval" in cookie
    assert "secure" not in cookie  # plain HTTP on loopback: a Secure cookie would be dropped
    assert again.status_code == 403 and "already used" in again.text
    assert_locked_down(opened)
    assert_locked_down(again)


def test_signing_in_with_the_principals_own_token_sets_a_strict_session(
    link: str, browser: TestClient, alice: str
) -> None:
    signed = sign_in(browser, link, alice)
    page = browser.get("/approval")

    assert signed.status_code == 303 and signed.headers["location"] == "/approval"
    cookie = cookie_header(signed)
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert page.status_code == 200
    assert "2 archived note(s)" in page.text and WS in page.text
    assert "Seeds &lt;b&gt;2024&lt;/b&gt;" in page.text and "<b>2024" not in page.text
    assert "Compost" in page.text and "<code>garden</code>" in page.text
    assert_locked_down(page)


def test_the_sign_in_form_shows_nothing_of_the_purge(link: str, browser: TestClient) -> None:
    open_link(browser, link)
    login = browser.get("/approval")

    assert login.status_code == 200 and 'type="password"' in login.text
    assert "Compost" not in login.text and WS not in login.text
    assert_locked_down(login)


@pytest.mark.parametrize("who", ["bob", "garbage"])
def test_a_token_of_another_principal_is_refused(
    link: str,
    browser: TestClient,
    client: TestClient,
    alice: str,
    bob: str,
    migrated_engine: Engine,
    who: str,
) -> None:
    token = bob if who == "bob" else "nst_" + "A" * 43
    refused = sign_in(browser, link, token)
    page = browser.get("/approval")

    assert refused.status_code == 403 and "does not belong" in refused.text
    assert "set-cookie" not in refused.headers
    assert 'type="password"' in page.text and "Compost" not in page.text
    assert approved_at(migrated_engine) == [None]
    assert_locked_down(refused)


@pytest.mark.parametrize("csrf", [None, "", "wrong"], ids=["missing", "empty", "wrong"])
def test_a_login_without_the_pages_csrf_token_is_refused(
    link: str, browser: TestClient, alice: str, csrf: str | None
) -> None:
    open_link(browser, link)
    fields = {"token": alice} if csrf is None else {"token": alice, "csrf": csrf}

    refused = form_post(browser, fields)

    assert refused.status_code == 403 and "not submitted from this page" in refused.text
    assert "set-cookie" not in refused.headers


@pytest.mark.parametrize("csrf", [None, "wrong"], ids=["missing", "wrong"])
def test_a_confirmation_without_the_pages_csrf_token_approves_nothing(
    link: str, browser: TestClient, alice: str, migrated_engine: Engine, csrf: str | None
) -> None:
    sign_in(browser, link, alice)
    fields = {"confirm": "garden"} if csrf is None else {"confirm": "garden", "csrf": csrf}

    refused = form_post(browser, fields)

    assert refused.status_code == 403
    assert approved_at(migrated_engine) == [None]


def test_the_login_csrf_token_does_not_confirm_the_purge(
    link: str, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    open_link(browser, link)
    login_csrf = csrf_of(browser.get("/approval"))
    form_post(browser, {"csrf": login_csrf, "token": alice})

    refused = form_post(browser, {"csrf": login_csrf, "confirm": "garden"})

    assert refused.status_code == 403
    assert approved_at(migrated_engine) == [None]


def test_a_mistyped_workspace_name_approves_nothing(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "a.md", "Compost", archived=True)
    first = round_of(purge(client, alice))

    mistyped = approve(browser, first.url, alice, typed="projects")
    retry = round_of(purge(client, alice, answer="accept", state=first.state))

    assert mistyped.status_code == 400 and "does not match" in mistyped.text
    assert approved_at(migrated_engine) == [None]
    assert retry.result["resultType"] == "input_required"


def test_a_second_confirmation_is_closed(
    link: str, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    assert approve(browser, link, alice).status_code == 200
    again = browser.get("/approval")

    assert "Purge approved" in again.text
    assert len(approved_at(migrated_engine)) == 1


@pytest.mark.parametrize("cookie", [None, "garbage", "state"])
def test_without_a_valid_cookie_the_page_refuses(
    link: str, browser: TestClient, client: TestClient, alice: str, cookie: str | None
) -> None:
    if cookie == "state":  # a sealed requestState is not a page session
        cookie = round_of(purge(client, alice)).state
    if cookie is not None:
        browser.cookies.set("notes_approval", cookie, path="/approval")

    page = browser.get("/approval")
    post = form_post(browser, {"csrf": "x", "confirm": "garden"})

    assert page.status_code == 403 and post.status_code == 403
    assert "No approval in progress" in page.text


def test_an_expired_link_is_refused(
    link: str, browser: TestClient, migrated_engine: Engine
) -> None:
    with write_tx(migrated_engine) as conn:
        conn.execute(text("UPDATE purge_approvals SET expires_at = '2000-01-01 00:00:00.000000'"))

    assert open_link(browser, link).status_code == 403


def test_a_foreign_origin_cannot_post_to_the_page(
    link: str, browser: TestClient, alice: str
) -> None:
    open_link(browser, link)
    csrf = csrf_of(browser.get("/approval"))

    response = browser.post(
        "/approval",
        data={"csrf": csrf, "token": alice},
        headers={"Origin": "http://evil.test"},
        follow_redirects=False,
    )

    assert response.status_code == 403
    assert "set-cookie" not in response.headers


def test_the_page_needs_no_bearer_header_but_mcp_still_does(link: str, browser: TestClient) -> None:
    assert open_link(browser, link).status_code == 303
    assert browser.post("/mcp", content=b"{}").status_code == 401
    assert page_path(link).startswith("/approval?a=pa-")


def test_a_head_request_does_not_spend_the_link(
    link: str, browser: TestClient, client: TestClient
) -> None:
    preview = TestClient(client.app, base_url=LOOPBACK_URL).head(page_path(link))

    assert preview.status_code == 405
    assert open_link(browser, link).status_code == 303


@pytest.mark.parametrize(
    "origin",
    ["http://localhost:3000", "http://127.0.0.1:9999", "http://127.0.0.1", "http://[::1]:8765"],
)
def test_another_loopback_origin_cannot_sign_in_on_the_page(
    link: str, browser: TestClient, alice: str, origin: str
) -> None:
    open_link(browser, link)
    csrf = csrf_of(browser.get("/approval"))

    forged = browser.post(
        "/approval",
        data={"csrf": csrf, "token": alice},
        headers={"Origin": origin},
        follow_redirects=False,
    )
    own = form_post(browser, {"csrf": csrf, "token": alice})  # Origin: the page's own

    assert forged.status_code == 403
    assert forged.json()["error"]["message"] == "Forbidden: Origin not allowed"
    assert "set-cookie" not in forged.headers
    assert own.status_code == 303  # the same form from the page's own origin signs in
