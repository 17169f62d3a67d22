"""A 2025-11-25 host talking to a real `notes-server serve` over stdio: the handshake, plain
requests, and confirmed deletes through server-initiated `elicitation/create` requests."""

from __future__ import annotations

from typing import Any

import pytest

from notes_server.compat_2025.translate import NEEDS_ELICITATION, NOT_INITIALIZED
from tests.compat_2025.legacy_support import NOTES, Legacy, LegacyClient
from tests.helpers import make_request

STRIPPED = {"resultType", "ttlMs", "cacheScope", "_meta"}
TITLE = "TPS report"


def create_note(client: LegacyClient, title: str = TITLE, path: str = "q3/tps.md") -> str:
    result = client.tool("notes_create", {"workspaceUri": NOTES, "title": title, "path": path})
    assert result["isError"] is False
    note_id: str = result["structuredContent"]["note"]["id"]
    return note_id


def search_ids(client: LegacyClient) -> list[str]:
    result = client.tool("notes_search", {"workspaceUri": NOTES})
    return [hit["id"] for hit in result["structuredContent"]["notes"]]


def start_delete(client: LegacyClient) -> tuple[int, dict[str, Any]]:
    """Send notes_delete and return its id and the server's elicitation/create request."""
    call_id = client.call_tool("notes_delete", {"workspaceUri": NOTES, "title": TITLE})
    asked = client.read()
    assert asked["method"] == "elicitation/create"
    return call_id, asked


def final_reply(client: LegacyClient, call_id: int) -> dict[str, Any]:
    reply = client.read()
    assert reply["id"] == call_id
    assert STRIPPED.isdisjoint(reply["result"])
    result: dict[str, Any] = reply["result"]
    return result


# --- handshake ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_initialize_negotiates_a_legacy_version(
    legacy: Legacy, requested: str, negotiated: str
) -> None:
    result = legacy().initialize(requested)

    assert set(result) == {"protocolVersion", "capabilities", "serverInfo", "instructions"}
    assert result["protocolVersion"] == negotiated
    assert result["capabilities"] == {
        "tools": {},
        "resources": {"subscribe": True, "listChanged": True},  # stdio sessions subscribe
        "prompts": {},
        "logging": {},
        "completions": {},
    }
    assert result["serverInfo"]["name"] == "notes-server"
    assert "workspaceUri" in result["instructions"]


def test_initialize_with_modern_meta_is_method_not_found(legacy: Legacy) -> None:
    client = legacy()
    client.process.send(make_request("initialize", {"protocolVersion": "2025-11-25"}, id=7))

    reply = client.read()

    assert reply["id"] == 7
    assert reply["error"]["code"] == -32601


def test_a_legacy_request_before_initialize_is_invalid_params_with_a_hint(
    legacy: Legacy,
) -> None:
    error = legacy().request("tools/list")["error"]

    assert error == {"code": -32602, "message": NOT_INITIALIZED}


def test_initialize_without_a_protocol_version_is_invalid_params(legacy: Legacy) -> None:
    client = legacy()

    assert client.request("initialize", {"capabilities": {}})["error"]["code"] == -32602
    assert client.request("ping")["error"]["code"] == -32602  # still no session


# --- plain requests ----------------------------------------------------------------------


