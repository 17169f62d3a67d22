"""The single-pass `POST /mcp` handler answers exactly as the middleware stack behind it.

Each case goes through the composed app (the single-pass handler in front) and through the
Starlette stack alone (`fallback`), as raw ASGI calls: status, every response header and the
body must be identical. The cases cover the plain path and every refusal the stack owns
(Host/Origin 403, 401 with its challenge, 406, 415, 413), CORS, the protocol's own errors,
notifications, 2025-era session traffic (replayed to the stack) and a failing authenticator.
Plus the body-read bounds the handler shares with the stack (`http_limits.BoundedBody`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from notes_server.tools.services import Services
from notes_server.transports.http.app import build_http_app
from notes_server.transports.http.middleware.limits import BodyTooLarge, BodyTooSlow, BoundedBody
from notes_server.transports.http_fastpath import McpPostFastPath
from tests.helpers import make_request
from tests.transports.http_support import mcp_headers

Message = dict[str, Any]
Outcome = tuple[int, list[tuple[bytes, bytes]], bytes]
WS = "file:///home/alice/notes"
ORIGIN = "http://localhost:3000"


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


def run_asgi(app: Callable[..., Awaitable[None]], scope: dict[str, Any], body: bytes) -> Outcome:
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


@pytest.fixture
def token(migrated_engine: Engine, grant: Callable[..., str]) -> str:
    grant("bob", WS)
    _, secret = create_token(SqlTokenRecords(migrated_engine), "bob")
    return secret


@pytest.fixture
def app(settings: Settings, services: Services) -> McpPostFastPath:
    composed = create_http_app(
        settings,
        HttpSettings(allowed_origins=(ORIGIN,)),
        Services(settings, engine=services.engine),
    )
    assert isinstance(composed, McpPostFastPath)
    return composed


def request(
    method: str, params: dict[str, Any] | None = None, **kw: Any
) -> tuple[bytes, dict[str, str]]:
    message = make_request(method, params, **kw)
    return json.dumps(message).encode(), {"Host": "127.0.0.1:8765", **mcp_headers(message)}


def read_note(note_id: str = "0" * 32) -> tuple[bytes, dict[str, str]]:
    return request(
        "tools/call", {"name": "notes_read", "arguments": {"workspaceUri": WS, "noteId": note_id}}
    )


def with_token(headers: dict[str, str], token: str) -> dict[str, str]:
    return {**headers, "Authorization": f"Bearer {token}"}


def cases(token: str) -> dict[str, tuple[bytes, dict[str, str]]]:
    body, headers = read_note()
    listing, list_headers = request("tools/list")
    note, note_headers = request("notifications/cancelled", {"requestId": 1}, id=None)
    legacy = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
    ).encode()
    authed = with_token(headers, token)
    return {
        "plain read (tool error: unknown note)": (body, authed),
        "tools/list": (listing, with_token(list_headers, token)),
        "notification: 202": (note, with_token(note_headers, token)),
        "allowed Origin: CORS headers": (body, {**authed, "Origin": ORIGIN}),
        "refused Origin: 403": (body, {**authed, "Origin": "http://evil.example"}),
        "foreign Host: 403": (body, {**authed, "Host": "evil.example"}),
        "no token: 401": (body, headers),
        "wrong token: 401 with error": (body, with_token(headers, "nst_" + "A" * 43)),
        "401 for an allowed Origin keeps CORS": (body, {**headers, "Origin": ORIGIN}),
        "Accept without SSE: 406": (body, {**authed, "Accept": "application/json"}),
        "form Content-Type: 415": (
            body,
            {**authed, "Content-Type": "application/x-www-form-urlencoded"},
        ),
        "declared too large: 413": (body, {**authed, "Content-Length": str(10**9)}),
        "header mismatch: -32020": (body, {**authed, "Mcp-Name": "notes_search"}),
        "unknown method: 404": (
            request("nope/nope")[0],
            with_token({**request("nope/nope")[1]}, token),
        ),
        "malformed JSON: -32700": (b'{"jsonrpc": "2.0",', authed),
        "params too deep for the parser: -32602 with the id": (deep_params(), authed),
        "legacy initialize: replayed": (
            legacy,
            {**authed, "Mcp-Method": "initialize", "MCP-Protocol-Version": "2025-11-25"},
        ),
        "session id on a modern request: ignored": (body, {**authed, "Mcp-Session-Id": "x"}),
        "legacy request in an unknown session: 404": (
            b'{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}',
            {**authed, "Mcp-Method": "tools/list", "Mcp-Session-Id": "nope"},
        ),
    }


def deep_params(levels: int = 5_000) -> bytes:
    deep = b"[" * levels + b"]" * levels
    return b'{"jsonrpc":"2.0","id":84619,"method":"tools/list","params":{"x":' + deep + b"}}"


CASE_IDS = list(cases("t"))


@pytest.mark.parametrize("case", CASE_IDS)
def test_the_single_pass_handler_answers_like_the_middleware_stack(
    app: McpPostFastPath, token: str, case: str
) -> None:
    body, headers = cases(token)[case]
    headers = {"Content-Length": str(len(body)), **headers}
    fast = run_asgi(app, scope_for(headers), body)
    stack = run_asgi(app.fallback, scope_for(headers), body)
    assert without_session_id(fast) == without_session_id(stack)


def open_session(app: McpPostFastPath, token: str) -> str:
    """A 2025-11-25 session opened through the app; its `Mcp-Session-Id`."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    body = json.dumps(message).encode()
    headers = with_token({"Host": "127.0.0.1:8765", "Content-Type": "application/json"}, token) | {
        "Accept": "application/json, text/event-stream",
        "Content-Length": str(len(body)),
    }
    status, response_headers, _ = run_asgi(app, scope_for(headers), body)
    assert status == 200
    return dict(response_headers)[b"mcp-session-id"].decode()


