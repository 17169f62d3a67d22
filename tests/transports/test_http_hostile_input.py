"""Hostile HTTP input: look-alike Host and Origin values, Content-Type parameters, and a client
that trickles its request head (checked against a real uvicorn process on a raw socket)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.datastructures import Headers
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.store import migrate
from notes_server.store.engine import make_engine
from notes_server.transports.http.middleware.guard import OriginHostGuard
from notes_server.transports.http.protocol import HEADER_TIMEOUT_S, MAX_HEAD_BYTES
from tests.transports.http_support import LOOPBACK_URL, HttpServer, rpc, start_http_server

HOST_REFUSED = "Forbidden: Host not allowed"
ORIGIN_REFUSED = "Forbidden: Origin not allowed"
LOOPBACK = HttpSettings()
PUBLIC = HttpSettings(
    host="0.0.0.0", allowed_origins=("https://app.example",), public_url="https://notes.example"
)


async def _unreached(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not reached")


def problem(http: HttpSettings, *pairs: tuple[str, str]) -> str | None:
    raw = [(k.lower().encode(), v.encode("latin-1")) for k, v in pairs]
    return OriginHostGuard(_unreached, http).problem(Headers(raw=raw))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8765.evil.com",
        "localhost:8765, evil.com",
        "localhost, evil.com",
        "evil.com, localhost",
        "127.0.0.1:",
        "127.0.0.1:99999",
        "127.0.0.1:8765:8765",
        "127.0.0.1:\u00b2",
        "user@127.0.0.1",
        "127.0.0.1/evil",
        "127.0.0.1 evil.com",
        "::1",
        "[127.0.0.1]",
        "localhost.",
        "127.1",
        "0x7f.0.0.1",
    ],
)
def test_look_alike_hosts_are_refused_on_a_loopback_bind(host: str) -> None:
    assert problem(LOOPBACK, ("Host", host)) == HOST_REFUSED


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8765", "LocalHost:1", "[::1]:80"])
def test_exact_loopback_hosts_with_any_port_are_allowed(host: str) -> None:
    assert problem(LOOPBACK, ("Host", host)) is None


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.com:80@127.0.0.1",
        "http://127.0.0.1@evil.com",
        "http://127.0.0.1/path",
        "http://127.0.0.1:8765?x=1",
        "http://127.0.0.1#x",
        "http://127.0.0.1:8765.evil.com",
        "http://localhost, http://evil.com",
        "http://127.0.0.1:99999",
        "ftp://127.0.0.1",
        "http//127.0.0.1",
        "127.0.0.1",
    ],
)
def test_look_alike_origins_are_refused(origin: str) -> None:
    assert problem(LOOPBACK, ("Host", "127.0.0.1"), ("Origin", origin)) == ORIGIN_REFUSED


def test_a_configured_origin_must_also_be_well_formed() -> None:
    headers = ("Host", "notes.example")
    assert problem(PUBLIC, headers, ("Origin", "https://app.example")) is None
    assert problem(PUBLIC, headers, ("Origin", "https://user@app.example")) == ORIGIN_REFUSED
    assert problem(PUBLIC, ("Host", "notes.example:443, evil.com")) is None  # public: no Host rule


@pytest.fixture
def client(settings: Settings, migrated_engine: object) -> Iterator[TestClient]:
    app = create_http_app(settings, HttpSettings(auth="none"))
    with TestClient(app, base_url=LOOPBACK_URL) as test_client:
        yield test_client


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        'application/json; charset="UTF-8"',
        "application/json;charset=utf8",
        "application/json; foo=bar",
        "application/json; foo=bar; charset=utf-8",
        'application/json; profile="a b"',
        "application/json;",
    ],
)
def test_json_with_parameters_is_accepted(client: TestClient, content_type: str) -> None:
    body, headers = rpc("server/discover")
    headers["Content-Type"] = content_type

    response = client.post("/mcp", content=body, headers=headers)

    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=latin-1",
        "application/json; charset=utf-16",
        "application/json; charset",
        "application/json; =utf-8",
        "application/json; foo=a b",
        "application/jsonx",
        "application/json-seq",
        "text/json",
        "",
    ],
)
def test_other_media_types_and_charsets_are_unsupported(
    client: TestClient, content_type: str
) -> None:
    body, headers = rpc("server/discover")
    headers["Content-Type"] = content_type

    response = client.post("/mcp", content=body, headers=headers)

    assert response.status_code == 415
    assert response.json()["error"]["code"] == -32600


@pytest.mark.parametrize("length", ["\u00b2", "1" * 5000])
def test_a_content_length_that_is_not_a_small_ascii_number_is_too_large(
    client: TestClient, length: str
) -> None:
    body, headers = rpc("server/discover")
    sent: dict[str, str | bytes] = {**headers, "Content-Length": length.encode("latin-1")}

    response = client.post("/mcp", content=body, headers=sent)

    assert response.status_code == 413


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    tmp: Path = tmp_path_factory.mktemp("http-hostile")
    url = f"sqlite:///{tmp}/notes.db"
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    server = start_http_server(tmp, url, "--auth", "none", "--principal", "alice")
    yield server
    server.stop()


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}.evil.com", "localhost:{port}, evil.com", "127.0.0.1:{port}:1"]
)
def test_a_real_server_refuses_look_alike_hosts(live: HttpServer, host: str) -> None:
    body, headers = rpc("server/discover")
    headers["Host"] = host.format(port=live.port)

    response = httpx.post(f"{live.url}/mcp", content=body, headers=headers, timeout=30)

    assert response.status_code == 403
    assert response.json()["error"]["message"] == HOST_REFUSED


def test_a_real_server_refuses_an_origin_with_userinfo(live: HttpServer) -> None:
    body, headers = rpc("server/discover")
    headers["Origin"] = "http://evil.com:80@127.0.0.1"

    response = httpx.post(f"{live.url}/mcp", content=body, headers=headers, timeout=30)

    assert response.status_code == 403
    assert response.json()["error"]["message"] == ORIGIN_REFUSED


def closed_within(sock: socket.socket, limit: float, trickle: bool) -> float:
    """Seconds until the server closed `sock`; fails after `limit`. With `trickle`, one more
    header byte is sent every second (the socket timeout paces it; nothing sleeps)."""
    started = time.monotonic()
    sock.settimeout(1.0)
    while (elapsed := time.monotonic() - started) < limit:
        try:
            if trickle:
                sock.sendall(b"x")
            if sock.recv(1024) == b"":
                return elapsed
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return elapsed
    raise AssertionError(f"the server kept the connection open for {limit:.0f} s")


def test_a_client_trickling_its_request_head_is_disconnected(live: HttpServer) -> None:
    limit = HEADER_TIMEOUT_S + 10
    with (
        socket.create_connection(("127.0.0.1", live.port)) as silent,
        socket.create_connection(("127.0.0.1", live.port)) as trickler,
    ):
        trickler.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")

        trickled = closed_within(trickler, limit, trickle=True)
        idle = closed_within(silent, limit, trickle=False)

    assert HEADER_TIMEOUT_S - 1 <= trickled <= HEADER_TIMEOUT_S + 3
    assert idle <= 1  # connected at the same moment, so its deadline has passed as well


def read_response(sock: socket.socket) -> bytes:
    """One HTTP/1.1 response (head and Content-Length body) from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0]


