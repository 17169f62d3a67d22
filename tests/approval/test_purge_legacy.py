"""notes_purge for 2025-11-25 hosts through the legacy adapter, with real server processes: the
host gets a server-initiated `elicitation/create` in URL mode (with `elicitationId`), accepts
it, and the call finishes once the person completed the page, announced first by
`notifications/elicitation/complete`. Over HTTP the page and the answer are served by another
instance than the one holding the call's SSE stream: only the database links them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.security.keyring import KeyRing
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.approval.purge_support import WS, add_note, approve, approve_with_code, open_link
from tests.compat_2025.legacy_support import LegacyClient
from tests.helpers import ServerProcess, free_port
from tests.transports.http_support import HttpServer, LegacyHttpHost, server_instances

URL_CLIENT: dict[str, Any] = {"elicitation": {"url": {}}}
PURGE = {"name": "notes_purge", "arguments": {"workspaceUri": WS}}


def open_approvals_and_audit(engine: Engine) -> tuple[int, list[str]]:
    """How many approvals are still open, and the purge's audited outcomes in order."""
    with engine.connect() as conn:
        pending = conn.execute(text("SELECT count(*) FROM purge_approvals")).scalar()
        query = text("SELECT outcome FROM audit_log WHERE tool = 'notes_purge' ORDER BY id")
        audited = list(conn.execute(query).scalars())
    assert isinstance(pending, int)
    return pending, audited


def note_count(engine: Engine) -> int:
    with engine.connect() as conn:
        count = conn.execute(text("SELECT count(*) FROM notes")).scalar()
    assert isinstance(count, int)
    return count


@pytest.fixture
def legacy_stdio(
    spawn_server: Callable[..., ServerProcess], grant: Callable[..., str]
) -> Callable[[], LegacyClient]:
    grant("alice", WS)
    return lambda: LegacyClient(spawn_server())


def assert_url_elicitation(request: dict[str, Any]) -> dict[str, Any]:
    """The 2025-11-25 URL-mode shape; returns its params."""
    assert request["method"] == "elicitation/create" and isinstance(request["id"], str)
    params: dict[str, Any] = request["params"]
    assert set(params) == {"mode", "message", "url", "elicitationId"}
    assert params["mode"] == "url" and "/approval?a=pa-" in params["url"]
    assert isinstance(params["elicitationId"], str) and params["elicitationId"]
    return params


def test_a_legacy_stdio_host_accepts_the_url_then_gets_complete_and_the_purge(
    legacy_stdio: Callable[[], LegacyClient], migrated_engine: Engine
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    host = legacy_stdio()
    host.initialize(capabilities=URL_CLIENT)
    call = host.call_tool("notes_purge", {"workspaceUri": WS})
    asked = host.read()
    params = assert_url_elicitation(asked)

    host.respond(asked["id"], {"action": "accept"})
    assert approve_with_code(host.process, params["url"]).status_code == 200
    complete = host.read()
    reply = host.read()

    assert complete == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": params["elicitationId"]},
    }
    assert reply["id"] == call
    result = reply["result"]
    assert "resultType" not in result and result["isError"] is False
    assert result["structuredContent"]["purgedIds"] == [old.id]
    assert note_count(migrated_engine) == 0


