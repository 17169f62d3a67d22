"""Roots only narrow (stdio, a real `serve` process): a 2025-11-25 client that declares `roots`
is asked `roots/list` after `initialized` and on `list_changed`; it may then touch only granted
workspaces at or below its roots, and a missing workspaceUri defaults to the one such
workspace. A client that never answers `roots/list` holds the connection only for the roots
wait (`NOTES_SERVER_ROOTS_WAIT`), then is treated as having no usable roots."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from notes_server.security.keyring import KeyRing
from tests.compat_2025.legacy_support import NOTES, LegacyClient
from tests.helpers import ServerProcess, workspace_refusal

SHARED = "file:///srv/shared"
ROOTS_CLIENT: dict[str, Any] = {"elicitation": {}, "roots": {"listChanged": True}}
SHORT_WAIT_S = 0.5
GAVE_UP = "The server stopped waiting for the roots/list answer"


def starter(
    spawn_server: Callable[..., ServerProcess], grant: Callable[..., str], **env: str
) -> Callable[[], LegacyClient]:
    grant("alice", NOTES)
    grant("alice", SHARED)
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec(), **env}
    return lambda: LegacyClient(spawn_server(env=env))


@pytest.fixture
def start(
    spawn_server: Callable[..., ServerProcess], grant: Callable[..., str]
) -> Callable[[], LegacyClient]:
    return starter(spawn_server, grant)


@pytest.fixture
def impatient(
    spawn_server: Callable[..., ServerProcess], grant: Callable[..., str]
) -> Callable[[], LegacyClient]:
    """Servers that wait only SHORT_WAIT_S for a roots/list answer."""
    return starter(spawn_server, grant, NOTES_SERVER_ROOTS_WAIT=str(SHORT_WAIT_S))


def answer_roots(client: LegacyClient, *uris: str) -> None:
    """Read the server's roots/list request and answer it with `uris`."""
    question = client.read()
    assert question["method"] == "roots/list", question
    client.respond(question["id"], {"roots": [{"uri": uri} for uri in uris]})


def with_roots(start: Callable[[], LegacyClient], *uris: str) -> LegacyClient:
    client = start()
    client.initialize(capabilities=ROOTS_CLIENT)
    answer_roots(client, *uris)
    return client


def create(client: LegacyClient, workspace: str | None, title: str) -> dict[str, Any]:
    arguments = (
        {"title": title} if workspace is None else {"workspaceUri": workspace, "title": title}
    )
    return client.request("tools/call", {"name": "notes_create", "arguments": arguments})


def denied(reply: dict[str, Any]) -> bool:
    return workspace_refusal(reply.get("error"))


def created_in(reply: dict[str, Any], workspace: str) -> bool:
    note = reply["result"]["structuredContent"]["note"]
    return bool(note["uri"].startswith(workspace + "/"))


def test_a_root_wider_than_a_grant_opens_only_the_granted_workspace_below_it(
    start: Callable[[], LegacyClient],
) -> None:
    client = with_roots(start, "file:///home/alice")

    inside = create(client, NOTES, "inside")
    outside = create(client, SHARED, "outside")
    defaulted = create(client, None, "defaulted")

    assert created_in(inside, NOTES)
    assert denied(outside)
    assert created_in(defaulted, NOTES)
    # The refusal names only what the roots leave usable: SHARED is granted, but outside them.
    assert outside["error"]["data"] == {"usableWorkspaces": [NOTES]}
    assert outside["error"]["message"].endswith(f"workspaces it can write to: {NOTES}")


def test_roots_disjoint_from_the_grants_open_nothing_and_are_logged(
    start: Callable[[], LegacyClient],
) -> None:
    client = with_roots(start, "file:///tmp/elsewhere")

    named = create(client, NOTES, "named")
    defaulted = create(client, None, "defaulted")
    listed = client.result("resources/list", {})

    assert denied(named)
    assert named["error"]["data"] == {"usableWorkspaces": []}
    assert defaulted["result"]["isError"] is True
    assert "usable workspaces: (none)" in defaulted["result"]["content"][0]["text"]
    assert listed["resources"] == []
    client.process.close()
    assert "ignored client root file:///tmp/elsewhere" in client.process.stderr_text()


def test_a_root_equal_to_a_grant_opens_exactly_that_workspace(
    start: Callable[[], LegacyClient],
) -> None:
    client = with_roots(start, SHARED)

    assert created_in(create(client, SHARED, "shared"), SHARED)
    assert denied(create(client, NOTES, "notes"))
    assert created_in(create(client, None, "defaulted"), SHARED)


def test_changed_roots_are_asked_again_and_replace_the_old_ones(
    start: Callable[[], LegacyClient],
) -> None:
    client = with_roots(start, NOTES)
    assert created_in(create(client, NOTES, "before"), NOTES)

    client.notify("notifications/roots/list_changed")
    answer_roots(client, SHARED)

    assert denied(create(client, NOTES, "after"))
    assert created_in(create(client, SHARED, "after"), SHARED)
    uris = [r["uri"] for r in client.result("resources/list", {})["resources"]]
    assert [uri.startswith(SHARED + "/") for uri in uris] == [True]


def test_several_usable_workspaces_make_a_missing_workspace_a_tool_error_that_lists_them(
    start: Callable[[], LegacyClient],
) -> None:
    client = with_roots(start, NOTES, SHARED)

    reply = create(client, None, "where")

    text = reply["result"]["content"][0]["text"]
    assert reply["result"]["isError"] is True
    assert f"usable workspaces: {NOTES}, {SHARED}." in text