def session_cases(token: str, session: str) -> dict[str, tuple[bytes, dict[str, str]]]:
    """2025-era traffic inside a live session: the single-pass handler answers it."""
    in_session = {
        "Host": "127.0.0.1:8765",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Session-Id": session,
        "MCP-Protocol-Version": "2025-11-25",
    }
    authed = with_token(in_session, token)

    def message(method: str, params: dict[str, Any] | None = None) -> bytes:
        return json.dumps(
            {"jsonrpc": "2.0", "id": 5, "method": method, "params": params or {}}
        ).encode()

    read = message(
        "tools/call", {"name": "notes_read", "arguments": {"workspaceUri": WS, "noteId": "0" * 32}}
    )
    answer = b'{"jsonrpc":"2.0","id":"s-0123456789abcdef","result":{"action":"decline"}}'
    return {
        "tools/list": (message("tools/list"), authed),
        "tools/call (tool error: unknown note)": (read, authed),
        "notification: 202": (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', authed),
        "an answer to no open question: 202": (answer, authed),
        "another protocol version: 400": (
            message("tools/list"),
            {**authed, "MCP-Protocol-Version": "2025-06-18"},
        ),
        "allowed Origin: CORS headers": (message("tools/list"), {**authed, "Origin": ORIGIN}),
        "refused Origin: 403": (message("tools/list"), {**authed, "Origin": "http://evil.example"}),
        "no token: 401": (message("tools/list"), in_session),
        "Accept without SSE: 406": (
            message("tools/list"),
            {**authed, "Accept": "application/json"},
        ),
        "declared too large: 413": (message("tools/list"), {**authed, "Content-Length": "9" * 10}),
        "malformed JSON: -32700": (b'{"jsonrpc": "2.0",', authed),
        "params too deep for the parser: -32602 with the id": (deep_params(), authed),
        "a modern request in a session: the stateless pipeline": (
            read_note()[0],
            {
                **with_token(read_note()[1], token),
                "Mcp-Session-Id": session,
            },
        ),
    }


SESSION_CASE_IDS = list(session_cases("t", "s"))


@pytest.mark.parametrize("case", SESSION_CASE_IDS)
def test_session_traffic_is_answered_like_the_middleware_stack(
    app: McpPostFastPath, token: str, case: str
) -> None:
    session = open_session(app, token)
    body, headers = session_cases(token, session)[case]
    headers = {"Content-Length": str(len(body)), **headers}
    fast = run_asgi(app, scope_for(headers), body)
    stack = run_asgi(app.fallback, scope_for(headers), body)
    assert fast == stack


def test_session_traffic_never_enters_the_stack(app: McpPostFastPath, token: str) -> None:
    session = open_session(app, token)

    async def unreachable(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError(f"the stack was entered for {scope['method']} {scope['path']}")

    app.fallback = unreachable
    cases = session_cases(token, session)
    statuses = {}
    for case in ("tools/list", "tools/call (tool error: unknown note)", "notification: 202"):
        body, headers = cases[case]
        headers = {**headers, "Content-Length": str(len(body))}
        statuses[case] = run_asgi(app, scope_for(headers), body)[0]
    assert statuses == {
        "tools/list": 200,
        "tools/call (tool error: unknown note)": 200,
        "notification: 202": 202,
    }


def without_session_id(outcome: Outcome) -> Outcome:
    """A new session's id is random: only its presence must match."""
    status, headers, body = outcome
    return status, [(k, b"<id>" if k == b"mcp-session-id" else v) for k, v in headers], body


def test_a_plain_read_is_answered_with_json_and_cors_for_an_allowed_origin(
    app: McpPostFastPath, token: str
) -> None:
    body, headers = read_note()
    headers = {**with_token(headers, token), "Origin": ORIGIN, "Content-Length": str(len(body))}
    status, response_headers, content = run_asgi(app, scope_for(headers), body)
    assert status == 200
    assert dict(response_headers) == {
        b"content-length": str(len(content)).encode(),
        b"content-type": b"application/json",
        b"access-control-allow-origin": ORIGIN.encode(),
        b"access-control-expose-headers": b"mcp-session-id, www-authenticate",
        b"vary": b"Origin",
    }
    reply = json.loads(content)
    assert reply["id"] == 1 and reply["result"]["isError"] is True


def test_other_paths_and_methods_reach_the_stack(app: McpPostFastPath, token: str) -> None:
    headers = with_token({"Host": "127.0.0.1:8765"}, token)
    assert run_asgi(app, scope_for(headers, method="GET"), b"")[0] == 405
    assert run_asgi(app, scope_for(headers, path="/nothing"), b"")[0] == 404


def test_an_authenticator_failure_is_a_json_500_from_both(settings: Settings, server: Any) -> None:
    class Broken:
        requires_credentials = True

        def principal_for(self, authorization: Any) -> str | None:
            raise RuntimeError("secret detail")

    app = build_http_app(server, Broken(), HttpSettings())
    assert isinstance(app, McpPostFastPath)
    body, headers = read_note()
    headers = {**headers, "Authorization": "Bearer x", "Content-Length": str(len(body))}
    fast = run_asgi(app, scope_for(headers), body)
    assert fast == run_asgi(app.fallback, scope_for(headers), body)
    assert fast[0] == 500
    assert json.loads(fast[2]) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": "Internal error"},
    }


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


def test_the_hot_path_never_enters_the_stack(app: McpPostFastPath, token: str) -> None:
    async def unreachable(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError(f"the stack was entered for {scope['method']} {scope['path']}")

    app.fallback = unreachable
    for body, headers in (read_note(), request("tools/list")):
        headers = {**with_token(headers, token), "Content-Length": str(len(body))}
        status, _, content = run_asgi(app, scope_for(headers), body)
        assert status == 200 and json.loads(content)["id"] == 1


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


def test_headers_that_passed_before_do_not_let_refused_ones_through(
    app: McpPostFastPath, token: str
) -> None:
    """The handler remembers Host and media-type values that passed; each request is still
    checked on its own values, in any order."""
    body, headers = read_note()
    good = {**with_token(headers, token), "Content-Length": str(len(body))}
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
