"""Extensions through the real server: what one contributes (a tool, a discover entry, a
`demo:` resource provider, tool `_meta` for capable clients) is served next to the notes, and
clashes are refused at start."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.app import create_server, notes_extension
from notes_server.config import Settings, SettingsError
from notes_server.features.extension import Extension
from notes_server.features.registry import ExtensionRegistry
from notes_server.protocol.server import McpServer
from notes_server.store import grants, notes
from notes_server.store.engine import write_tx
from notes_server.tools.base import Tool
from notes_server.tools.registry import SHIPPED
from notes_server.tools.services import Services
from tests.demo_extension import DEMO_ID, DemoResources, EchoTool, demo_extension
from tests.helpers import make_request, subprocess_env

Call = Callable[..., dict[str, Any]]
NOTES = "file:///home/alice/notes"
CAPABLE: dict[str, Any] = {"extensions": {DEMO_ID: {}}}
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def demo_server(settings: Settings, services: Services) -> McpServer:
    return create_server(settings, services, [notes_extension(services), demo_extension(services)])


@pytest.fixture
def ask(demo_server: McpServer) -> Call:
    def _ask(method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        raw = demo_server.handle_raw(json.dumps(make_request(method, params, **kw)), "alice")
        assert raw is not None
        reply: dict[str, Any] = json.loads(raw)
        return reply

    return _ask


def _tools(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in result["tools"]}


def test_discover_lists_the_extension_entry_after_the_core_capabilities(ask: Call) -> None:
    result = ask("server/discover")["result"]

    assert result["capabilities"] == {
        "tools": {},
        "resources": {},
        "prompts": {},
        "logging": {},
        "completions": {},
        "extensions": {DEMO_ID: {"version": "1"}},
    }
    assert list(result["capabilities"])[-1] == "extensions"
    assert result["cacheScope"] == "public"


def test_an_extension_tool_is_listed_after_the_notes_tools_and_callable(ask: Call) -> None:
    names = [tool["name"] for tool in ask("tools/list")["result"]["tools"]]
    reply = ask("tools/call", {"name": "demo_echo", "arguments": {"text": "hi"}})

    assert names == [cls.name for cls in SHIPPED] + ["demo_echo"]
    assert reply["result"]["structuredContent"] == {"echo": "hi", "principal": "alice"}


def test_tool_meta_appears_only_when_this_request_declares_the_extension(ask: Call) -> None:
    plain = ask("tools/list")["result"]
    capable = ask("tools/list", caps=CAPABLE)["result"]
    again = ask("tools/list")["result"]

    assert _tools(capable)["demo_echo"]["_meta"] == {DEMO_ID: {"view": "demo:0"}}
    assert all("_meta" not in tool for tool in plain["tools"])
    assert again == plain
    assert [t for t in capable["tools"] if "_meta" in t] == [_tools(capable)["demo_echo"]]
    assert {key: tool for key, tool in _tools(capable)["demo_echo"].items() if key != "_meta"} == (
        _tools(plain)["demo_echo"]
    )


def test_a_list_that_varies_with_capabilities_is_never_cached_publicly(ask: Call) -> None:
    other: dict[str, Any] = {"extensions": {"com.example/other": {}}}
    for caps in (None, CAPABLE, other):
        result = ask("tools/list", caps=caps)["result"]
        assert (result["cacheScope"], result["ttlMs"]) == ("private", 300_000)


def test_an_extension_without_a_meta_hook_keeps_the_shared_public_list(
    settings: Settings, services: Services, call: Call
) -> None:
    quiet = Extension(name="quiet", tools=[EchoTool(services)])
    server = create_server(settings, services, [notes_extension(services), quiet])
    raw = json.dumps(make_request("tools/list", caps=CAPABLE))

    first, second = server.handle_raw(raw, "alice"), server.handle_raw(raw, "alice")

    assert first == second
    assert json.loads(first or b"")["result"]["cacheScope"] == "public"


def test_the_default_server_serves_the_notes_then_the_folders_then_the_apps_tools(
    call: Call, services: Services
) -> None:
    result = call("tools/list", caps=CAPABLE)["result"]

    names = [tool["name"] for tool in result["tools"]]
    # notes_reindex only where the semantic index is (the extra installed and not turned off).
    reindex = ["notes_reindex"] if services.semantic_available() else []
    assert names == [cls.name for cls in SHIPPED] + [
        "notes_import",
        "notes_timeline",
        "notes_open",
        *reindex,
    ]
    assert result["cacheScope"] == "private"  # the Apps extension's `_meta` follows capabilities
    assert all("_meta" not in tool for tool in result["tools"])  # the demo id is not Apps
    assert call("server/discover")["result"]["capabilities"] == {
        "tools": {},
        "resources": {"subscribe": True, "listChanged": True},  # subscriptions/listen
        "prompts": {},
        "logging": {},
        "completions": {},
        "extensions": {"io.modelcontextprotocol/ui": {}, "io.modelcontextprotocol/tasks": {}},
    }


def test_resources_read_routes_demo_uris_to_the_extension(ask: Call) -> None:
    result = ask("resources/read", {"uri": "demo:3"})["result"]

    assert result["contents"] == [
        {"uri": "demo:3", "mimeType": "text/plain", "text": "demo:3 for alice"}
    ]
    assert result["cacheScope"] == "private"


@pytest.mark.parametrize("uri", ["nope:x", "no-scheme", "1demo:3", ":x", "", "demo:99"])
def test_a_uri_no_provider_serves_is_resource_not_found_with_the_uri(ask: Call, uri: str) -> None:
    reply = ask("resources/read", {"uri": uri})

    assert reply["error"] == {"code": -32602, "message": "Resource not found", "data": {"uri": uri}}


def test_file_uris_still_reach_the_notes(ask: Call, migrated_engine: Engine) -> None:
    _seed_notes(migrated_engine, 1)

    result = ask("resources/read", {"uri": f"{NOTES}/n000.md"})["result"]

    assert result["contents"][0]["text"] == "body 0"


def _seed_notes(engine: Engine, count: int) -> None:
    with write_tx(engine) as conn:
        grants.upsert(conn, "alice", NOTES, "write", NOW)
        for i in range(count):
            notes.insert_note(
                conn, workspace=NOTES, path=f"n{i:03}.md", title=f"t{i}", body=f"body {i}", now=NOW
            )


def _walk(ask: Call) -> tuple[list[str], list[str]]:
    uris: list[str] = []
    cursors: list[str] = []
    cursor: str | None = None
    while True:
        result = ask("resources/list", {"cursor": cursor} if cursor else None)["result"]
        assert result["cacheScope"] == "private"
        uris += [resource["uri"] for resource in result["resources"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            return uris, cursors
        cursors.append(cursor)


def test_resources_list_pages_through_every_provider_once_in_order(
    ask: Call, migrated_engine: Engine
) -> None:
    _seed_notes(migrated_engine, 150)

    uris, cursors = _walk(ask)

    expected_notes = [f"{NOTES}/n{i:03}.md" for i in range(150)]
    assert uris == [*expected_notes, *(f"demo:{i}" for i in range(5))]
    assert len(cursors) == 3  # pages: notes 100 | notes 50 + demo 2 | demo 2 | demo 1
    assert not any(cursor in {"100", "page-1", "page-2"} for cursor in cursors)


def test_an_empty_provider_does_not_leave_an_empty_page(ask: Call) -> None:
    first = ask("resources/list")["result"]

    assert [r["uri"] for r in first["resources"]] == ["demo:0", "demo:1"]
    assert _walk(ask)[0] == [f"demo:{i}" for i in range(5)]


@pytest.mark.parametrize(
    "cursor",
    ["100", "page-1", "ZGVtbwpwYWdlLTk", "bm9wZQpwYWdlLTE", "ZGVtbw", "!!", "x" * 5000, ""],
    ids=[
        "notes-raw",
        "demo-raw",
        "demo-forged",
        "unknown-scheme",
        "no-separator",
        "junk",
        "long",
        "empty",
    ],
)
def test_a_cursor_not_issued_by_the_router_is_invalid(ask: Call, cursor: str) -> None:
    reply = ask("resources/list", {"cursor": cursor})

    assert reply["error"] == {"code": -32602, "message": "Invalid cursor"}


def test_a_demo_cursor_replayed_returns_the_same_page(ask: Call) -> None:
    first = ask("resources/list")["result"]
    page = ask("resources/list", {"cursor": first["nextCursor"]})["result"]

    assert ask("resources/list", {"cursor": first["nextCursor"]})["result"] == page
    assert [r["uri"] for r in page["resources"]] == ["demo:2", "demo:3"]


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (
            lambda s: Extension("x", tools=[EchoTool(s)]),
            "tool 'demo_echo' is contributed by both 'demo' and 'x'",
        ),
        (
            lambda s: Extension("x", resource_providers={"demo": DemoResources(1)}),
            "URI scheme 'demo' is contributed by both 'demo' and 'x'",
        ),
        (lambda s: Extension("demo"), "extension name 'demo' is contributed by 'demo' twice"),
        (
            lambda s: Extension("x", extensions={DEMO_ID: {}}),
            f"extension id '{DEMO_ID}' is contributed twice",
        ),
        (
            lambda s: Extension(
                "x", capabilities={"tools": {"listChanged": True}}, extensions={"a/b": {}}
            ),
            None,
        ),
    ],
    ids=["tool", "scheme", "name", "extension-id", "compatible"],
)
def test_clashing_contributions_are_refused_at_start(
    services: Services, second: Callable[[Services], Extension], message: str | None
) -> None:
    extensions = [demo_extension(services), second(services)]
    if message is None:
        merged = ExtensionRegistry(extensions).capabilities
        assert merged["tools"] == {"listChanged": True}
        assert merged["extensions"] == {DEMO_ID: {"version": "1"}, "a/b": {}}
        return
    with pytest.raises(SettingsError) as refused:
        ExtensionRegistry(extensions)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("extension", "message"),
    [
        (
            Extension("x", resource_providers={"Demo": DemoResources(1)}),
            "extension 'x': 'Demo' is not a lower-case URI scheme",
        ),
        (
            Extension("x", extensions={"demo": {}}),
            "extension 'x': 'demo' is not a prefixed extension id",
        ),
        (
            Extension("x", capabilities={"extensions": {}}),
            "extension 'x': declare extension ids in `extensions`, not in `capabilities`",
        ),
        (Extension("x", capabilities={"logging": {}, "tools": {"listChanged": 1}}), None),
    ],
    ids=["scheme-case", "unprefixed-id", "extensions-in-capabilities", "ok"],
)
def test_malformed_contributions_are_refused_at_start(
    extension: Extension, message: str | None
) -> None:
    if message is None:
        ExtensionRegistry([extension, Extension("y", capabilities={"tools": {"listChanged": 1}})])
        return
    with pytest.raises(SettingsError) as refused:
        ExtensionRegistry([extension])
    assert str(refused.value) == message


def test_conflicting_capability_values_are_refused_at_start() -> None:
    first = Extension("a", capabilities={"tools": {"listChanged": True}})
    second = Extension("b", capabilities={"tools": {"listChanged": False}})

    with pytest.raises(
        SettingsError, match=r"^extension 'b': capabilities.tools.listChanged conflicts"
    ):
        ExtensionRegistry([first, second])


def test_a_tools_module_clashing_with_a_shipped_tool_stops_serve_with_one_line(
    tmp_path: Path, settings: Settings, migrated_engine: Engine
) -> None:
    env = subprocess_env(tmp_path, {"PYTHONPATH": str(FIXTURES)})
    command = [sys.executable, "-m", "notes_server", "serve", "--db", settings.db_url]
    command += ["--principal", "alice", "--sandbox", "off", "--tools-module", "clash_tools"]

    done = subprocess.run(
        command, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env, timeout=60
    )

    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "notes-server: error: tool 'notes_read' is contributed by both 'notes' and "
        "'tools-module:clash_tools'"
    ]


def test_a_tools_module_that_cannot_be_imported_stops_serve_with_one_line(
    tmp_path: Path, settings: Settings, migrated_engine: Engine
) -> None:
    command = [sys.executable, "-m", "notes_server", "serve", "--db", settings.db_url]
    command += ["--principal", "alice", "--sandbox", "off", "--tools-module", "no_such_tools"]

    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=subprocess_env(tmp_path),
        timeout=60,
    )

    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "notes-server: error: --tools-module no_such_tools: cannot import "
        "(No module named 'no_such_tools')"
    ]


def _echo_meta(tool: Tool, capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
    """Echoes a client-chosen value: as many list variants as clients care to send."""
    value = capabilities.get("experimental", {}).get("echo")
    return {"com.example/echo": value} if tool.name == "demo_echo" else None


def test_every_client_gets_its_own_variant_however_many_there_are(
    settings: Settings, services: Services
) -> None:
    echo = Extension("echo", tools=[EchoTool(services)], tool_meta=_echo_meta)
    server = create_server(settings, services, [echo])

    for round_ in range(2):
        for value in range(40):
            caps = {"experimental": {"echo": {"n": value}}}
            raw = server.handle_raw(json.dumps(make_request("tools/list", caps=caps)), "alice")
            (tool,) = json.loads(raw or b"")["result"]["tools"]
            assert tool["_meta"] == {"com.example/echo": {"n": value}}, round_


def test_a_hook_with_a_declared_variant_runs_once_per_variant_not_per_request(
    settings: Settings, services: Services
) -> None:
    calls: list[bool] = []

    def meta(tool: Tool, capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
        capable = "echo" in capabilities.get("experimental", {})
        calls.append(capable)
        return {"com.example/echo": "on"} if capable else None

    def variant(capabilities: Mapping[str, Any]) -> bool:
        return "echo" in capabilities.get("experimental", {})

    echo = Extension("echo", tools=[EchoTool(services)], tool_meta=meta, tool_meta_variant=variant)
    server = create_server(settings, services, [echo])
    listings = []
    for value in range(10):
        for caps in ({"experimental": {"echo": value}}, {"elicitation": {"form": {}}}):
            raw = server.handle_raw(json.dumps(make_request("tools/list", caps=caps)), "alice")
            listings.append(json.loads(raw or b"")["result"])

    capable, plain = listings[0], listings[1]
    assert capable["tools"][0]["_meta"] == {"com.example/echo": "on"}
    assert "_meta" not in plain["tools"][0]
    assert capable["cacheScope"] == plain["cacheScope"] == "private"
    assert listings == [capable, plain] * 10
    assert calls == [True, False]
