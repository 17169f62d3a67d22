"""State-key rotation across instances sharing one database (in the PostgreSQL run, one
PostgreSQL database): with the new key first on every instance, states sealed with the old key
before the switch are still answered; once the old key is dropped, they are refused with
-32602 and states sealed with the new key keep working on every instance."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine

from notes_server.app import create_server
from notes_server.config import Settings
from notes_server.protocol.server import McpServer
from notes_server.security.keyring import KeyRing
from notes_server.tools.services import Services
from tests.helpers import make_request

WS = "file:///home/alice/notes"
FORM = {"elicitation": {"form": {}}}
INVALID_PARAMS = -32602


def instance(settings: Settings, engine: Engine, keys: str) -> McpServer:
    rotated = dataclasses.replace(settings, state_keys=keys)
    return create_server(rotated, Services(rotated, engine=engine))


def call(server: McpServer, name: str, arguments: dict[str, Any], **mrtr: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments, **mrtr}
    raw = server.handle_raw(
        json.dumps(make_request("tools/call", params, caps=FORM)).encode(), "alice"
    )
    assert raw is not None
    reply: dict[str, Any] = json.loads(raw)
    return reply


def ask(server: McpServer, title: str) -> tuple[str, str]:
    """Create a note titled `title` and run round 1 of its delete: (note id, requestState)."""
    created = call(
        server, "notes_create", {"workspaceUri": WS, "title": title, "path": f"{title}.md"}
    )
    assert created["result"]["isError"] is False, created
    result = call(server, "notes_delete", {"workspaceUri": WS, "title": title})["result"]
    form = result["inputRequests"]["delete_choice"]["params"]["requestedSchema"]
    return form["properties"]["note_id"]["oneOf"][0]["const"], result["requestState"]


def confirm(server: McpServer, title: str, note_id: str, state: str) -> dict[str, Any]:
    answer = {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
    return call(
        server,
        "notes_delete",
        {"workspaceUri": WS, "title": title},
        inputResponses={"delete_choice": answer},
        requestState=state,
    )


def test_state_keys_rotate_across_instances_without_losing_a_confirmation(
    settings: Settings, migrated_engine: Engine, grant: Callable[..., str]
) -> None:
    grant("alice", WS)
    old, new = KeyRing.generate_spec(), KeyRing.generate_spec()
    a, b = (instance(settings, migrated_engine, old) for _ in range(2))
    before = ask(a, "before")
    # Step 1: every instance restarts with the new key first, the old one still listed.
    a, b = (instance(settings, migrated_engine, f"{new},{old}") for _ in range(2))
    assert confirm(b, "before", *before)["result"]["structuredContent"]["deleted"] is True
    pending_old = ask(instance(settings, migrated_engine, old), "stale")
    during = ask(a, "during")
    # Step 2, after the TTL: the old key is dropped everywhere.
    a, b = (instance(settings, migrated_engine, new) for _ in range(2))
    refused = confirm(a, "stale", *pending_old)
    assert refused["error"]["code"] == INVALID_PARAMS, refused
    assert refused["error"]["message"] == "Invalid or expired requestState"
    assert confirm(b, "during", *during)["result"]["structuredContent"]["deleted"] is True
