"""The sign-in and consent pages in a real browser: a real `serve --auth oauth`, a client
registered over HTTP, then headless Debian Chromium (JavaScript disabled, playwright-core:
tests/oauth/oauth_browser.mjs) signs in and consents at 800 px in light mode and at 320 px in
dark mode; the code that comes back is exchanged for tokens. No CSP violation (the inline
stylesheet is allowed by its hash) and no horizontal scrolling at 320 px. Screenshots land in
the test's tmp dir and, with OAUTH_SCREENSHOT_DIR set (docs/ for the README), there too.

Needs `scripts/apps-browser`; skipped without it, except with APPS_BROWSER_REQUIRED set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from tests.approval.test_purge_browser import CHROMIUM, DRIVER, NODE, browser_or_skip
from tests.helpers import free_port
from tests.oauth.oauth_support import WS_A, WS_B, pkce, query_of, set_password
from tests.transports.http_support import start_http_server

SCRIPT = Path(__file__).resolve().parent / "oauth_browser.mjs"


class Callback(BaseHTTPRequestHandler):
    """The client's loopback redirect listener (RFC 8252)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"back at the client")

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def redirect() -> Iterator[str]:
    listener = ThreadingHTTPServer(("127.0.0.1", 0), Callback)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.server_address[1]}/callback"
    finally:
        listener.shutdown()
        listener.server_close()


SHOTS = ("sign-in-wide", "consent-wide", "sign-in-narrow", "consent-narrow")


def authorize_url(base: str, client_id: str, redirect: str, challenge: str, state: str) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": state,
        "resource": base + "/mcp",
    }
    return f"{base}/oauth/authorize?{urlencode(params)}"


def test_sign_in_and_consent_in_headless_chromium_without_javascript(
    tmp_path: Path, migrated_engine: Any, grant: Any, redirect: str
) -> None:
    browser_or_skip()
    grant("alice", WS_A)
    grant("alice", WS_B, role="read")
    set_password(migrated_engine, "alice", "alice-password-1")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_http_server(
        tmp_path,
        str(migrated_engine.url),
        "--auth",
        "oauth",
        "--port",
        str(port),
        "--public-url",
        base,
    )
    shots = tmp_path / "shots"
    shots.mkdir()
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            client_id = http.post(
                "/oauth/register",
                json={
                    "client_name": "Browser Test Host",
                    "redirect_uris": [redirect],
                    "token_endpoint_auth_method": "none",
                },
            ).json()["client_id"]
            verifiers = [pkce(), pkce()]
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(tmp_path),
                "NODE_MODULES": str(DRIVER.parent),
                "CHROMIUM": str(CHROMIUM),
                "AUTHORIZE_URL": authorize_url(base, client_id, redirect, verifiers[0][1], "one"),
                "AUTHORIZE_URL_2": authorize_url(base, client_id, redirect, verifiers[1][1], "two"),
                "PASSWORD": "alice-password-1",
                "WORKSPACE": WS_A,
                "SCREENSHOT_DIR": str(shots),
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
            landed = query_of(report["wide"]["landedOn"])
            tokens = http.post(
                "/oauth/token",
                data={
                    "grant_type": "authorization_code",
                    "code": landed["code"],
                    "client_id": client_id,
                    "redirect_uri": redirect,
                    "code_verifier": verifiers[0][0],
                },
            )
    finally:
        server.stop()

    assert report["console"] == []  # no CSP violation: the stylesheet's hash matches
    for name, state in (("wide", "one"), ("narrow", "two")):
        seen = report[name]
        assert seen["signInUrl"] == f"{base}/oauth/sign-in"  # nothing of the request in the URL
        assert seen["signInStatus"] == 200 and seen["signInTitle"] == "Sign in"
        assert "frame-ancestors 'none'" in seen["policy"]
        assert seen["consentUrl"] == f"{base}/oauth/consent"
        assert seen["consentTitle"] == "Allow access to your notes?"
        assert seen["boxes"] == [WS_A, WS_B] and seen["labelled"] is True
        assert query_of(seen["landedOn"])["state"] == state
        assert query_of(seen["landedOn"])["iss"] == base
        # Tab walks the fields in reading order, each with the visible focus ring.
        assert [f["name"] for f in seen["signInFocus"]] == [
            "principal",
            "password",
            "button:Sign in",
        ]
        assert [f["name"] for f in seen["consentFocus"]] == [
            "ws0",
            "ws1",
            "button:allow",
            "button:deny",
        ]
        assert all(f["ring"] for f in seen["signInFocus"] + seen["consentFocus"])
    assert report["narrow"]["scrollWidth"] <= 320
    assert report["narrow"]["consentScrollWidth"] <= 320
    assert tokens.status_code == 200, tokens.text
    for name in SHOTS:
        assert (shots / f"oauth-{name}.png").stat().st_size > 0
    wanted = os.environ.get("OAUTH_SCREENSHOT_DIR")
    if wanted:
        for name in ("sign-in-wide", "consent-narrow"):
            shutil.copy(shots / f"oauth-{name}.png", Path(wanted) / f"oauth-{name}.png")
