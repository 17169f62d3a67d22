"""Driving the authorization server like a client and a browser would, over a TestClient or
over real HTTP (any httpx client with its own cookie jar)."""

from __future__ import annotations

import base64
import functools
import hashlib
import ipaddress
import json
import re
import secrets
import ssl
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from sqlalchemy import Engine

from notes_server.config import HttpSettings
from notes_server.security.passwords import hash_password
from notes_server.store import oauth as store
from notes_server.store.engine import write_tx
from notes_server.tools.services import utc_now

WS_A = "file:///srv/team/alpha"
WS_B = "file:///srv/team/beta"
WS_C = "file:///srv/bob/only"
ISSUER = "http://127.0.0.1:8765"
RESOURCE = ISSUER + "/mcp"
REDIRECT = "http://127.0.0.1/callback"
OAUTH = HttpSettings(auth="oauth", public_url=ISSUER)
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@functools.cache
def _argon2id_of(password: str) -> str:
    """The product's hash of `password`, made once per process: argon2id costs about 0.2 s of
    CPU on purpose, and every test of an account needs the same few. Each test has a database
    of its own, so no test sees a salt twice."""
    return hash_password(password)


def set_password(engine: Engine, principal: str, password: str) -> None:
    with write_tx(engine) as conn:
        store.set_password(conn, principal, _argon2id_of(password), utc_now())


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found is not None, html
    return found.group(1)


def query_of(location: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


class Flow:
    """One client (registered dynamically) and one person's browser (the HTTP client's jar)."""

    issuer = ISSUER
    resource = RESOURCE

    def __init__(
        self, client: httpx.Client, redirect_uri: str = REDIRECT, issuer: str = ISSUER
    ) -> None:
        self.client = client
        self.redirect_uri = redirect_uri
        self.issuer = issuer
        self.resource = issuer + "/mcp"
        registered = client.post(
            "/oauth/register",
            json={
                "client_name": "Test Assistant",
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": "none",
            },
        )
        assert registered.status_code == 201, registered.text
        self.client_id = registered.json()["client_id"]
        self.verifier, self.challenge = pkce()

    def authorize_params(self, **overrides: Any) -> dict[str, str]:
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": self.redirect_uri,
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "state": "state-123",
            "resource": self.resource,
        }
        params.update(overrides)
        return {k: v for k, v in params.items() if v is not None}

    def start(self, **overrides: Any) -> httpx.Response:
        return self.client.get("/oauth/authorize?" + urlencode(self.authorize_params(**overrides)))

    def sign_in(self, principal: str, password: str) -> httpx.Response:
        started = self.start()
        assert started.status_code == 303, started.text
        assert started.headers["location"] == "/oauth/sign-in"
        form = self.client.get("/oauth/sign-in")
        assert form.status_code == 200, form.text
        return self.client.post(
            "/oauth/sign-in",
            data={"csrf": csrf_of(form.text), "principal": principal, "password": password},
        )

    def consent_page(self, principal: str = "alice", password: str = "alice-password-1") -> str:
        signed = self.sign_in(principal, password)
        assert signed.status_code == 303, signed.text
        page = self.client.get("/oauth/consent")
        assert page.status_code == 200, page.text
        return page.text

    def consent(self, workspaces: list[str], principal: str = "alice", **kw: Any) -> httpx.Response:
        page = self.consent_page(principal, kw.pop("password", "alice-password-1"))
        data: list[tuple[str, str]] = [("csrf", csrf_of(page)), ("decision", "allow")]
        data += [("workspace", ws) for ws in workspaces]
        return self.client.post(
            "/oauth/consent",
            content=urlencode(data),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )

    def code(self, workspaces: list[str] | None = None) -> str:
        answer = self.consent(workspaces or [WS_A])
        assert answer.status_code == 302, answer.text
        params = query_of(answer.headers["location"])
        assert params["state"] == "state-123"
        assert params["iss"] == self.issuer
        return params["code"]

    def exchange(self, code: str, **overrides: Any) -> httpx.Response:
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "client_id": self.client_id,
            "code_verifier": self.verifier,
            "resource": self.resource,
        }
        data.update(overrides)
        return self.client.post("/oauth/token", data={k: v for k, v in data.items() if v})

    def tokens(self, workspaces: list[str] | None = None) -> dict[str, Any]:
        answer = self.exchange(self.code(workspaces))
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def refresh(self, refresh_token: str) -> httpx.Response:
        return self.client.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": refresh_token,
                "client_id": self.client_id,
            },
        )


class MetadataDocumentHost:
    """A client's metadata document over https on loopback (RFC 8252 hosts serve theirs on the
    web; a test has only loopback, so the server needs `--oauth-dev-addresses`). The
    certificate is self-signed for 127.0.0.1; the server trusts it through `SSL_CERT_FILE`
    (`ssl.create_default_context` reads it). Counts how often the document was fetched."""

    def __init__(self, directory: Path, document: Callable[[str], dict[str, Any]]) -> None:
        self.cert_file = directory / "metadata-host.pem"
        key_file = directory / "metadata-host.key"
        write_self_signed(self.cert_file, key_file)
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/client.json":
                    self.send_error(404)
                    return
                host.hits += 1
                body = json.dumps(document(host.url)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.hits = 0
        self.listener = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, key_file)
        self.listener.socket = context.wrap_socket(self.listener.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.listener.server_address[1]}/client.json"
        threading.Thread(target=self.listener.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.listener.shutdown()
        self.listener.server_close()


def write_self_signed(cert_file: Path, key_file: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
