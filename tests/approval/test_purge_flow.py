"""notes_purge end to end over HTTP: the MCP rounds on `/mcp` and the person's approval on the
server's own page, both through the composed ASGI app with httpx (Starlette's TestClient)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.app import create_http_app, page_base
from notes_server.config import HttpSettings, Settings
from notes_server.errors import STATE_REJECTED
from notes_server.store import notes
from notes_server.store.engine import read_tx, write_tx
from notes_server.tools.services import Services, utc_now
from tests.approval.purge_support import (
    WS,
    add_note,
    approve,
    purge,
    round_of,
    sign_in,
)
from tests.transports.http_support import rpc


def live_ids(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(text("SELECT id FROM notes"))}


def pending_approvals(engine: Engine) -> int:
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM purge_approvals")).scalar()
    assert isinstance(count, int)
    return count


def audit_outcomes(engine: Engine) -> list[tuple[str, str | None]]:
    with engine.connect() as conn:
        query = text(
            "SELECT outcome, note_id FROM audit_log WHERE tool = 'notes_purge' ORDER BY id"
        )
        return [(row[0], row[1]) for row in conn.execute(query)]


@pytest.mark.parametrize(
    "caps",
    [None, {}, {"elicitation": {}}, {"elicitation": {"form": {}}}],
    ids=["none", "empty-capabilities", "elicitation-empty-means-form", "form-only"],
)
def test_purge_without_url_elicitation_is_32021_naming_url_mode(
    client: TestClient, alice: str, migrated_engine: Engine, caps: dict[str, Any] | None
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)

    response = purge(client, alice, caps=caps)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    assert live_ids(migrated_engine) != set()  # nothing deleted, no form fallback
    assert "result" not in response.json()


@pytest.mark.parametrize(
    "caps",
    [{"elicitation": {"url": {}}}, {"elicitation": {"form": {}, "url": {}}}],
    ids=["url-only", "form-and-url"],
)
def test_round_one_is_a_url_elicitation_for_the_servers_own_page(
    client: TestClient, alice: str, migrated_engine: Engine, caps: dict[str, Any]
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    add_note(migrated_engine, "live.md", "Live", archived=False)

    result = round_of(purge(client, alice, caps=caps)).result

    assert result["resultType"] == "input_required"
    assert set(result["inputRequests"]) == {"purge_approval"}
    request = result["inputRequests"]["purge_approval"]
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert set(params) == {"mode", "message", "url"}  # 2026-07-28: no elicitationId
    assert params["mode"] == "url"
    assert params["url"].startswith("http://127.0.0.1:8765/approval?a=pa-")
    assert "1 archived note" in params["message"] and WS in params["message"]
    assert isinstance(result["requestState"], str) and result["requestState"]


def test_nothing_archived_is_a_tool_error_and_asks_nothing(
    client: TestClient, alice: str, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "live.md", "Live", archived=False)

    result = round_of(purge(client, alice)).result

    assert result["resultType"] == "complete" and result["isError"] is True
    assert "nothing to purge" in result["content"][0]["text"]


def test_approval_then_accept_purges_exactly_the_bound_set(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    old = [add_note(migrated_engine, f"old{i}.md", f"Old {i}", archived=True) for i in range(3)]
    live = add_note(migrated_engine, "live.md", "Live", archived=False)
    first = round_of(purge(client, alice))

    approved = approve(browser, first.url, alice)
    final = round_of(purge(client, alice, answer="accept", state=first.state)).result

    assert approved.status_code == 200 and "Purge approved" in approved.text
    assert final["resultType"] == "complete" and final["isError"] is False
    structured = final["structuredContent"]
    assert structured["purged"] is True and structured["outcome"] == "purged"
    assert sorted(structured["purgedIds"]) == sorted(note.id for note in old)
    assert structured["purgedCount"] == 3
    assert live_ids(migrated_engine) == {live.id}
    assert sorted(audit_outcomes(migrated_engine)) == sorted(("purged", n.id) for n in old)
    with read_tx(migrated_engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM purge_approvals")).scalar() == 0


def test_accept_before_the_page_is_completed_asks_again_with_the_same_url(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    note = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))

    again = round_of(purge(client, alice, answer="accept", state=first.state))
    signed_in_only = sign_in(browser, first.url, alice)
    still = round_of(purge(client, alice, answer="accept", state=again.state))

    assert again.result["resultType"] == "input_required" and again.url == first.url
    assert signed_in_only.status_code == 303
    assert still.result["resultType"] == "input_required" and still.url == first.url
    assert live_ids(migrated_engine) == {note.id}


CHANGES = {
    "newly-archived": '1 newly archived ("Later")',
    "restored": '1 restored ("Other")',
    "deleted": '1 deleted ("Other")',
    "edited": '1 edited ("Other")',
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_changed_archived_set_deletes_nothing_and_asks_again_saying_what_changed(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine, case: str
) -> None:
    kept = add_note(migrated_engine, "kept.md", "Kept", archived=True)
    other = add_note(migrated_engine, "other.md", "Other", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200
    later = add_note(migrated_engine, "later.md", "Later", archived=case == "newly-archived")
    with write_tx(migrated_engine) as conn:
        if case == "restored":
            assert notes.update_fields(conn, other, now=utc_now(), archived=False) is not None
        elif case == "deleted":
            assert notes.delete_note(conn, other)
        else:
            assert notes.update_fields(conn, other, now=utc_now(), body="new") is not None
    before = live_ids(migrated_engine)

    again = round_of(purge(client, alice, answer="accept", state=first.state))
    replay = purge(client, alice, answer="accept", state=first.state)

    assert live_ids(migrated_engine) == before  # nothing deleted
    assert again.result["resultType"] == "input_required"
    params = again.result["inputRequests"]["purge_approval"]["params"]
    assert params["mode"] == "url" and again.url != first.url  # a fresh approval
    assert CHANGES[case] in params["message"] and "Nothing was deleted" in params["message"]
    left = 1 if case in ("restored", "deleted") else 2
    assert f"Permanently delete {left + (case == 'newly-archived')} archived" in params["message"]
    assert replay.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert audit_outcomes(migrated_engine) == [("changed", None)]
    with read_tx(migrated_engine) as conn:  # the old approval is retired, the new one pending
        pending = conn.execute(text("SELECT count(*) FROM purge_approvals")).scalar()
    assert pending == 1
    assert kept.id in live_ids(migrated_engine)
    assert later.id in live_ids(migrated_engine)


def test_the_fresh_approval_after_a_change_purges_the_new_set(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200
    add_note(migrated_engine, "later.md", "Later", archived=True)
    again = round_of(purge(client, alice, answer="accept", state=first.state))

    second_browser = TestClient(client.app, base_url=str(client.base_url))
    assert approve(second_browser, again.url, alice).status_code == 200
    final = round_of(purge(client, alice, answer="accept", state=again.state)).result

    assert final["structuredContent"]["purgedCount"] == 2
    assert live_ids(migrated_engine) == set()


def test_a_set_emptied_after_approval_is_a_tool_error_and_deletes_nothing(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    note = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200
    with write_tx(migrated_engine) as conn:
        assert notes.update_fields(conn, note, now=utc_now(), archived=False) is not None

    final = round_of(purge(client, alice, answer="accept", state=first.state)).result

    assert final["isError"] is True
    assert final["content"][0]["text"] == (
        'The archived notes changed since the approval: 1 restored ("Old"). Nothing was '
        "deleted. No archived notes are left to purge."
    )
    assert live_ids(migrated_engine) == {note.id}


def test_a_replayed_accept_is_refused_and_deletes_nothing_more(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200
    assert (
        round_of(purge(client, alice, answer="accept", state=first.state)).result["isError"]
        is False
    )
    newer = add_note(migrated_engine, "newer.md", "Newer", archived=True)

    replay = purge(client, alice, answer="accept", state=first.state)

    assert replay.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert live_ids(migrated_engine) == {newer.id}


def test_decline_deletes_nothing_is_audited_and_retires_the_approval(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    note = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200

    final = round_of(purge(client, alice, answer="decline", state=first.state)).result
    after = purge(client, alice, answer="accept", state=first.state)

    assert final["structuredContent"] == {"purged": False, "outcome": "declined"}
    assert audit_outcomes(migrated_engine) == [("declined", None)]
    assert after.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert live_ids(migrated_engine) == {note.id}
    assert pending_approvals(migrated_engine) == 0


def test_cancel_deletes_nothing_is_audited_and_leaves_the_approval_retryable(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    note = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))

    cancelled = round_of(purge(client, alice, answer="cancel", state=first.state)).result
    kept = pending_approvals(migrated_engine)
    assert approve(browser, first.url, alice).status_code == 200  # the page still works
    again = round_of(purge(client, alice, answer="cancel", state=first.state)).result
    final = round_of(purge(client, alice, answer="accept", state=first.state)).result
    replay = purge(client, alice, answer="cancel", state=first.state)

    assert cancelled["structuredContent"] == {"purged": False, "outcome": "cancelled"}
    assert again["structuredContent"] == {"purged": False, "outcome": "cancelled"}
    assert kept == 1
    assert final["structuredContent"]["purgedIds"] == [note.id]
    assert replay.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert audit_outcomes(migrated_engine) == [
        ("cancelled", None),
        ("cancelled", None),
        ("purged", note.id),
    ]
    assert live_ids(migrated_engine) == set()


def test_another_principal_cannot_use_the_state(
    client: TestClient, alice: str, bob: str, migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))

    stolen = purge(client, bob, answer="accept", state=first.state)

    assert stolen.json()["error"] == {"code": -32602, "message": STATE_REJECTED}


def test_a_grant_revoked_after_approval_purges_nothing(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    note = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200
    with write_tx(migrated_engine) as conn:
        conn.execute(text("DELETE FROM workspace_grants WHERE principal = 'alice'"))

    final = purge(client, alice, answer="accept", state=first.state)

    assert final.json()["error"]["code"] == -32602
    assert live_ids(migrated_engine) == {note.id}
    with read_tx(migrated_engine) as conn:
        assert conn.execute(text("SELECT count(*) FROM consumed_nonces")).scalar() == 0


@pytest.mark.parametrize(
    ("http", "served"),
    [
        (HttpSettings(port=0, auth="none"), None),
        (HttpSettings(port=0, auth="none", public_url="https://n.example/"), "https://n.example"),
        (HttpSettings(host="::1", port=9000, auth="none"), "http://[::1]:9000"),
    ],
    ids=["port-0-unknown", "public-url", "ipv6"],
)
def test_the_approval_page_is_linked_only_where_it_is_reachable(
    settings: Settings, services: Services, http: HttpSettings, served: str | None
) -> None:
    app = create_http_app(settings, http, Services(settings, engine=services.engine))
    body, headers = rpc("tools/list")
    with TestClient(app, base_url="http://127.0.0.1:8765") as probe:
        listed = probe.post("/mcp", content=body, headers=headers).json()["result"]["tools"]

    assert ("notes_purge" in [tool["name"] for tool in listed]) == (served is not None)
    assert page_base(http) == served
