"""The Streamable HTTP status/code matrix, asserted twice: in-process through the ASGI app
(fast) and over real HTTP against a `serve --transport http` subprocess (the same bytes on a
socket, through uvicorn)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.errors import WORKSPACE_DENIED
from notes_server.security.keyring import KeyRing
from notes_server.store import migrate
from notes_server.store.engine import make_engine
from tests.helpers import make_request
from tests.transports.http_support import (
    BASE_HEADERS,
    LOOPBACK_URL,
    HttpServer,
    mcp_headers,
    start_http_server,
)

Headers = list[tuple[str, str | bytes]]
FORM = {"elicitation": {"form": {}}}


@dataclass(frozen=True)
class Case:
    id: str
    body: bytes
    headers: Headers
    status: int
    code: int | None = None
    method: str = "POST"
    check: Callable[[httpx.Response], None] = field(default=lambda response: None)


def case(id: str, message: dict[str, Any], status: int, code: int | None, **kw: Any) -> Case:
    """A case whose headers are the correct ones for `message`, adjusted by `set`/`drop`."""
    headers = mcp_headers(message)
    for name in kw.pop("drop", ()):
        headers.pop(name)
    headers.update(kw.pop("set", {}))
    pairs: Headers = [*headers.items(), *kw.pop("extra", [])]
    return Case(id, json.dumps(message).encode(), pairs, status, code, **kw)


def meta_without(key: str) -> dict[str, Any]:
    message = make_request("server/discover")
    del message["params"]["_meta"][key]
    return message


def versioned(version: str) -> dict[str, Any]:
    message = make_request("server/discover")
    message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = version
    return message


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def _no_session(response: httpx.Response) -> None:
    assert "mcp-session-id" not in response.headers


def _allow_post(response: httpx.Response) -> None:
    assert response.headers["allow"] == "POST"


def _data(expected: dict[str, Any]) -> Callable[[httpx.Response], None]:
    def check(response: httpx.Response) -> None:
        assert response.json()["error"]["data"] == expected

    return check


def _result(key: str, value: Any) -> Callable[[httpx.Response], None]:
    def check(response: httpx.Response) -> None:
        assert response.json()["result"][key] == value

    return check


DISCOVER = make_request("server/discover")
WHOAMI = make_request("tools/call", {"name": "test_whoami", "arguments": {}})
CAFE_URI = "file:///home/alice/caf\u00e9/n.md"
READ_CAFE = make_request("resources/read", {"uri": CAFE_URI})
DELETE = make_request(
    "tools/call", {"name": "notes_delete", "arguments": {"workspaceUri": "file:///w", "title": "t"}}
)
UNSUPPORTED = {"supported": ["2026-07-28"], "requested": "1999-01-01"}

CASES = [
    case("discover-ok", DISCOVER, 200, None, check=_result("cacheScope", "public")),
    case(
        # private: notes_timeline's `_meta.ui` follows the request's Apps capability
        "tools-list-is-private",
        make_request("tools/list"),
        200,
        None,
        check=_result("cacheScope", "private"),
    ),
    case(
        "resources-list-is-private",
        make_request("resources/list"),
        200,
        None,
        check=_result("cacheScope", "private"),
    ),
    case(
        "principal-comes-from-the-server",
        WHOAMI,
        200,
        None,
        check=lambda r: r.json()["result"]["structuredContent"] == {"principal": "alice"},
    ),
    case(
        "notification-accepted",
        make_request("notifications/cancelled", id=None),
        202,
        None,
        check=lambda r: r.content == b"",
    ),
    Case("parse-error", b"{not json", list(BASE_HEADERS.items()), 400, -32700),
    Case("batch-is-invalid-request", b"[]", list(BASE_HEADERS.items()), 400, -32600),
    case("missing-meta", {**DISCOVER, "params": {}}, 400, -32602),
    case(
        "missing-protocol-version",
        meta_without("io.modelcontextprotocol/protocolVersion"),
        400,
        -32602,
        drop=["MCP-Protocol-Version"],
        set={"MCP-Protocol-Version": "2026-07-28"},
    ),
    case(
        "missing-capabilities",
        meta_without("io.modelcontextprotocol/clientCapabilities"),
        400,
        -32602,
    ),
    case("missing-version-header", DISCOVER, 400, -32020, drop=["MCP-Protocol-Version"]),
    case(
        "header-version-disagrees-with-body",
        versioned("1999-01-01"),
        400,
        -32020,
        set={"MCP-Protocol-Version": "2026-07-28"},
    ),
    case("unsupported-version", versioned("1999-01-01"), 400, -32022, check=_data(UNSUPPORTED)),
    case("missing-method-header", DISCOVER, 400, -32020, drop=["Mcp-Method"]),
    case("method-header-disagrees", DISCOVER, 400, -32020, set={"Mcp-Method": "tools/list"}),
    case("method-header-twice", DISCOVER, 400, -32020, extra=[("Mcp-Method", "server/discover")]),
    case("missing-name-header", WHOAMI, 400, -32020, drop=["Mcp-Name"]),
    case("name-header-disagrees", WHOAMI, 400, -32020, set={"Mcp-Name": "notes_read"}),
    case("name-header-base64", WHOAMI, 200, None, set={"Mcp-Name": b64("test_whoami")}),
    case(
        "name-header-bad-base64-padding",
        WHOAMI,
        400,
        -32020,
        set={"Mcp-Name": "=?base64?dGVzdF93aG9hbWk?="},
    ),
    case("name-header-raw-non-ascii", READ_CAFE, 400, -32020, set={"Mcp-Name": CAFE_URI.encode()}),
    case(
        "non-ascii-uri-in-base64-reaches-the-handler",
        READ_CAFE,
        200,
        -32602,
        set={"Mcp-Name": b64(CAFE_URI)},
        check=_data({"uri": CAFE_URI}),
    ),
    case("unknown-method", make_request("unknown/method"), 404, -32601),
    case("removed-initialize", make_request("initialize"), 404, -32601),
    case("removed-ping", make_request("ping"), 404, -32601),
    case(
        "missing-client-capability",
        DELETE,
        400,
        -32021,
        check=_data({"requiredCapabilities": FORM}),
    ),
    case(
        "unknown-tool-is-an-ordinary-error",
        make_request("tools/call", {"name": "nope", "arguments": {}}),
        200,
        -32602,
    ),
    case(
        "workspace-denied-is-an-ordinary-error",
        make_request(
            "tools/call",
            {"name": "notes_read", "arguments": {"workspaceUri": "file:///w", "noteId": "n"}},
        ),
        200,
        -32602,
        check=lambda r: r.json()["error"]["message"] == WORKSPACE_DENIED,
    ),
    case(
        "session-id-is-ignored-and-never-minted",
        DISCOVER,
        200,
        None,
        set={"Mcp-Session-Id": "abc"},
        check=_no_session,
    ),
    # GET opens a legacy (2025-era) session's stream and DELETE ends the session; a 2026-07-28
    # client has none, so its GET and DELETE are 405 naming POST only, and a bare GET or DELETE
    # (no version header) without a session id is a bad request.
    case("modern-get-is-not-allowed", DISCOVER, 405, -32600, method="GET", check=_allow_post),
    case(
        "bare-get-without-a-session-id-is-a-bad-request",
        DISCOVER,
        400,
        -32600,
        method="GET",
        drop=["MCP-Protocol-Version"],
    ),
    case("modern-delete-is-not-allowed", DISCOVER, 405, -32600, method="DELETE", check=_allow_post),
    case(
        "modern-delete-with-a-session-id-is-not-allowed",
        DISCOVER,
        405,
        -32600,
        method="DELETE",
        set={"Mcp-Session-Id": "abc"},
        check=_allow_post,
    ),
    case(
        "bare-delete-without-a-session-is-refused",
        DISCOVER,
        400,
        -32600,
        method="DELETE",
        drop=["MCP-Protocol-Version"],
    ),
    case("wrong-content-type", DISCOVER, 415, -32600, set={"Content-Type": "text/plain"}),
    case("accept-without-event-stream", DISCOVER, 406, -32600, set={"Accept": "application/json"}),
    Case(
        "body-over-the-limit", b" " * (4 * 1024 * 1024 + 1), list(BASE_HEADERS.items()), 413, -32600
    ),
    case("dns-rebinding-host", DISCOVER, 403, -32600, set={"Host": "evil.example.com"}),
    case("foreign-origin", DISCOVER, 403, -32600, set={"Origin": "http://evil.example.com"}),
    case("loopback-origin", DISCOVER, 200, None, set={"Origin": "http://localhost:3000"}),
]


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("http-matrix")
    url = f"sqlite:///{tmp}/notes.db"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return tmp, url


@pytest.fixture(scope="module")
def live(database: tuple[Path, str]) -> Iterator[HttpServer]:
    tmp, url = database
    args = ("--auth", "none", "--principal", "alice", "--tools-module", "http_support")
    server = start_http_server(tmp, url, *args)
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["asgi", "uvicorn"])
def client(request: pytest.FixtureRequest, database: tuple[Path, str]) -> Iterator[httpx.Client]:
    if request.param == "uvicorn":
        server: HttpServer = request.getfixturevalue("live")
        with httpx.Client(base_url=server.url, timeout=30) as http_client:
            yield http_client
        return
    settings = Settings(
        db_url=database[1],
        principal="alice",
        state_keys=KeyRing.generate_spec(),
        tools_modules=("tests.transports.http_support",),
    )
    app = create_http_app(settings, HttpSettings(auth="none"))
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


TRANSPORT_REFUSALS = {403, 406, 413, 415}


def expected_id(case: Case) -> Any:
    """Refused before the body was read, or unreadable: null. Otherwise the request's id."""
    if case.status in TRANSPORT_REFUSALS or case.method != "POST":
        return None
    try:
        sent = json.loads(case.body)
    except ValueError:
        return None
    return sent.get("id") if isinstance(sent, dict) else None


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_status_and_code(client: httpx.Client, case: Case) -> None:
    response = client.request(case.method, "/mcp", content=case.body, headers=case.headers)

    assert response.status_code == case.status, response.text
    if case.code is not None:
        body = response.json()
        assert body["error"]["code"] == case.code
        assert body["id"] == expected_id(case)
    case.check(response)


