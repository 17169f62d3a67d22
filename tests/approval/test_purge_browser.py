"""A purge approved in a real browser: a real `serve --transport http`, round 1 from a real
HTTP client, then headless Debian Chromium (JavaScript disabled, driven by playwright-core:
tests/approval/purge_browser.mjs) opens the approval URL, signs in with the principal's token,
types the workspace name and submits; round 2 then purges. Screenshots land in the test's tmp
dir and, with PURGE_SCREENSHOT_DIR set (docs/ for the README's picture), there too.

Needs `scripts/apps-browser` (chromium, node, playwright-core); skipped without them, except
with APPS_BROWSER_REQUIRED set, where that is a failure (the same rule as the Apps test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.config import Settings
from tests.approval.purge_support import add_note, purge, round_of
from tests.helpers import free_port
from tests.transports.http_support import start_http_server

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parent / "purge_browser.mjs"
DRIVER = ROOT / ".apps-browser" / "node_modules" / "playwright-core"
CHROMIUM = shutil.which("chromium")
NODE = shutil.which("node")
MISSING = [
    name
    for name, present in {
        "chromium": CHROMIUM is not None,
        "node": NODE is not None,
        "playwright-core": DRIVER.is_dir(),
    }.items()
    if not present
]


def browser_or_skip() -> None:
    if not MISSING:
        return
    reason = f"{', '.join(MISSING)} missing: run scripts/apps-browser"
    if os.environ.get("APPS_BROWSER_REQUIRED"):
        pytest.fail(reason)
    pytest.skip(reason)


def run_browser(tmp_path: Path, url: str, token: str) -> dict[str, Any]:
    shots = tmp_path / "shots"
    shots.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "NODE_MODULES": str(DRIVER.parent),
        "CHROMIUM": str(CHROMIUM),
        "APPROVAL_URL": url,
        "NOTES_TOKEN": token,
        "SCREENSHOT_DIR": str(shots),
    }
    done = subprocess.run(
        [str(NODE), str(SCRIPT)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,  # a safety net against a hung browser, not a timing assertion
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    for name in ("purge-approval.png", "purge-approved.png"):
        assert (shots / name).stat().st_size > 0
    wanted = os.environ.get("PURGE_SCREENSHOT_DIR")
    if wanted:
        shutil.copy(shots / "purge-approval.png", Path(wanted) / "purge-approval.png")
    return report


def test_a_purge_is_approved_in_headless_chromium_without_javascript(
    tmp_path: Path, settings: Settings, migrated_engine: Engine, alice: str
) -> None:
    browser_or_skip()
    titles = ["Seed order 2024", "Old compost plan", "Frost dates <draft>"]
    for number, title in enumerate(titles):
        add_note(migrated_engine, f"old{number}.md", title, archived=True)
    kept = add_note(migrated_engine, "beds.md", "Raised beds", archived=False)
    server = start_http_server(tmp_path, settings.db_url, "--port", str(free_port()))
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            first = round_of(purge(client, alice))
            report = run_browser(tmp_path, first.url, alice)
            final = round_of(purge(client, alice, answer="accept", state=first.state)).result
    finally:
        server.stop()

    assert report["landedOn"] == f"{server.url}/approval"  # the link secret left the URL
    assert report["loginStatus"] == 200 and report["loginTitle"] == "Sign in to review a purge"
    assert "frame-ancestors 'none'" in report["framing"]
    assert report["confirmTitle"] == "Approve the purge"
    assert sorted(report["listed"]) == sorted(titles)
    assert report["asks"] == "garden"
    assert report["doneStatus"] == 200 and report["doneTitle"] == "Purge approved"
    assert report["console"] == []
    assert final["structuredContent"]["purgedCount"] == len(titles)
    with migrated_engine.connect() as conn:
        left = conn.execute(text("SELECT id FROM notes")).scalars().all()
    assert left == [kept.id]