def test_a_client_without_roots_is_not_narrowed_and_must_name_the_workspace(
    start: Callable[[], LegacyClient],
) -> None:
    client = start()
    client.initialize()  # no roots capability: no roots/list is asked

    notes = create(client, NOTES, "notes")
    shared = create(client, SHARED, "shared")
    missing = create(client, None, "missing")

    assert created_in(notes, NOTES)
    assert created_in(shared, SHARED)
    text = missing["result"]["content"][0]["text"]
    assert missing["result"]["isError"] is True
    assert "shares no roots" in text and NOTES in text and SHARED in text


def test_an_empty_roots_list_narrows_nothing(start: Callable[[], LegacyClient]) -> None:
    client = with_roots(start)  # declares roots, lists none (as the Inspector does by default)

    assert created_in(create(client, NOTES, "notes"), NOTES)
    assert created_in(create(client, SHARED, "shared"), SHARED)


def test_a_failed_roots_answer_leaves_nothing_usable(start: Callable[[], LegacyClient]) -> None:
    client = start()
    client.initialize(capabilities=ROOTS_CLIENT)
    question = client.read()
    error = {"code": -32601, "message": "Method not found"}
    client.process.send({"jsonrpc": "2.0", "id": question["id"], "error": error})

    assert denied(create(client, NOTES, "notes"))
    assert denied(create(client, SHARED, "shared"))


def test_tools_list_makes_the_workspace_optional_only_for_a_client_with_roots(
    start: Callable[[], LegacyClient],
) -> None:
    narrowed = with_roots(start, NOTES)
    plain = start()
    plain.initialize()

    create_narrowed = tool_schema(narrowed, "notes_create")
    create_plain = tool_schema(plain, "notes_create")

    assert create_narrowed["required"] == ["title"]
    assert (
        "Optional for this client" in create_narrowed["properties"]["workspaceUri"]["description"]
    )
    assert create_plain["required"] == ["workspaceUri", "title"]
    assert "Optional" not in create_plain["properties"]["workspaceUri"]["description"]


def tool_schema(client: LegacyClient, name: str) -> dict[str, Any]:
    tools = client.result("tools/list", {})["tools"]
    schema: dict[str, Any] = next(t["inputSchema"] for t in tools if t["name"] == name)
    return schema


def test_a_root_with_a_trailing_slash_names_the_same_folder(
    start: Callable[[], LegacyClient],
) -> None:
    client = with_roots(start, NOTES + "/")

    assert created_in(create(client, NOTES, "notes"), NOTES)
    assert denied(create(client, SHARED, "shared"))


def test_the_filesystem_root_narrows_nothing(start: Callable[[], LegacyClient]) -> None:
    client = with_roots(start, "file:///")

    assert created_in(create(client, NOTES, "notes"), NOTES)
    assert created_in(create(client, SHARED, "shared"), SHARED)


def test_a_malformed_root_is_ignored_and_logged(start: Callable[[], LegacyClient]) -> None:
    client = with_roots(start, "file://elsewhere/home/alice", NOTES)

    assert created_in(create(client, NOTES, "notes"), NOTES)
    assert denied(create(client, SHARED, "shared"))
    client.process.close()
    assert "ignored a client root that is not a plain file:/// URI" in client.process.stderr_text()


def test_a_client_that_never_answers_roots_list_is_cancelled_then_served_with_nothing_usable(
    impatient: Callable[[], LegacyClient],
) -> None:
    client = impatient()
    began = time.monotonic()
    client.initialize(capabilities=ROOTS_CLIENT)
    question = client.read()
    listing = client.send("tools/list", {})
    creating = client.call_tool("notes_create", {"workspaceUri": NOTES, "title": "queued"})
    pinging = client.send("ping")
    replies = [client.read() for _ in range(4)]
    served = time.monotonic()

    assert question == {"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"}
    # The ping may be answered during the wait or after it; the rest keep their order.
    assert {"jsonrpc": "2.0", "id": pinging, "result": {}} in replies
    cancelled, listed, created = [r for r in replies if r.get("id") != pinging]
    assert cancelled == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "s-1", "reason": GAVE_UP},
    }
    assert listed["id"] == listing and "notes_create" in {
        t["name"] for t in listed["result"]["tools"]
    }
    assert created["id"] == creating and denied(created)
    assert served - began >= SHORT_WAIT_S


def test_a_late_roots_answer_is_dropped_and_list_changed_asks_again(
    impatient: Callable[[], LegacyClient],
) -> None:
    client = impatient()
    client.initialize(capabilities=ROOTS_CLIENT)
    question = client.read()
    assert client.read()["method"] == "notifications/cancelled"  # the wait ran out

    client.respond(question["id"], {"roots": [{"uri": NOTES}]})
    after_late_answer = create(client, None, "late")
    client.notify("notifications/roots/list_changed")
    answer_roots(client, NOTES)
    after_new_answer = create(client, None, "asked again")

    assert after_late_answer["result"]["isError"] is True
    assert "usable workspaces: (none)" in after_late_answer["result"]["content"][0]["text"]
    assert created_in(after_new_answer, NOTES)
    assert client.process.close() == 0
    log = client.process.stderr_text()
    assert log.count(f"did not answer roots/list within {SHORT_WAIT_S:g} s") == 1
    assert "dropped a response to an unknown or abandoned request" in log


def test_stdin_ending_while_roots_are_asked_serves_what_waited_and_exits(
    start: Callable[[], LegacyClient],
) -> None:
    client = start()  # the default wait (30 s) never runs out here
    client.initialize(capabilities=ROOTS_CLIENT)
    assert client.read()["method"] == "roots/list"
    listing = client.send("tools/list", {})

    assert client.process.close() == 0
    listed = client.read()
    assert listed["id"] == listing and "tools" in listed["result"]
    with pytest.raises(EOFError):
        client.read()
    assert "did not answer roots/list" not in client.process.stderr_text()