PARAMS_TOO_DEEP = {"code": -32602, "message": "Invalid params: params nest deeper than 64 levels"}
LEGACY_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
}


def deep_request(levels: int, *, modern: bool) -> bytes:
    params = make_request("tools/list")["params"] if modern else {}
    message = {"jsonrpc": "2.0", "id": 84619, "method": "tools/list", "params": params}
    head = json.dumps(message).encode()[:-2]  # without the closing braces of params and message
    head += b"," if params else b""
    return head + b'"x":' + b"[" * levels + b"]" * levels + b"}}"


@pytest.mark.parametrize("levels", [100, 5_000])
def test_params_nested_too_deep_are_400_with_the_requests_id(
    client: httpx.Client, levels: int
) -> None:
    headers = mcp_headers(make_request("tools/list"))

    response = client.post("/mcp", content=deep_request(levels, modern=True), headers=headers)

    assert response.status_code == 400
    assert response.json() == {"jsonrpc": "2.0", "id": 84619, "error": PARAMS_TOO_DEEP}


@pytest.mark.parametrize("levels", [100, 5_000])
def test_params_nested_too_deep_in_a_legacy_session_are_answered_with_the_id(
    client: httpx.Client, levels: int
) -> None:
    opened = client.post("/mcp", json=LEGACY_INITIALIZE, headers=BASE_HEADERS)
    session = {**BASE_HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}

    response = client.post("/mcp", content=deep_request(levels, modern=False), headers=session)

    assert response.status_code == 400
    assert response.json() == {"jsonrpc": "2.0", "id": 84619, "error": PARAMS_TOO_DEEP}