def test_ping_is_answered_with_an_empty_result(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()

    assert client.result("ping") == {}


def test_tools_list_has_no_modern_only_fields(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()

    result = client.result("tools/list")

    assert set(result) == {"tools"}
    names = [tool["name"] for tool in result["tools"]]
    assert {"notes_create", "notes_search", "notes_delete"} <= set(names)
    for tool in result["tools"]:
        assert tool.get("outputSchema", {"type": "object"})["type"] == "object"


def test_create_then_search_finds_the_note(legacy: Legacy) -> None:
    client = legacy()
    client.initialize("2025-06-18")

    note_id = create_note(client)

    assert search_ids(client) == [note_id]


def test_a_missing_resource_is_the_legacy_not_found_code(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()

    error = client.request("resources/read", {"uri": f"{NOTES}/nope.md"})["error"]

    assert error["code"] == -32002
    assert error["data"] == {"uri": f"{NOTES}/nope.md"}


def test_methods_outside_the_adapter_are_method_not_found(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()

    for method in ("server/discover", "subscriptions/listen", "tasks/list"):
        assert client.request(method, {})["error"]["code"] == -32601


# --- confirmed delete through server-initiated elicitation -------------------------------


def test_an_accepted_delete_asks_the_host_and_removes_the_note(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()
    note_id = create_note(client)

    call_id, asked = start_delete(client)
    params = asked["params"]
    assert asked["id"] == "s-1"
    assert params["mode"] == "form"
    assert [c["const"] for c in params["requestedSchema"]["properties"]["note_id"]["oneOf"]] == [
        note_id
    ]
    client.respond(
        asked["id"], {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
    )
    result = final_reply(client, call_id)

    assert result["isError"] is False
    assert result["structuredContent"]["deleted"] is True
    assert result["structuredContent"]["noteId"] == note_id
    assert search_ids(client) == []


def test_a_2025_06_18_host_gets_plain_enum_choices_without_mode(legacy: Legacy) -> None:
    client = legacy()
    client.initialize("2025-06-18")
    note_id = create_note(client)

    call_id, asked = start_delete(client)
    choice = asked["params"]["requestedSchema"]["properties"]["note_id"]
    assert "mode" not in asked["params"]
    assert choice["enum"] == [note_id]
    assert choice["enumNames"][0].startswith(TITLE)
    client.respond(
        asked["id"], {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
    )

    assert final_reply(client, call_id)["structuredContent"]["deleted"] is True


def test_a_declined_delete_keeps_the_note(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()
    note_id = create_note(client)

    call_id, asked = start_delete(client)
    client.respond(asked["id"], {"action": "decline"})
    result = final_reply(client, call_id)

    assert result["structuredContent"] == {"deleted": False, "outcome": "declined"}
    assert search_ids(client) == [note_id]


def test_an_error_answer_to_the_elicitation_counts_as_cancel(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()
    note_id = create_note(client)

    call_id, asked = start_delete(client)
    client.process.send(
        {"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32603, "message": "UI crashed"}}
    )
    result = final_reply(client, call_id)

    assert result["structuredContent"] == {"deleted": False, "outcome": "cancelled"}
    assert search_ids(client) == [note_id]


@pytest.mark.parametrize("capabilities", [{}, {"elicitation": {"url": {}}}])
def test_a_host_without_form_elicitation_gets_an_explanatory_tool_error(
    legacy: Legacy, capabilities: dict[str, Any]
) -> None:
    client = legacy()
    client.initialize(capabilities=capabilities)
    note_id = create_note(client)

    result = client.tool("notes_delete", {"workspaceUri": NOTES, "title": TITLE})

    assert result == {"content": [{"type": "text", "text": NEEDS_ELICITATION}], "isError": True}
    assert search_ids(client) == [note_id]


def test_a_ping_while_waiting_is_answered_at_once_and_requests_wait_their_turn(
    legacy: Legacy,
) -> None:
    client = legacy()
    client.initialize()
    note_id = create_note(client)

    call_id, asked = start_delete(client)
    list_id = client.send("tools/list")
    ping_id = client.send("ping")
    assert client.read() == {"jsonrpc": "2.0", "id": ping_id, "result": {}}
    client.respond(
        asked["id"], {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
    )

    assert final_reply(client, call_id)["structuredContent"]["deleted"] is True
    assert client.read()["id"] == list_id


def test_cancelling_the_call_while_waiting_withdraws_the_question(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()
    note_id = create_note(client)

    call_id, asked = start_delete(client)
    client.notify("notifications/cancelled", {"requestId": call_id, "reason": "user left"})

    withdrawn = client.read()
    assert withdrawn["method"] == "notifications/cancelled"
    assert withdrawn["params"]["requestId"] == asked["id"]
    assert "id" not in withdrawn
    client.respond(
        asked["id"], {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
    )
    assert client.result("ping") == {}  # the late answer was dropped, the call never answered
    assert search_ids(client) == [note_id]


# --- both eras on one connection ---------------------------------------------------------


def test_modern_requests_stay_stateless_after_a_legacy_initialize(legacy: Legacy) -> None:
    client = legacy()
    client.initialize()

    listed = client.process.request("tools/list", id="m1")
    delete = client.process.request(
        "tools/call",
        {"name": "notes_delete", "arguments": {"workspaceUri": NOTES, "title": TITLE}},
        id="m2",
    )

    assert listed["result"]["resultType"] == "complete"
    assert listed["result"]["cacheScope"] == "private"  # it follows the Apps capability
    # the modern request declares no capabilities; the legacy session's are not borrowed
    assert delete["error"]["code"] == -32021
    assert client.result("ping") == {}
