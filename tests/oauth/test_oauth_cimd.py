"""Client ID Metadata Documents: a flow with a document served on loopback (development
addresses allowed), and the hardened fetch's refusals."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.features.oauth.cimd import MetadataFetcher, MetadataRefused, address_allowed
from notes_server.security.sandbox import abi_version
from notes_server.tools.services import Services
from tests.oauth.oauth_support import ISSUER, RESOURCE, WS_A, csrf_of, pkce, query_of
from tests.oauth.test_oauth_flow import call


class Documents(BaseHTTPRequestHandler):
    """Serves `routes[path] = (status, headers, body, delay)`; counts requests per path."""

    routes: dict[str, tuple[int, dict[str, str], bytes, float]] = {}  # noqa: RUF012
    hits: dict[str, int] = {}  # noqa: RUF012

    def do_GET(self) -> None:
        status, headers, body, delay = self.routes.get(self.path, (404, {}, b"", 0.0))
        self.hits[self.path] = self.hits.get(self.path, 0) + 1
        if delay:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(delay)
            return
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def documents() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Documents)
    Documents.routes, Documents.hits = {}, {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def serve(base: str, path: str, document: Any, **kw: Any) -> str:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()
    Documents.routes[path] = (
        kw.get("status", 200),
        kw.get("headers", {}),
        body,
        kw.get("delay", 0.0),
    )
    return base + path


def client_document(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "client_id": url,
        "client_name": "Metadata Client",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "token_endpoint_auth_method": "none",
        **extra,
    }


@pytest.fixture
def dev_client(settings: Settings, services: Services, accounts: Any) -> Iterator[TestClient]:
    http = HttpSettings(auth="oauth", public_url=ISSUER, oauth_dev_addresses=True)
    app = create_http_app(settings, http, Services(settings, engine=services.engine))
    with TestClient(app, base_url=ISSUER, follow_redirects=False) as client:
        yield client


def test_metadata_says_client_id_metadata_documents_are_supported(dev_client: TestClient) -> None:
    document = dev_client.get("/.well-known/oauth-authorization-server").json()
    assert document["client_id_metadata_document_supported"] is True


def test_a_metadata_document_client_completes_a_flow_fetched_once(
    dev_client: TestClient, documents: str, migrated_engine: Any
) -> None:
    url = documents + "/client.json"
    serve(documents, "/client.json", client_document(url), headers={"Cache-Control": "max-age=600"})
    verifier, challenge = pkce()
    params = {
        "response_type": "code",
        "client_id": url,
        "redirect_uri": "http://127.0.0.1:5000/callback",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s",
        "resource": RESOURCE,
    }
    assert dev_client.get("/oauth/authorize?" + urlencode(params)).status_code == 303
    form = dev_client.get("/oauth/sign-in")
    assert "Metadata Client" in form.text
    dev_client.post(
        "/oauth/sign-in",
        data={"csrf": csrf_of(form.text), "principal": "alice", "password": "alice-password-1"},
    )
    page = dev_client.get("/oauth/consent")
    assert "127.0.0.1" in page.text  # the document's host is shown
    answer = dev_client.post(
        "/oauth/consent", data={"csrf": csrf_of(page.text), "decision": "allow", "workspace": WS_A}
    )
    code = query_of(answer.headers["location"])["code"]
    tokens = dev_client.post(
        "/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "client_id": url,
            "redirect_uri": "http://127.0.0.1:5000/callback",
            "code_verifier": verifier,
        },
    )
    assert tokens.status_code == 200, tokens.text
    assert "error" not in call(dev_client, tokens.json()["access_token"], WS_A).json()
    assert Documents.hits["/client.json"] == 1  # cached per max-age across every step
    expire_cached_documents(migrated_engine)
    assert dev_client.get("/oauth/authorize?" + urlencode(params)).status_code == 303
    assert Documents.hits["/client.json"] == 2  # fetched again once the cached copy expired


def expire_cached_documents(engine: Any) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from notes_server.store.engine import write_tx
    from notes_server.store.models import oauth_clients_table as clients
    from notes_server.tools.services import utc_now

    with write_tx(engine) as conn:
        conn.execute(update(clients).values(expires_at=utc_now() - timedelta(seconds=1)))


def test_a_redirect_uri_not_in_the_document_is_refused(
    dev_client: TestClient, documents: str
) -> None:
    url = documents + "/c.json"
    serve(documents, "/c.json", client_document(url))
    _, challenge = pkce()
    params = {
        "response_type": "code",
        "client_id": url,
        "redirect_uri": "http://127.0.0.1/other",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    answer = dev_client.get("/oauth/authorize?" + urlencode(params))
    assert answer.status_code == 400 and "location" not in answer.headers


def fetcher(**kw: Any) -> MetadataFetcher:
    return MetadataFetcher(allow_dev_addresses=True, **kw)


def test_a_document_whose_client_id_differs_from_its_url_is_refused(documents: str) -> None:
    url = serve(documents, "/a.json", client_document("https://elsewhere.example/a.json"))
    with pytest.raises(MetadataRefused, match="differs from its URL"):
        fetcher().fetch(url)


def test_a_document_that_is_too_large_is_refused(documents: str) -> None:
    url = documents + "/big.json"
    serve(documents, "/big.json", client_document(url, padding="x" * 40000))
    with pytest.raises(MetadataRefused, match="too large"):
        fetcher().fetch(url)


def test_a_slow_document_is_refused(documents: str) -> None:
    url = documents + "/slow.json"
    serve(documents, "/slow.json", json.dumps(client_document(url)).encode(), delay=0.05)
    with pytest.raises(MetadataRefused, match=r"took too long|could not be fetched"):
        fetcher(timeout_s=0.5).fetch(url)


def test_a_redirecting_document_is_not_followed(documents: str) -> None:
    url = serve(documents, "/r.json", b"", status=302, headers={"Location": "https://x.example/"})
    with pytest.raises(MetadataRefused, match="redirects"):
        fetcher().fetch(url)


def test_without_the_dev_flag_loopback_documents_are_refused(documents: str) -> None:
    url = documents + "/c.json"
    serve(documents, "/c.json", client_document(url))
    with pytest.raises(MetadataRefused, match="https"):
        MetadataFetcher().fetch(url)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.1.1",
        "172.16.0.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "100.64.0.1",
        "0.0.0.0",
        "::ffff:127.0.0.1",
        "224.0.0.1",
        "fd00::1",
    ],
)
def test_https_documents_on_non_public_addresses_are_refused(address: str) -> None:
    resolved = MetadataFetcher(resolver=lambda host, port: [address])
    with pytest.raises(MetadataRefused, match="not a public address"):
        resolved.fetch("https://client.example/metadata.json")
    assert not address_allowed(address, allow_dev=False)


def test_a_name_resolving_to_a_public_and_a_private_address_is_refused() -> None:
    resolved = MetadataFetcher(resolver=lambda host, port: ["93.184.216.34", "10.0.0.1"])
    with pytest.raises(MetadataRefused, match="not a public address"):
        resolved.fetch("https://client.example/metadata.json")


@pytest.mark.parametrize(
    "url",
    ["https://user@client.example/m.json", "https://client.example/", "ftp://client.example/m"],
)
def test_unusable_client_id_urls_are_refused(url: str) -> None:
    with pytest.raises(MetadataRefused):
        MetadataFetcher(resolver=lambda host, port: ["93.184.216.34"]).fetch(url)


def test_an_unknown_metadata_client_is_refused_on_a_page(dev_client: TestClient) -> None:
    _, challenge = pkce()
    params = {
        "response_type": "code",
        "client_id": "https://203.0.113.1.invalid/c.json",
        "redirect_uri": "http://127.0.0.1/callback",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    answer = dev_client.get("/oauth/authorize?" + urlencode(params))
    assert answer.status_code == 400 and "location" not in answer.headers


@pytest.mark.skipif(abi_version() < 4, reason="needs Landlock ABI >= 4 (TCP rules)")
def test_a_confined_server_fetches_a_development_metadata_document(
    tmp_path: Any, migrated_engine: Any, documents: str
) -> None:
    """The fetch runs inside the sandboxed server (`--sandbox require`): with
    `--oauth-dev-addresses` outgoing TCP is open, and the document on loopback is used."""
    from tests.helpers import free_port
    from tests.transports.http_support import start_http_server

    url = documents + "/confined.json"
    serve(documents, "/confined.json", client_document(url))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = ("--auth", "oauth", "--port", str(port), "--public-url", base)
    server = start_http_server(
        tmp_path, str(migrated_engine.url), *args, "--oauth-dev-addresses", "--sandbox", "require"
    )
    _, challenge = pkce()
    params = {
        "response_type": "code",
        "client_id": url,
        "redirect_uri": "http://127.0.0.1/callback",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    try:
        answer = httpx.get(f"{base}/oauth/authorize?{urlencode(params)}", timeout=30)
    finally:
        server.stop()
    assert answer.status_code == 303, answer.text
    assert Documents.hits["/confined.json"] == 1
