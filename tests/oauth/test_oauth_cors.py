"""CORS on the authorization server over real HTTP (`serve --auth oauth`): a host that runs the
flow from browser JavaScript on another origin can read the metadata, register, exchange a code,
see an error and revoke; the authorization request and the pages stay navigation-only; `/mcp`
keeps its own origin policy. The same in headless Chromium, where a page on a foreign origin
calls the endpoints with fetch() and reads their JSON (needs `scripts/apps-browser`)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from notes_server.app import create_http_app
from notes_server.config import HttpSettings, Settings
from notes_server.tools.services import Services
from tests.approval.test_purge_browser import CHROMIUM, DRIVER, NODE, browser_or_skip
from tests.helpers import free_port
from tests.oauth.oauth_support import ISSUER, OAUTH, WS_A, Flow, pkce, set_password
from tests.transports.http_support import rpc, start_http_server

FOREIGN = "https://web-host.example"
SCRIPT = Path(__file__).resolve().parent / "oauth_cors_browser.mjs"
OPEN = (
    ("/oauth/token", "POST"),
    ("/oauth/revoke", "POST"),
    ("/oauth/register", "POST"),
    ("/.well-known/oauth-authorization-server", "GET"),
    ("/.well-known/oauth-protected-resource", "GET"),
    ("/.well-known/oauth-protected-resource/mcp", "GET"),
)
PAGES = ("/oauth/authorize", "/oauth/sign-in", "/oauth/consent")
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def base(tmp_path: Path, migrated_engine: Any, grant: Any) -> Iterator[str]:
    """A real `serve --auth oauth` whose public URL is its own address; alice owns WS_A."""
    grant("alice", WS_A)
    set_password(migrated_engine, "alice", "alice-password-1")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_http_server(
        tmp_path,
        str(migrated_engine.url),
        "--auth",
        "oauth",
        "--port",
        str(port),
        "--public-url",
        url,
    )
    try:
        yield url
    finally:
        server.stop()


def preflight(base: str, path: str, method: str, origin: str = FOREIGN) -> httpx.Response:
    return httpx.options(
        base + path,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
        timeout=30,
    )


def assert_open_cors(answer: httpx.Response) -> None:
    assert answer.headers["access-control-allow-origin"] == "*"
    assert answer.headers["access-control-expose-headers"] == "www-authenticate"
    assert "access-control-allow-credentials" not in answer.headers


def assert_no_cors(answer: httpx.Response) -> None:
    assert not [name for name in answer.headers if name.startswith("access-control-")]


def code_for(base: str, browser: httpx.Client) -> tuple[Flow, str]:
    """A code for a freshly registered client, the person's steps done by `browser` (plain
    navigations: no Origin header, as a browser sends none on a GET navigation)."""
    flow = Flow(browser, issuer=base)
    return flow, flow.code([WS_A])


def test_a_preflight_from_any_origin_to_the_client_endpoints_gets_204_with_star(
    base: str,
) -> None:
    for path, method in OPEN:
        answer = preflight(base, path, method)
        assert answer.status_code == 204, (path, answer.text)
        assert answer.headers["access-control-allow-origin"] == "*"
        assert answer.headers["access-control-allow-methods"] == method
        allowed = {h.strip() for h in answer.headers["access-control-allow-headers"].split(",")}
        assert {"authorization", "content-type", "mcp-protocol-version"} <= allowed
        assert answer.headers["access-control-max-age"] == "600"
        assert "access-control-allow-credentials" not in answer.headers
        assert answer.content == b""


def test_the_metadata_documents_are_readable_from_any_origin_and_identical_without_one(
    base: str,
) -> None:
    for path in (
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        foreign = httpx.get(base + path, headers={"Origin": FOREIGN}, timeout=30)
        plain = httpx.get(base + path, timeout=30)
        assert foreign.status_code == 200 and plain.status_code == 200
        assert_open_cors(foreign)
        assert_open_cors(plain)  # a cached copy serves a browser just as well
        assert "vary" not in foreign.headers
        assert foreign.json() == plain.json()
    document = httpx.get(base + "/.well-known/oauth-authorization-server", timeout=30).json()
    assert document["token_endpoint"] == base + "/oauth/token"


def test_a_foreign_origin_registers_exchanges_a_code_and_revokes_with_cors(base: str) -> None:
    with (
        httpx.Client(base_url=base, timeout=30) as browser,
        httpx.Client(base_url=base, timeout=30, headers={"Origin": FOREIGN}) as script,
    ):
        registered = script.post(
            "/oauth/register",
            json={
                "client_name": "Web Host",
                "redirect_uris": ["https://web-host.example/callback"],
                "token_endpoint_auth_method": "none",
            },
        )
        assert registered.status_code == 201, registered.text
        assert_open_cors(registered)
        assert registered.json()["client_name"] == "Web Host"

        flow, code = code_for(base, browser)
        exchange = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": flow.redirect_uri,
            "client_id": flow.client_id,
            "code_verifier": flow.verifier,
            "resource": flow.resource,
        }
        tokens = script.post("/oauth/token", data=exchange)
        assert tokens.status_code == 200, tokens.text
        assert_open_cors(tokens)
        assert tokens.json()["token_type"] == "Bearer"

        revoked = script.post(
            "/oauth/revoke",
            data={"token": tokens.json()["refresh_token"], "client_id": flow.client_id},
        )
        assert revoked.status_code == 200, revoked.text
        assert_open_cors(revoked)


def test_an_invalid_grant_from_a_foreign_origin_still_carries_cors(base: str) -> None:
    with (
        httpx.Client(base_url=base, timeout=30) as browser,
        httpx.Client(base_url=base, timeout=30, headers={"Origin": FOREIGN}) as script,
    ):
        flow, code = code_for(base, browser)
        exchange = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": flow.redirect_uri,
            "client_id": flow.client_id,
            "code_verifier": pkce()[0],  # not the verifier of this code's challenge
        }
        refused = script.post("/oauth/token", data=exchange)
        assert refused.status_code == 400
        assert refused.json()["error"] == "invalid_grant"
        assert_open_cors(refused)

        not_a_form = script.post("/oauth/token", json=exchange)
        assert not_a_form.status_code == 400
        assert not_a_form.json()["error"] == "invalid_request"
        assert_open_cors(not_a_form)


def test_the_authorization_request_and_pages_give_scripts_no_cors(base: str) -> None:
    other_loopback = "http://localhost:9"  # allowed to call /mcp on a loopback bind, not these
    for path in PAGES:
        for origin in (FOREIGN, other_loopback):
            for method in ("GET", "POST"):
                answer = preflight(base, path, method, origin)
                assert answer.status_code == 403, (path, origin, answer.text)
                assert_no_cors(answer)
            fetched = httpx.get(base + path, headers={"Origin": origin}, timeout=30)
            assert fetched.status_code == 403, (path, origin, fetched.text)
            assert_no_cors(fetched)

    seen: list[httpx.Response] = []
    with httpx.Client(
        base_url=base, timeout=30, event_hooks={"response": [seen.append]}
    ) as browser:
        code_for(base, browser)  # navigations, without an Origin
    pages = [r for r in seen if r.request.url.path in PAGES]
    assert {r.request.url.path for r in pages} == set(PAGES)
    for answer in pages:
        assert answer.status_code in (200, 302, 303), (answer.request.url, answer.status_code)
        assert_no_cors(answer)


def test_mcp_keeps_its_own_origin_policy_and_exposes_the_challenge(base: str) -> None:
    body, headers = rpc("tools/list", {})
    refused = httpx.post(
        base + "/mcp", content=body, headers={**headers, "Origin": FOREIGN}, timeout=30
    )
    assert refused.status_code == 403
    assert_no_cors(refused)
    assert preflight(base, "/mcp", "POST").status_code == 403

    loopback = f"http://localhost:{free_port()}"
    challenged = httpx.post(
        base + "/mcp", content=body, headers={**headers, "Origin": loopback}, timeout=30
    )
    assert challenged.status_code == 401
    assert challenged.headers["access-control-allow-origin"] == loopback
    exposed = {h.strip() for h in challenged.headers["access-control-expose-headers"].split(",")}
    assert "www-authenticate" in exposed
    assert challenged.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
    )


def test_a_rebound_host_is_refused_on_the_open_endpoints_too(base: str) -> None:
    for path, method in OPEN:
        answer = httpx.request(
            method,
            base + path,
            headers={"Host": "web-host.example", "Origin": FOREIGN, **FORM},
            timeout=30,
        )
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["error"]["message"] == "Forbidden: Host not allowed"
        assert_no_cors(answer)


# -- a real browser ------------------------------------------------------------------------


class HostPage(BaseHTTPRequestHandler):
    """The web host's page: empty; the test's script runs in its origin."""

    def do_GET(self) -> None:
        body = b"<!doctype html><title>web host</title><p>web host"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def host_page() -> Iterator[int]:
    listener = ThreadingHTTPServer(("127.0.0.1", 0), HostPage)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        yield int(listener.server_address[1])
    finally:
        listener.shutdown()
        listener.server_close()


@pytest.mark.slow  # a real browser (scripts/apps-browser)
def test_a_page_on_a_foreign_origin_runs_the_client_endpoints_with_fetch_in_chromium(
    tmp_path: Path, base: str, host_page: int
) -> None:
    browser_or_skip()
    with httpx.Client(base_url=base, timeout=30) as browser:
        flow, code = code_for(base, browser)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "NODE_MODULES": str(DRIVER.parent),
        "CHROMIUM": str(CHROMIUM),
        # web-host.example resolves to the page's loopback listener, so the page's origin is
        # one the server was never told about (no --allow-origin) and not a loopback name.
        "PAGE_URL": f"http://web-host.example:{host_page}/",
        "SERVER": base,
        "CODE": code,
        "VERIFIER": flow.verifier,
        "CLIENT_ID": flow.client_id,
        "REDIRECT_URI": flow.redirect_uri,
        "RESOURCE": flow.resource,
    }
    done = subprocess.run(
        [str(NODE), str(SCRIPT)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,  # a safety net, not a timing assertion
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)

    assert report["origin"] == f"http://web-host.example:{host_page}"
    assert report["metadata"] == {"status": 200, "token_endpoint": base + "/oauth/token"}
    assert report["registered"] == {"status": 201, "client_name": "Script Host"}
    assert report["token"]["status"] == 200
    assert report["token"]["token_type"] == "Bearer"
    assert report["token"]["has_access_token"] is True
    assert report["replayed"] == {"status": 400, "error": "invalid_grant"}
    assert report["revoked"] == {"status": 200}
    # What the browser refuses to hand the script: a credentialed request (the answer is `*`
    # without Allow-Credentials) and the authorization request (navigation only).
    assert report["credentialed"] == "TypeError"
    assert report["authorize"] == "TypeError"
    # What Chromium saw on the wire (the requests that needed a preflight, the JSON
    # registration and the metadata GET with MCP-Protocol-Version, got through it above).
    answers = report["answers"]
    assert set(answers) >= {
        "GET /.well-known/oauth-authorization-server",
        "POST /oauth/register",
        "POST /oauth/token",
        "POST /oauth/revoke",
    }
    for request, headers in answers.items():
        assert headers.get("access-control-allow-origin") == "*", request
        assert "access-control-allow-credentials" not in headers, request


def test_with_registration_off_the_registration_path_is_not_opened(
    settings: Settings, services: Services
) -> None:
    http = HttpSettings(**{**OAUTH.__dict__, "registration": "off"})
    app = create_http_app(settings, http, services)
    with TestClient(app, base_url=ISSUER) as client:
        answer = client.options(
            "/oauth/register",
            headers={"Origin": FOREIGN, "Access-Control-Request-Method": "POST"},
        )
        token = client.options(
            "/oauth/token", headers={"Origin": FOREIGN, "Access-Control-Request-Method": "POST"}
        )
    assert answer.status_code == 403
    assert_no_cors(answer)
    assert token.status_code == 204  # the rest stays open