def test_a_legacy_stdio_host_that_declines_the_url_purges_nothing(
    legacy_stdio: Callable[[], LegacyClient], migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    host = legacy_stdio()
    host.initialize(capabilities=URL_CLIENT)
    call = host.call_tool("notes_purge", {"workspaceUri": WS})
    asked = host.read()

    host.respond(asked["id"], {"action": "decline"})
    reply = host.read()

    assert reply["id"] == call  # no completion notification: the page was not done
    assert reply["result"]["structuredContent"] == {"purged": False, "outcome": "declined"}
    assert note_count(migrated_engine) == 1


def test_a_legacy_stdio_host_answering_cancel_stops_and_leaves_the_approval_open(
    legacy_stdio: Callable[[], LegacyClient], migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    host = legacy_stdio()
    host.initialize(capabilities=URL_CLIENT)
    call = host.call_tool("notes_purge", {"workspaceUri": WS})
    asked = host.read()
    params = assert_url_elicitation(asked)

    host.respond(asked["id"], {"action": "cancel"})
    reply = host.read()

    assert reply["id"] == call
    assert reply["result"]["structuredContent"] == {"purged": False, "outcome": "cancelled"}
    assert note_count(migrated_engine) == 1
    assert open_approvals_and_audit(migrated_engine) == (1, ["cancelled"])
    origin = params["url"].split("/approval", 1)[0]
    with httpx.Client(base_url=origin, timeout=30) as browser:
        assert open_link(browser, params["url"]).status_code == 303  # the page still opens


def test_a_legacy_stdio_host_cancelling_while_on_the_page_gets_no_result_and_nothing_is_purged(
    legacy_stdio: Callable[[], LegacyClient], migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    host = legacy_stdio()
    host.initialize(capabilities=URL_CLIENT)
    call = host.call_tool("notes_purge", {"workspaceUri": WS})
    asked = host.read()
    host.respond(asked["id"], {"action": "accept"})

    host.notify("notifications/cancelled", {"requestId": call, "reason": "user gave up"})
    pong = host.request("ping")  # answered next: the cancelled call got no reply at all

    assert pong["result"] == {}
    assert note_count(migrated_engine) == 1


@pytest.mark.parametrize(
    ("version", "capabilities"),
    [
        ("2025-11-25", {"elicitation": {}}),
        ("2025-11-25", {"elicitation": {"form": {}}}),
        ("2025-11-25", {}),
        ("2025-06-18", {"elicitation": {"url": {}}}),  # no URL mode before 2025-11-25
    ],
    ids=["elicitation-empty", "form-only", "none", "2025-06-18-claiming-url"],
)
def test_a_legacy_host_without_url_elicitation_gets_a_clear_refusal(
    legacy_stdio: Callable[[], LegacyClient],
    migrated_engine: Engine,
    version: str,
    capabilities: dict[str, Any],
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    host = legacy_stdio()
    host.initialize(version, capabilities)

    result = host.tool("notes_purge", {"workspaceUri": WS})

    assert result["isError"] is True
    text_block = result["content"][0]["text"]
    assert "does not support URL-mode elicitation" in text_block
    assert "nothing was changed" in text_block
    assert note_count(migrated_engine) == 1


# -- HTTP: two instances sharing one database --------------------------------------------------


@pytest.fixture
def instances(
    tmp_path: Path, migrated_engine: Engine, grant: Callable[..., str]
) -> Iterator[tuple[HttpServer, HttpServer, str]]:
    grant("alice", WS)
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    env = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
    url = str(migrated_engine.url)
    # The approval URL names the bound port, so ports are chosen here (not `--port 0`).
    ports = lambda: ("--port", str(free_port()))  # noqa: E731
    with server_instances(tmp_path, url, env=env, own_args=ports) as (first, second):
        yield first, second, token


class Host(LegacyHttpHost):
    """A 2025-11-25 HTTP host that declared URL elicitation."""

    def __init__(self, token: str) -> None:
        super().__init__(token, URL_CLIENT, name="purge-legacy-test")


def events(stream: httpx.Response) -> Iterator[dict[str, Any]]:
    data: list[str] = []
    for line in stream.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def test_a_legacy_http_host_gets_complete_on_its_stream_when_another_instance_served_the_page(
    instances: tuple[HttpServer, HttpServer, str], migrated_engine: Engine
) -> None:
    first, second, token = instances
    old = [add_note(migrated_engine, f"o{i}.md", f"Old {i}", archived=True) for i in range(2)]
    host = Host(token)
    host.initialize(first)
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": PURGE}

    with host.http.stream("POST", f"{first.url}/mcp", json=call, headers=host.headers()) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        received = events(stream)
        asked = next(received)
        params = assert_url_elicitation(asked)
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
        assert host.post(second, answer).status_code == 202
        with httpx.Client(base_url=second.url, timeout=30) as browser:
            assert approve(browser, params["url"], token).status_code == 200
        complete = next(received)
        final = next(received)

    assert complete["method"] == "notifications/elicitation/complete"
    assert complete["params"] == {"elicitationId": params["elicitationId"]}
    assert final["id"] == 7 and final["result"]["isError"] is False
    assert sorted(final["result"]["structuredContent"]["purgedIds"]) == sorted(n.id for n in old)
    assert note_count(migrated_engine) == 0
    host.http.close()


def test_a_legacy_http_purge_cancelled_while_on_the_page_ends_without_purging(
    instances: tuple[HttpServer, HttpServer, str], migrated_engine: Engine
) -> None:
    first, second, token = instances
    add_note(migrated_engine, "old.md", "Old", archived=True)
    host = Host(token)
    host.initialize(first)
    call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": PURGE}

    with host.http.stream("POST", f"{first.url}/mcp", json=call, headers=host.headers()) as stream:
        received = events(stream)
        asked = next(received)
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
        assert host.post(second, answer).status_code == 202
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}
        assert host.post(second, cancel).status_code == 202
        rest = list(received)

    assert rest == []  # the stream ended without a result
    assert note_count(migrated_engine) == 1
    host.http.close()


def test_a_legacy_http_host_answering_cancel_stops_and_leaves_the_approval_open(
    instances: tuple[HttpServer, HttpServer, str], migrated_engine: Engine
) -> None:
    first, second, token = instances
    add_note(migrated_engine, "old.md", "Old", archived=True)
    host = Host(token)
    host.initialize(first)
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": PURGE}

    with host.http.stream("POST", f"{first.url}/mcp", json=call, headers=host.headers()) as stream:
        received = events(stream)
        asked = next(received)
        params = assert_url_elicitation(asked)
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "cancel"}}
        assert host.post(second, answer).status_code == 202
        final = next(received)

    assert final["id"] == 9
    assert final["result"]["structuredContent"] == {"purged": False, "outcome": "cancelled"}
    assert note_count(migrated_engine) == 1
    assert open_approvals_and_audit(migrated_engine) == (1, ["cancelled"])
    with httpx.Client(base_url=second.url, timeout=30) as browser:
        assert approve(browser, params["url"], token).status_code == 200  # still approvable
    host.http.close()
