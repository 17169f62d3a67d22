"""The approval page's sign-in limit: wrong credentials are counted on the approval's row, so
`MAX_ATTEMPTS` of them lock it whichever workers and instances they reached; a locked approval
can never be completed, says so on the page, is audited, and its purge's retry is refused as
for an approval that no longer exists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.errors import STATE_REJECTED
from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.approvals import MAX_ATTEMPTS
from notes_server.store.engine import write_tx
from notes_server.store.tokens import SqlTokenRecords
from tests.approval.purge_support import (
    WS,
    add_note,
    csrf_of,
    form_post,
    open_link,
    purge,
    round_of,
)
from tests.helpers import free_port
from tests.transports.http_support import LOOPBACK_URL, HttpServer, server_instances

REFUSED = "That token does not belong to the account that asked for this purge."
LOCKED = "locked after too many wrong sign-ins"
AGAIN = "start the purge again from your assistant"
PAST = datetime(2000, 1, 1, tzinfo=UTC)


def wrong_tokens(bob: str) -> list[str]:
    """Wrong credentials of every kind: another principal's real token, a well-formed token
    that does not exist, and something that is no token at all."""
    return [bob, "nst_" + "A" * 43, "hunter2", "nst_" + "B" * 43, bob, "not a token"]


def approval_state(engine: Engine) -> list[tuple[object, int]]:
    with engine.connect() as conn:
        query = text("SELECT approved_at, failed_sign_ins FROM purge_approvals")
        return [(row[0], row[1]) for row in conn.execute(query)]


def purge_audit(engine: Engine) -> list[tuple[str, str, str, str | None, str | None]]:
    with engine.connect() as conn:
        query = text(
            "SELECT outcome, principal, workspace, note_id, nonce FROM audit_log "
            "WHERE tool = 'notes_purge' ORDER BY id"
        )
        return [(row[0], row[1], row[2], row[3], row[4]) for row in conn.execute(query)]


def live_count(engine: Engine) -> int:
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM notes")).scalar()
    assert isinstance(count, int)
    return count


def assert_locked_page(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    assert LOCKED in response.text and AGAIN in response.text
    assert 'name="token"' not in response.text  # no form left to try again


# -- one instance (the composed app through httpx) --------------------------------------------


@pytest.fixture
def pending(client: TestClient, alice: str, migrated_engine: Engine) -> tuple[str, str]:
    """(approval URL, requestState) of a purge alice started over two archived notes."""
    add_note(migrated_engine, "a.md", "Seeds", archived=True)
    add_note(migrated_engine, "b.md", "Compost", archived=True)
    first = round_of(purge(client, alice))
    return first.url, first.state


@pytest.fixture
def at_sign_in(pending: tuple[str, str], browser: TestClient) -> tuple[str, str]:
    """(requestState, CSRF token) once the browser has spent the link and shows the sign-in."""
    url, state = pending
    assert open_link(browser, url).status_code == 303
    return state, csrf_of(browser.get("/approval"))


def test_five_wrong_tokens_lock_the_approval_and_then_the_right_token_is_refused(
    at_sign_in: tuple[str, str],
    client: TestClient,
    browser: TestClient,
    alice: str,
    bob: str,
    migrated_engine: Engine,
) -> None:
    state, csrf = at_sign_in
    typed = wrong_tokens(bob)[:MAX_ATTEMPTS]

    wrong = [form_post(browser, {"csrf": csrf, "token": token}) for token in typed]
    right = form_post(browser, {"csrf": csrf, "token": alice})
    reloaded = browser.get("/approval")
    retry = purge(client, alice, answer="accept", state=state)

    refusals = wrong[: MAX_ATTEMPTS - 1]
    assert all(r.status_code == 403 and REFUSED in r.text for r in refusals)
    assert len({r.text for r in refusals}) == 1  # never says which part was wrong
    assert_locked_page(wrong[-1])
    assert_locked_page(right)
    assert_locked_page(reloaded)
    assert all("set-cookie" not in r.headers for r in [*wrong, right])
    for response in [*wrong, right]:
        assert not any(token in response.text for token in [*typed, alice])
    assert retry.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert approval_state(migrated_engine) == [(None, MAX_ATTEMPTS)]
    assert live_count(migrated_engine) == 2
    assert purge_audit(migrated_engine) == [("locked", "alice", WS, None, None)]


def test_four_wrong_tokens_then_the_right_one_signs_in_and_the_purge_completes(
    at_sign_in: tuple[str, str],
    client: TestClient,
    browser: TestClient,
    alice: str,
    bob: str,
    migrated_engine: Engine,
) -> None:
    state, csrf = at_sign_in

    wrong = [
        form_post(browser, {"csrf": csrf, "token": token})
        for token in wrong_tokens(bob)[: MAX_ATTEMPTS - 1]
    ]
    signed = form_post(browser, {"csrf": csrf, "token": alice})
    page = browser.get("/approval")
    confirmed = form_post(browser, {"csrf": csrf_of(page), "confirm": "garden"})
    final = round_of(purge(client, alice, answer="accept", state=state)).result

    assert all(r.status_code == 403 and REFUSED in r.text for r in wrong)
    assert signed.status_code == 303 and signed.headers["location"] == "/approval"
    assert confirmed.status_code == 200 and "Purge approved" in confirmed.text
    assert final["structuredContent"]["purgedCount"] == 2
    assert live_count(migrated_engine) == 0
    assert [row[0] for row in purge_audit(migrated_engine)] == ["purged", "purged"]


def test_a_refused_csrf_token_is_not_counted_as_a_wrong_sign_in(
    at_sign_in: tuple[str, str], browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    _, csrf = at_sign_in

    fields = {"csrf": "forged", "token": "nst_" + "A" * 43}
    forged = [form_post(browser, fields) for _ in range(MAX_ATTEMPTS)]
    signed = form_post(browser, {"csrf": csrf, "token": alice})

    assert all(r.status_code == 403 and "not submitted from this page" in r.text for r in forged)
    assert signed.status_code == 303
    assert approval_state(migrated_engine) == [(None, 0)]


def test_signing_in_to_an_expired_approval_says_it_is_closed_and_counts_nothing(
    at_sign_in: tuple[str, str], browser: TestClient, alice: str, bob: str, migrated_engine: Engine
) -> None:
    _, csrf = at_sign_in
    with write_tx(migrated_engine) as conn:
        conn.execute(text("UPDATE purge_approvals SET expires_at = :past"), {"past": PAST})

    answers = [form_post(browser, {"csrf": csrf, "token": t}) for t in (bob, alice)]

    assert all(r.status_code == 410 and "no longer open" in r.text for r in answers)
    assert approval_state(migrated_engine) == [(None, 0)]
    assert purge_audit(migrated_engine) == []


def test_a_signed_in_person_cannot_confirm_once_wrong_sign_ins_elsewhere_locked_it(
    at_sign_in: tuple[str, str],
    client: TestClient,
    browser: TestClient,
    alice: str,
    bob: str,
    migrated_engine: Engine,
) -> None:
    """Someone holding a copy of the link-step cookie guesses while the person signs in: the
    lock still wins, and the signed-in session can approve nothing."""
    _, csrf = at_sign_in
    copy = TestClient(client.app, base_url=LOOPBACK_URL)
    copy.cookies.set("notes_approval", browser.cookies["notes_approval"], path="/approval")
    assert form_post(browser, {"csrf": csrf, "token": alice}).status_code == 303
    page = browser.get("/approval")
    assert page.status_code == 200 and "Permanently delete" in page.text

    guesses = [form_post(copy, {"csrf": csrf, "token": bob}) for _ in range(MAX_ATTEMPTS)]
    confirmed = form_post(browser, {"csrf": csrf_of(page), "confirm": "garden"})

    assert_locked_page(guesses[-1])
    assert_locked_page(confirmed)
    assert approval_state(migrated_engine) == [(None, MAX_ATTEMPTS)]


# -- two instances on one database (real `serve` processes) -----------------------------------


@pytest.fixture
def instances(
    tmp_path: Path, migrated_engine: Engine, grant: Callable[..., str]
) -> Iterator[tuple[HttpServer, HttpServer, str, str]]:
    """Two instances sharing the test database and the sealing keys; alice's and bob's
    tokens."""
    grant("alice", WS)
    grant("bob", WS)
    alice = create_token(SqlTokenRecords(migrated_engine), "alice")[1]
    bob = create_token(SqlTokenRecords(migrated_engine), "bob")[1]
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    ports = lambda: ("--port", str(free_port()))  # noqa: E731
    url = str(migrated_engine.url.render_as_string(hide_password=False))
    with server_instances(tmp_path, url, env=env, own_args=ports) as (first, second):
        yield first, second, alice, bob


def sign_in_at(browser: httpx.Client, server: HttpServer, csrf: str, token: str) -> httpx.Response:
    """The sign-in form submitted to `server`, as a browser on that origin sends it."""
    return browser.post(
        f"{server.url}/approval",
        data={"csrf": csrf, "token": token},
        headers={"Origin": server.url},
        follow_redirects=False,
    )


def start_purge(server: HttpServer, token: str, engine: Engine) -> tuple[str, str]:
    add_note(engine, "a.md", "Seeds", archived=True)
    with httpx.Client(base_url=server.url, timeout=30) as mcp:
        first = round_of(purge(mcp, token))
    return first.url, first.state


def test_wrong_sign_ins_on_two_instances_add_up_to_the_limit(
    instances: tuple[HttpServer, HttpServer, str, str], migrated_engine: Engine
) -> None:
    first, second, alice, bob = instances
    url, state = start_purge(first, alice, migrated_engine)

    with httpx.Client(timeout=30) as browser:
        assert browser.get(url, follow_redirects=False).status_code == 303
        csrf = csrf_of(browser.get(f"{first.url}/approval"))
        at = [first, second, first, second, second]  # MAX_ATTEMPTS of them, the last locks
        typed = wrong_tokens(bob)[:MAX_ATTEMPTS]
        wrong = [sign_in_at(browser, s, csrf, t) for s, t in zip(at, typed, strict=True)]
        right = [sign_in_at(browser, s, csrf, alice) for s in (first, second)]
    with httpx.Client(base_url=second.url, timeout=30) as mcp:
        retry = purge(mcp, alice, answer="accept", state=state)

    assert all(r.status_code == 403 and REFUSED in r.text for r in wrong[:-1])
    assert_locked_page(wrong[-1])
    for response in right:
        assert_locked_page(response)
    assert retry.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert approval_state(migrated_engine) == [(None, MAX_ATTEMPTS)]
    assert purge_audit(migrated_engine) == [("locked", "alice", WS, None, None)]
    assert live_count(migrated_engine) == 1
    logs = first.stderr_text() + second.stderr_text()
    assert not any(token in logs for token in [*wrong_tokens(bob), alice])


def test_concurrent_wrong_sign_ins_on_two_instances_lock_exactly_once(
    instances: tuple[HttpServer, HttpServer, str, str], migrated_engine: Engine
) -> None:
    """Each refusal counts in one atomic UPDATE: of twelve racing wrong sign-ins exactly
    MAX_ATTEMPTS - 1 are plain refusals, the rest see the lock, and it is audited once."""
    first, second, alice, bob = instances
    url, _ = start_purge(first, alice, migrated_engine)

    with httpx.Client(timeout=60, limits=httpx.Limits(max_connections=12)) as browser:
        assert browser.get(url, follow_redirects=False).status_code == 303
        csrf = csrf_of(browser.get(f"{first.url}/approval"))
        targets = [first, second] * 6
        with ThreadPoolExecutor(max_workers=12) as pool:
            answers = list(pool.map(lambda s: sign_in_at(browser, s, csrf, bob), targets))

    refused = [r for r in answers if r.status_code == 403 and REFUSED in r.text]
    locked = [r for r in answers if r.status_code == 403 and LOCKED in r.text]
    assert (len(refused), len(locked)) == (MAX_ATTEMPTS - 1, len(targets) - MAX_ATTEMPTS + 1)
    assert approval_state(migrated_engine) == [(None, MAX_ATTEMPTS)]
    assert purge_audit(migrated_engine) == [("locked", "alice", WS, None, None)]