def session_rows(url: str) -> list[tuple[str, str | None]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            query = "SELECT capabilities_json, client_info_json FROM legacy_sessions"
            return [(row[0], row[1]) for row in conn.exec_driver_sql(query)]
    finally:
        engine.dispose()


def test_a_legacy_initialize_keeps_only_what_the_server_uses(
    client: httpx.Client, database: tuple[Path, str]
) -> None:
    bulk = "x" * (1024 * 1024)  # three of them: 3 MiB, under the 4 MiB body limit
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"experimental": {"b": bulk}, "elicitation": {"form": {"b": bulk}}},
        "clientInfo": {"name": "big", "version": "1", "icons": [{"src": bulk}]},
    }
    message = {"jsonrpc": "2.0", "id": "big", "method": "initialize", "params": params}

    opened = client.post("/mcp", json=message, headers=BASE_HEADERS)

    assert opened.status_code == 200
    kept = [row for row in session_rows(database[1]) if row[1] and '"big"' in row[1]]
    # (one row per client of this module: the in-process app and the real server share it)
    assert set(kept) == {('{"elicitation": {"form": {}}}', '{"name": "big", "version": "1"}')}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"capabilities": {"extensions": {"x.example/e": {"b": "x" * 10_000}}}},
            "Invalid params: initialize capabilities.extensions take more than 8192 bytes",
        ),
        (
            {"capabilities": {}, "clientInfo": {"name": "n" * 300, "version": "1"}},
            "Invalid params: initialize clientInfo.name is longer than 256 characters",
        ),
    ],
    ids=["extensions", "client-name"],
)
def test_an_oversized_legacy_initialize_is_400_invalid_params_and_opens_no_session(
    client: httpx.Client, params: dict[str, Any], message: str
) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "initialize"}
    body["params"] = {"protocolVersion": "2025-11-25", **params}

    refused = client.post("/mcp", json=body, headers=BASE_HEADERS)

    assert refused.status_code == 400
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": message},
    }
    assert "mcp-session-id" not in refused.headers