def test_a_prompt_client_is_served_request_after_request_on_one_connection(
    live: HttpServer,
) -> None:
    body, headers = rpc("server/discover")
    headers.update({"Host": f"127.0.0.1:{live.port}", "Content-Length": str(len(body))})
    request = b"POST /mcp HTTP/1.1\r\n"
    request += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n" + body
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        statuses = []
        for _ in range(3):
            sock.sendall(request)
            statuses.append(read_response(sock))

    assert statuses == [b"HTTP/1.1 200 OK"] * 3


def read_until_closed(sock: socket.socket) -> bytes:
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    return reply


def test_an_incomplete_request_head_past_the_size_bound_gets_431_and_is_closed(
    live: HttpServer,
) -> None:
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (MAX_HEAD_BYTES + 1024)
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        sock.sendall(head)  # never finished: the bound applies while the head is incomplete
        reply = read_until_closed(sock)

    assert reply.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert b"connection: close\r\n" in reply


@pytest.mark.parametrize("size", [17_000, 40_000, 100_000])
def test_a_whole_request_head_past_the_size_bound_in_one_write_gets_431_unserved(
    live: HttpServer, size: int
) -> None:
    body, headers = rpc("server/discover")
    headers.update({"Host": f"127.0.0.1:{live.port}", "Content-Length": str(len(body))})
    headers["X-Big"] = "a" * size
    request = b"POST /mcp HTTP/1.1\r\n"
    request += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n" + body
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        sock.sendall(request)  # one write: the head is complete in the server's first read
        reply = read_until_closed(sock)

    assert reply.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert reply.count(b"HTTP/1.1 ") == 1 and b"jsonrpc" not in reply  # never dispatched


def test_a_head_just_under_the_size_bound_with_a_large_body_in_the_same_write_is_served(
    live: HttpServer,
) -> None:
    body, headers = rpc("server/discover")
    padded = body + b" " * (3 * MAX_HEAD_BYTES)  # JSON whitespace: the same request
    headers.update({"Host": f"127.0.0.1:{live.port}", "Content-Length": str(len(padded))})
    headers["X-Pad"] = "a" * (MAX_HEAD_BYTES - 1024)
    request = b"POST /mcp HTTP/1.1\r\n"
    request += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers.items()) + b"\r\n"
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        sock.sendall(request + padded)
        status = read_response(sock)

    assert status == b"HTTP/1.1 200 OK"
