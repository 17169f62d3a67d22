"""notes_purge end to end over HTTP: the MCP rounds on `/mcp` and the person's approval on the
server's own page, both through the composed ASGI app with httpx (Starlette's TestClient)."""

from __future__ import annotations

from typing import Any

import pytest
from http_support import rpc
from purge_support import (
    WS,
    add_note,
    approve,
    purge,
    round_of,
    sign_in,
)
from sqlalchemy import Engine, text
from starlette.testclient import TestClient

from notes_server.app import create_http_app, page_base
from notes_server.config import HttpSettings, Settings
from notes_server.errors import STATE_REJECTED
from notes_server.store import notes
from notes_server.store.engine import read_tx, write_tx
from notes_server.tools.services import Services, utc_now


def live_ids(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(text("SELECT id FROM notes"))}


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
    assert params["mode"] == "url"
    assert "requestedSchema" not in params
    assert params["url"].startswith("http://127.0.0.1:8765/approval?a=" + params["elicitationId"])
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
    later = add_note(migrated_engine, "later.md", "Archived after round 1", archived=True)

    approved = approve(browser, first.url, alice)
    final = round_of(purge(client, alice, answer="accept", state=first.state)).result

    assert approved.status_code == 200 and "Purge approved" in approved.text
    assert final["resultType"] == "complete" and final["isError"] is False
    structured = final["structuredContent"]
    assert structured["purged"] is True and structured["outcome"] == "purged"
    assert sorted(structured["purgedIds"]) == sorted(note.id for note in old)
    assert structured["purgedCount"] == 3 and structured["kept"] == []
    assert live_ids(migrated_engine) == {live.id, later.id}
    assert sorted(audit_outcomes(migrated_engine)) == sorted(("purged", n.id) for n in old)


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


def test_a_note_edited_or_restored_after_round_one_is_kept_and_reported(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine
) -> None:
    gone = add_note(migrated_engine, "gone.md", "Gone", archived=True)
    edited = add_note(migrated_engine, "edited.md", "Edited", archived=True)
    restored = add_note(migrated_engine, "restored.md", "Restored", archived=True)
    first = round_of(purge(client, alice))
    with write_tx(migrated_engine) as conn:
        assert notes.update_fields(conn, edited, now=utc_now(), body="new") is not None
        assert notes.update_fields(conn, restored, now=utc_now(), archived=False) is not None

    assert approve(browser, first.url, alice).status_code == 200
    final = round_of(purge(client, alice, answer="accept", state=first.state)).result

    structured = final["structuredContent"]
    assert structured["purgedIds"] == [gone.id]
    assert sorted((k["noteId"], k["reason"]) for k in structured["kept"]) == sorted(
        [(edited.id, "changed"), (restored.id, "restored")]
    )
    assert live_ids(migrated_engine) == {edited.id, restored.id}


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


@pytest.mark.parametrize("answer", ["decline", "cancel"])
def test_decline_or_cancel_deletes_nothing_and_is_audited(
    client: TestClient, browser: TestClient, alice: str, migrated_engine: Engine, answer: str
) -> None:
    note = add_note(migrated_engine, "old.md", "Old", archived=True)
    first = round_of(purge(client, alice))
    assert approve(browser, first.url, alice).status_code == 200

    final = round_of(purge(client, alice, answer=answer, state=first.state)).result
    after = purge(client, alice, answer="accept", state=first.state)

    outcome = "declined" if answer == "decline" else "cancelled"
    assert final["structuredContent"] == {"purged": False, "outcome": outcome}
    assert audit_outcomes(migrated_engine) == [(outcome, None)]
    assert after.json()["error"] == {"code": -32602, "message": STATE_REJECTED}
    assert live_ids(migrated_engine) == {note.id}


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
