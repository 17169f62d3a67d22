"""Every request to `/mcp` is answered by the one `McpPostHandler`, whatever its kind or era.

The kinds: modern requests and notifications, a 2025-era `initialize` and requests inside the
session it opens, a request that asks for progress, malformed bodies, and every refusal of the
chain (Host, Origin, credential, media types, size), plus GET, DELETE and a CORS preflight.
Each is a raw ASGI call through the composed app with the Starlette side replaced by an app
that fails the test: the status, every response header and the error code are the ones the
server answered before the two pipelines became one (recorded from that code, 49b5c42).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.app import HttpApp, build_http_app
from notes_server.transports.http.endpoint import McpPostHandler
from notes_server.transports.http.middleware.limits import BodyTooLarge, BodyTooSlow, BoundedBody
from tests.helpers import make_request
from tests.transports.http_support import mcp_headers

Message = dict[str, Any]
Headers = list[tuple[str, str]]
# status, response headers (a new session's id as `<id>`), the body's error code or None
Outcome = tuple[int, Headers, int | str | None]
WS = "file:///home/alice/notes"
ORIGIN = "http://localhost:3000"
HOST = "127.0.0.1:8765"
SSE_ACCEPT = "application/json, text/event-stream"


def scope_for(
    headers: dict[str, str], *, method: str = "POST", path: str = "/mcp"
) -> dict[str, Any]:
    raw = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8765),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": raw,
        "state": {},
    }


def run_asgi(
    app: Callable[..., Awaitable[None]], scope: dict[str, Any], body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    messages: list[Message] = []
    incoming = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()  # the connection stays open: never a disconnect here
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        messages.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], [tuple(h) for h in start["headers"]], content


def outcome_of(status: int, headers: list[tuple[bytes, bytes]], content: bytes) -> Outcome:
    named = [
        (k.decode(), "<id>" if k == b"mcp-session-id" else v.decode())
        for k, v in headers
        if k != b"content-length"  # the body's own length; the body is checked by its code
    ]
    code = None
    if content and dict(headers).get(b"content-type") == b"application/json":
        error = json.loads(content).get("error")  # JSON-RPC's object, or OAuth's string (401)
        code = error["code"] if isinstance(error, dict) else error
    return status, named, code


@pytest.fixture
def token(migrated_engine: Engine, grant: Callable[..., str]) -> str:
    grant("bob", WS)
    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    return secret


@pytest.fixture
def app(settings: Settings, services: Services) -> HttpApp:
    composed = create_http_app(
        settings,
        HttpSettings(allowed_origins=(ORIGIN,)),
        Services(settings, engine=services.engine),
    )
    assert isinstance(composed, HttpApp)
    return composed


def modern(method: str, params: dict[str, Any] | None = None, **kw: Any) -> tuple[bytes, dict]:
    message = make_request(method, params, **kw)
    return json.dumps(message).encode(), {"Host": HOST, **mcp_headers(message)}


def read_call() -> dict[str, Any]:
    """A `notes_read` of a note that does not exist: a tool error, answered with 200."""
    return {"name": "notes_read", "arguments": {"workspaceUri": WS, "noteId": "0" * 32}}


def legacy(method: str, params: dict[str, Any] | None = None, id: int | None = 5) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if id is not None:
        message["id"] = id
    return json.dumps(message).encode()


INITIALIZE = legacy(
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "1"},
    },
    id=1,
)


def open_session(app: HttpApp, token: str) -> str:
    headers = {
        "Host": HOST,
        "Content-Type": "application/json",
        "Accept": SSE_ACCEPT,
        "Authorization": f"Bearer {token}",
        "Content-Length": str(len(INITIALIZE)),
    }
    status, response_headers, _ = run_asgi(app, scope_for(headers), INITIALIZE)
    assert status == 200
    return dict(response_headers)[b"mcp-session-id"].decode()


def deep_params(levels: int = 5_000) -> bytes:
    deep = b"[" * levels + b"]" * levels
    return b'{"jsonrpc":"2.0","id":84619,"method":"tools/list","params":{"x":' + deep + b"}}"


def kinds(token: str, session: str) -> dict[str, tuple[str, bytes, dict[str, str]]]:
    """Every kind of request to `/mcp`: (method, body, headers)."""
    bearer = {"Authorization": f"Bearer {token}"}
    read, read_headers = modern("tools/call", read_call())
    read_headers = {**read_headers, **bearer}
    note, note_headers = modern("notifications/cancelled", {"requestId": 1}, id=None)
    asks_progress = make_request("tools/call", read_call())
    asks_progress["params"]["_meta"]["progressToken"] = "p1"
    progress = json.dumps(asks_progress).encode()
    progress_headers = {"Host": HOST, **mcp_headers(asks_progress)}
    in_session = {
        "Host": HOST,
        "Content-Type": "application/json",
        "Accept": SSE_ACCEPT,
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": "2025-11-25",
        **bearer,
    }
    plain = {"Host": HOST, "Content-Type": "application/json", "Accept": SSE_ACCEPT, **bearer}
    listing = legacy("tools/list")
    return {
        "modern request": ("POST", read, read_headers),
        "modern notification: 202": ("POST", note, {**note_headers, **bearer}),
        "modern request with a session id: the id is ignored": (
            "POST",
            read,
            {**read_headers, "Mcp-Session-Id": session},
        ),
        "header mismatch: -32020": ("POST", read, {**read_headers, "Mcp-Name": "notes_search"}),
        "a request that asks for progress": (
            "POST",
            progress,
            {**progress_headers, **bearer},
        ),
        "2025 initialize: a session opens": (
            "POST",
            INITIALIZE,
            {**plain, "MCP-Protocol-Version": "2025-11-25"},
        ),
        "initialize from a 2026 client without _meta: the modern pipeline refuses it": (
            "POST",
            INITIALIZE,
            {**plain, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "initialize"},
        ),
        "2025 request in its session": ("POST", listing, in_session),
        "2025 tools/call in its session": (
            "POST",
            legacy("tools/call", read_call()),
            in_session,
        ),
        "2025 notification in its session: 202": (
            "POST",
            legacy("notifications/initialized", id=None),
            in_session,
        ),
        "2025 answer to no open question: 202": (
            "POST",
            b'{"jsonrpc":"2.0","id":"s-0123456789abcdef","result":{"action":"decline"}}',
            in_session,
        ),
        "2025 request under another version: 400": (
            "POST",
            listing,
            {**in_session, "MCP-Protocol-Version": "2025-06-18"},
        ),
        "2025 request without a session: 400": ("POST", listing, plain),
        "2025 request in an unknown session: 404": (
            "POST",
            listing,
            {**in_session, "Mcp-Session-Id": "nope"},
        ),
        "malformed JSON: -32700": ("POST", b'{"jsonrpc": "2.0",', plain),
        "malformed JSON in a session: -32700": ("POST", b'{"jsonrpc": "2.0",', in_session),
        "not a request: -32600": ("POST", b'{"jsonrpc":"2.0","id":3}', plain),
        "params too deep for the parser: -32602": ("POST", deep_params(), plain),
        "allowed Origin: CORS headers": ("POST", read, {**read_headers, "Origin": ORIGIN}),
        "refused Origin: 403": ("POST", read, {**read_headers, "Origin": "http://evil.example"}),
        "foreign Host: 403": ("POST", read, {**read_headers, "Host": "evil.example"}),
        "no credential: 401": (
            "POST",
            read,
            {k: v for k, v in read_headers.items() if k != "Authorization"},
        ),
        "wrong credential: 401 with its error": (
            "POST",
            read,
            {**read_headers, "Authorization": "Bearer nst_" + "A" * 43},
        ),
        "401 for an allowed Origin keeps CORS": (
            "POST",
            read,
            {
                **{k: v for k, v in read_headers.items() if k != "Authorization"},
                "Origin": ORIGIN,
            },
        ),
        "Accept without SSE: 406": ("POST", read, {**read_headers, "Accept": "application/json"}),
        "form Content-Type: 415": (
            "POST",
            read,
            {**read_headers, "Content-Type": "application/x-www-form-urlencoded"},
        ),
        "declared too large: 413": ("POST", read, {**read_headers, "Content-Length": "9" * 10}),
        "CORS preflight: 204": (
            "OPTIONS",
            b"",
            {"Host": HOST, "Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        ),
        "GET from a 2025 client without a session id: 400": ("GET", b"", plain),
        "GET in a session without SSE in Accept: 406": (
            "GET",
            b"",
            {**in_session, "Accept": "application/json"},
        ),
        "GET naming 2026-07-28: 405": (
            "GET",
            b"",
            {**plain, "MCP-Protocol-Version": "2026-07-28"},
        ),
        "GET from a foreign Host: 403": ("GET", b"", {**in_session, "Host": "evil.example"}),
        "DELETE without a credential: 401": (
            "DELETE",
            b"",
            {k: v for k, v in in_session.items() if k != "Authorization"},
        ),
        "DELETE without a session id: 400": ("DELETE", b"", plain),
        "DELETE naming 2026-07-28: 405": (
            "DELETE",
            b"",
            {**in_session, "MCP-Protocol-Version": "2026-07-28"},
        ),
        "PUT: 405": ("PUT", b"", plain),
        "DELETE of the session: 204": ("DELETE", b"", in_session),
    }


JSON = ("content-type", "application/json")
CORS = [
    ("access-control-allow-origin", ORIGIN),
    ("access-control-expose-headers", "mcp-session-id, www-authenticate"),
    ("vary", "Origin"),
]
CHALLENGE = (
    'Bearer resource_metadata="http://127.0.0.1:8765/.well-known/oauth-protected-resource/mcp"'
)
UNAUTHORIZED = [("www-authenticate", CHALLENGE), JSON]
ALLOW_HEADERS = (
    "authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, "
    "mcp-session-id, last-event-id"
)
EXPECTED: dict[str, Outcome] = {
    "modern request": (200, [JSON], None),
    "modern notification: 202": (202, [], None),
    "modern request with a session id: the id is ignored": (200, [JSON], None),
    "header mismatch: -32020": (400, [JSON], -32020),
    "a request that asks for progress": (200, [JSON], None),
    "2025 initialize: a session opens": (200, [JSON, ("mcp-session-id", "<id>")], None),
    "initialize from a 2026 client without _meta: the modern pipeline refuses it": (
        400,
        [JSON],
        -32602,
    ),
    "2025 request in its session": (200, [JSON], None),
    "2025 tools/call in its session": (200, [JSON], None),
    "2025 notification in its session: 202": (202, [], None),
    "2025 answer to no open question: 202": (202, [], None),
    "2025 request under another version: 400": (400, [JSON], -32600),
    "2025 request without a session: 400": (400, [JSON], -32602),
    "2025 request in an unknown session: 404": (404, [JSON], -32600),
    "malformed JSON: -32700": (400, [JSON], -32700),
    "malformed JSON in a session: -32700": (400, [JSON], -32700),
    "not a request: -32600": (400, [JSON], -32600),
    "params too deep for the parser: -32602": (400, [JSON], -32602),
    "allowed Origin: CORS headers": (200, [JSON, *CORS], None),
    "refused Origin: 403": (403, [JSON], -32600),
    "foreign Host: 403": (403, [JSON], -32600),
    "no credential: 401": (401, UNAUTHORIZED, "invalid_token"),
    "wrong credential: 401 with its error": (
        401,
        [("www-authenticate", CHALLENGE + ', error="invalid_token"'), JSON],
        "invalid_token",
    ),
    "401 for an allowed Origin keeps CORS": (401, [*UNAUTHORIZED, *CORS], "invalid_token"),
    "Accept without SSE: 406": (406, [JSON], -32600),
    "form Content-Type: 415": (415, [JSON], -32600),
    "declared too large: 413": (413, [JSON], -32600),
    "CORS preflight: 204": (
        204,
        [
            ("access-control-allow-origin", ORIGIN),
            ("access-control-allow-methods", "DELETE, GET, POST"),
            ("access-control-allow-headers", ALLOW_HEADERS),
            ("access-control-max-age", "600"),
            ("vary", "Origin"),
        ],
        None,
    ),
    "GET from a 2025 client without a session id: 400": (400, [JSON], -32600),
    "GET in a session without SSE in Accept: 406": (406, [JSON], -32600),
    "GET naming 2026-07-28: 405": (405, [("allow", "POST"), JSON], -32600),
    "GET from a foreign Host: 403": (403, [JSON], -32600),
    "DELETE without a credential: 401": (401, UNAUTHORIZED, "invalid_token"),
    "DELETE without a session id: 400": (400, [JSON], -32600),
    "DELETE naming 2026-07-28: 405": (405, [("allow", "POST"), JSON], -32600),
    "PUT: 405": (405, [("allow", "DELETE, GET, POST"), JSON], -32600),
    "DELETE of the session: 204": (204, [], None),
}


def outcomes(app: HttpApp, token: str) -> Iterator[tuple[str, Outcome]]:
    session = open_session(app, token)
    for name, (method, body, headers) in kinds(token, session).items():
        sent = {"Content-Length": str(len(body)), **headers}
        yield name, outcome_of(*run_asgi(app, scope_for(sent, method=method), body))


def test_every_request_to_mcp_is_answered_by_the_one_handler(
    app: HttpApp, token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unreachable(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError(f"Starlette was entered for {scope['method']} {scope['path']}")

    answered_by: list[McpPostHandler] = []
    call = McpPostHandler.__call__

    async def recorded(self: McpPostHandler, scope: Any, receive: Any, send: Any) -> None:
        answered_by.append(self)
        await call(self, scope, receive, send)

    monkeypatch.setattr(McpPostHandler, "__call__", recorded)
    app.others = unreachable
    seen = dict(outcomes(app, token))

    assert seen == EXPECTED
    assert len(answered_by) == len(EXPECTED) + 1  # and the initialize that opened the session
    assert all(handler is app.mcp for handler in answered_by)


def test_other_paths_are_answered_by_starlette_beside_the_handler(app: HttpApp, token: str) -> None:
    headers = {"Host": HOST, "Authorization": f"Bearer {token}"}
    status, response_headers, content = run_asgi(app, scope_for(headers, path="/nothing"), b"")
    assert (status, dict(response_headers)[b"content-type"]) == (404, b"application/json")
    assert json.loads(content)["error"] == {"code": -32600, "message": "Not Found"}
    status, _, content = run_asgi(app, scope_for(headers, method="GET", path="/healthz"), b"")
    assert status == 200 and json.loads(content)["status"] == "ok"


def test_an_extension_route_at_mcp_serves_its_own_methods_beside_the_handler(
    server: Any,
) -> None:
    from starlette.routing import Route

    from notes_server.transports.http.middleware.auth import FixedPrincipal
    from notes_server.transports.http.responses import json_response

    async def status(request: object) -> object:
        return json_response(200, {"extension": True})

    route = Route("/mcp", status, methods=["GET"])  # type: ignore[arg-type]
    app = build_http_app(server, FixedPrincipal("alice"), HttpSettings(), extra_routes=[route])
    headers = {"Host": HOST}
    got = run_asgi(app, scope_for(headers, method="GET"), b"")
    assert (got[0], json.loads(got[2])) == (200, {"extension": True})
    body, post_headers = modern("tools/list")
    posted = run_asgi(app, scope_for({**post_headers, "Content-Length": str(len(body))}), body)
    assert posted[0] == 200 and "tools" in json.loads(posted[2])["result"]


def test_values_that_passed_before_do_not_let_refused_ones_through(
    app: HttpApp, token: str
) -> None:
    """The chain remembers Host and media-type values that passed; each request is still
    checked on its own values, in any order."""
    body, headers = modern("tools/call", read_call())
    good = {**headers, "Authorization": f"Bearer {token}", "Content-Length": str(len(body))}
    sequence = [
        (good, 200),
        ({**good, "Host": "evil.example"}, 403),
        ({**good, "Accept": "application/json"}, 406),
        ({**good, "Content-Type": "text/plain"}, 415),
        (good, 200),
        ({**good, "Host": "evil.example"}, 403),
        ({**good, "Accept": "application/json"}, 406),
    ]
    statuses = [run_asgi(app, scope_for(sent), body)[0] for sent, _ in sequence]
    assert statuses == [status for _, status in sequence]


def test_a_client_that_leaves_before_its_body_is_read_gets_no_answer(
    app: HttpApp, token: str
) -> None:
    body, headers = modern("tools/list")
    headers["Authorization"] = f"Bearer {token}"
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = scope_for({**headers, "Content-Length": str(len(body))})
    asyncio.run(app(scope, receive, send))
    assert sent == []


def bounded(messages: list[Message | None], declared: str | None, timeout: float) -> BoundedBody:
    """A body whose messages come one per read; None: the next read waits until cancelled."""

    async def receive() -> Message:
        message = messages.pop(0)
        if message is None:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")
        if message.get("wait"):
            await asyncio.sleep(0)  # a read that suspends once and then completes
        return message

    return BoundedBody(receive, declared, 100, timeout)


def chunk(data: bytes, more: bool, *, wait: bool = False) -> Message:
    return {"type": "http.request", "body": data, "more_body": more, "wait": wait}


async def read_all(body: BoundedBody) -> bytes:
    parts = []
    while True:
        message = await body()
        parts.append(message["body"])
        if not message["more_body"]:
            return b"".join(parts)


def test_a_body_read_that_suspends_still_completes() -> None:
    body = bounded([chunk(b"ab", True), chunk(b"cd", True, wait=True), chunk(b"e", False)], "5", 5)
    assert asyncio.run(read_all(body)) == b"abcde"


def test_a_body_that_stops_arriving_is_too_slow_within_its_deadline() -> None:
    body = bounded([chunk(b"ab", True), None], None, 0.05)
    with pytest.raises(BodyTooSlow):
        asyncio.run(read_all(body))


def test_a_body_past_the_limit_is_too_large_declared_or_actual() -> None:
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_all(bounded([chunk(b"x", False)], "101", 5)))
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_all(bounded([chunk(b"x" * 60, True), chunk(b"x" * 60, False)], None, 5)))


class NextOnly:
    """An awaitable's iterator with only `__next__`, as some ASGI servers hand out (granian's
    futures): no `send`, no `throw`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __iter__(self) -> NextOnly:
        return self

    def __next__(self) -> Any:
        return next(self.inner)


class PlainAwaitable:
    def __init__(self, future: asyncio.Future[Message]) -> None:
        self.future = future

    def __await__(self) -> Any:
        return NextOnly(self.future.__await__())


def test_a_body_read_works_with_an_awaitable_that_is_not_a_generator() -> None:
    async def read(delivery: str) -> bytes:
        loop = asyncio.get_running_loop()

        def receive() -> PlainAwaitable:
            future: asyncio.Future[Message] = loop.create_future()
            message = chunk(b"abc", False)
            if delivery == "now":
                future.set_result(message)
            elif delivery == "later":
                loop.call_soon(future.set_result, message)
            return PlainAwaitable(future)

        return await read_all(BoundedBody(receive, None, 100, 0.05))  # type: ignore[arg-type]

    assert asyncio.run(read("now")) == b"abc"
    assert asyncio.run(read("later")) == b"abc"
    with pytest.raises(BodyTooSlow):
        asyncio.run(read("never"))
