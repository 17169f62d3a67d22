"""notes_purge over stdio, in a real `serve` process under its default sandbox: the approval
page is served by a loopback-only listener the server started for the approval, and the person
signs in with the one-time code the server printed on its stderr."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import Engine, text

from tests.approval.purge_support import (
    URL_CAPS,
    WS,
    add_note,
    approval_of,
    approve_with_code,
    code_for,
    csrf_of,
    form_post,
    open_link,
)
from tests.helpers import ServerProcess


def call_purge(server: ServerProcess, **extra: Any) -> dict[str, Any]:
    params = {"name": "notes_purge", "arguments": {"workspaceUri": WS}, **extra}
    reply: dict[str, Any] = server.request("tools/call", params, caps=URL_CAPS)
    return reply


@pytest.fixture
def server(
    spawn_server: Callable[..., ServerProcess],
    migrated_engine: Engine,
    grant: Callable[..., str],
) -> ServerProcess:
    grant("alice", WS)
    return spawn_server()


def test_a_stdio_purge_is_approved_on_a_loopback_page_with_the_code_from_stderr(
    server: ServerProcess, migrated_engine: Engine
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = call_purge(server)["result"]
    params = first["inputRequests"]["purge_approval"]["params"]
    url = urlsplit(params["url"])
    assert url.scheme == "http" and url.hostname == "127.0.0.1" and url.path == "/approval"

    with httpx.Client(base_url=f"http://127.0.0.1:{url.port}", timeout=30) as browser:
        assert open_link(browser, params["url"]).status_code == 303
        code = code_for(server, approval_of(params["url"]))
        login = browser.get("/approval")
        assert 'name="token"' in login.text and "nst_" not in login.text
        signed = form_post(browser, {"csrf": csrf_of(login), "token": code})
        assert signed.status_code == 303, signed.text
        page = browser.get("/approval")
        assert "Old" in page.text and "<code>garden</code>" in page.text
        done = form_post(browser, {"csrf": csrf_of(page), "confirm": "garden"})
        assert done.status_code == 200 and "Purge approved" in done.text

    answer = {"purge_approval": {"action": "accept"}}
    final = call_purge(server, requestState=first["requestState"], inputResponses=answer)

    assert final["result"]["structuredContent"]["purgedIds"] == [old.id]
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0
    assert code not in "".join(line.decode() for line in server.transcript)  # never on stdout


def test_a_wrong_code_is_refused_and_five_lock_the_approval(
    server: ServerProcess, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    params = call_purge(server)["result"]["inputRequests"]["purge_approval"]["params"]
    origin = f"http://127.0.0.1:{urlsplit(params['url']).port}"

    with httpx.Client(base_url=origin, timeout=30) as browser:
        open_link(browser, params["url"])
        code = code_for(server, approval_of(params["url"]))
        csrf = csrf_of(browser.get("/approval"))
        wrong = [form_post(browser, {"csrf": csrf, "token": "AAAAA-AAAAA"}) for _ in range(5)]
        late = form_post(browser, {"csrf": csrf, "token": code})

    assert all(r.status_code == 403 and "not the approval code" in r.text for r in wrong[:4])
    for locked in (wrong[4], late):
        assert locked.status_code == 403 and "locked after too many wrong sign-ins" in locked.text
    with migrated_engine.connect() as conn:
        query = text("SELECT outcome FROM audit_log WHERE tool = 'notes_purge'")
        assert conn.execute(query).scalars().all() == ["locked"]


def test_the_listener_refuses_a_foreign_host_header(
    server: ServerProcess, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    params = call_purge(server)["result"]["inputRequests"]["purge_approval"]["params"]
    port = urlsplit(params["url"]).port

    rebinding = httpx.get(
        f"http://127.0.0.1:{port}/approval", headers={"Host": "evil.test"}, timeout=30
    )

    assert rebinding.status_code == 403


def test_the_listener_takes_form_posts_only_from_its_own_origin(
    server: ServerProcess, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    params = call_purge(server)["result"]["inputRequests"]["purge_approval"]["params"]
    origin = f"http://127.0.0.1:{urlsplit(params['url']).port}"

    with httpx.Client(base_url=origin, timeout=30) as browser:
        assert open_link(browser, params["url"]).status_code == 303
        code = code_for(server, approval_of(params["url"]))
        csrf = csrf_of(browser.get("/approval"))
        forged = browser.post(
            "/approval",
            data={"csrf": csrf, "token": code},
            headers={"Origin": "http://localhost:3000"},
        )
        own = form_post(browser, {"csrf": csrf, "token": code})

    assert forged.status_code == 403
    assert own.status_code == 303


def test_a_stdio_cancel_leaves_the_approval_open_and_a_later_accept_purges(
    server: ServerProcess, migrated_engine: Engine
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = call_purge(server)["result"]
    state = first["requestState"]
    url = first["inputRequests"]["purge_approval"]["params"]["url"]

    cancel = {"purge_approval": {"action": "cancel"}}
    cancelled = call_purge(server, requestState=state, inputResponses=cancel)
    assert approve_with_code(server, url).status_code == 200
    accept = {"purge_approval": {"action": "accept"}}
    final = call_purge(server, requestState=state, inputResponses=accept)

    assert cancelled["result"]["structuredContent"] == {"purged": False, "outcome": "cancelled"}
    assert final["result"]["structuredContent"]["purgedIds"] == [old.id]
    with migrated_engine.connect() as conn:
        query = text("SELECT outcome FROM audit_log WHERE tool = 'notes_purge' ORDER BY id")
        assert list(conn.execute(query).scalars()) == ["cancelled", "purged"]
