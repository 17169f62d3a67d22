"""The timeline view in a real browser: headless Debian Chromium, driven by playwright-core,
renders the view a running notes-server serves over HTTP inside a sandboxed iframe of a small
test host (tests/apps/browser_host.mjs) built on the official host-side bridge
(@modelcontextprotocol/ext-apps' AppBridge), which forwards the view's tools/call to that
server. Screenshots (light, dark, 320 px) land in the test's tmp dir and, with
APPS_SCREENSHOT_DIR set, there too.

Needs `scripts/apps-browser` (chromium, playwright-core, the bundled AppBridge); skipped
without them, except with APPS_BROWSER_REQUIRED set (.ci/run installs them and sets it), where
that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from notes_server.config import Settings
from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.apps.apps_support import NOTES, seed_notes
from tests.transports.http_support import start_http_server

ROOT = Path(__file__).resolve().parents[2]
HOST = Path(__file__).resolve().parent / "browser_host.mjs"
DRIVER = ROOT / ".apps-browser" / "node_modules" / "playwright-core"
BRIDGE = ROOT / ".apps-browser" / "app-bridge.js"
CHROMIUM = shutil.which("chromium")
NODE = shutil.which("node")
NEEDED = {
    "chromium": CHROMIUM is not None,
    "node": NODE is not None,
    "playwright-core": DRIVER.is_dir(),
    "app-bridge.js": BRIDGE.is_file(),
}
MISSING = [name for name, present in NEEDED.items() if not present]


def _browser_or_skip() -> None:
    if not MISSING:
        return
    reason = f"{', '.join(MISSING)} missing: run scripts/apps-browser"
    if os.environ.get("APPS_BROWSER_REQUIRED"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One browser session over the seeded notes (module-scoped: Chromium starts once)."""
    _browser_or_skip()
    tmp = tmp_path_factory.mktemp("apps-browser")
    settings = Settings(db_url=f"sqlite:///{tmp}/notes.db", principal="alice")
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine

    engine = make_engine(settings.db_url)
    try:
        migrate.upgrade(engine)
        report = _run_browser(tmp, settings, engine)
    finally:
        engine.dispose()
    return report


def _run_browser(tmp: Path, settings: Settings, engine: Engine) -> dict[str, Any]:
    ids = seed_notes(engine)
    _, token = create_token(SqlTokenRecords(engine), "alice")
    shots = Path(os.environ.get("APPS_SCREENSHOT_DIR") or tmp)
    shots.mkdir(parents=True, exist_ok=True)
    server = start_http_server(tmp, settings.db_url)
    try:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "NODE_MODULES": str(DRIVER.parent),
            "NOTES_URL": server.url,
            "NOTES_TOKEN": token,
            "NOTES_WORKSPACE": NOTES,
            "CHROMIUM": str(CHROMIUM),
            "SCREENSHOT_DIR": str(shots),
        }
        done = subprocess.run(
            [str(NODE), str(HOST)],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    report["shots"] = str(shots)
    report["ids"] = ids
    return report


def test_the_view_renders_the_right_notes_on_the_right_days(report: dict[str, Any]) -> None:
    assert report["days"] == [
        {
            "day": "2026-03-02",
            "heading": "Monday, March 2, 2026",
            "titles": ["Standup", "Q1 plans"],
        },
        {"day": "2026-03-01", "heading": "Sunday, March 1, 2026", "titles": ["Garden"]},
    ]
    assert report["stripLabel"] == "3 notes on 2 days"
    assert report["stripBars"] == 2


def test_the_text_filter_narrows_the_timeline(report: dict[str, Any]) -> None:
    assert report["filtered"] == ["Garden"]


def test_a_click_on_a_note_asks_the_host_to_call_notes_open(report: dict[str, Any]) -> None:
    calls = [e["params"] for e in report["hostLog"] if e.get("method") == "tools/call"]

    assert [c["name"] for c in calls] == [
        "notes_open",
        "notes_open",
        "notes_archive",
        "notes_timeline",
        "notes_timeline",
    ]
    assert {c["arguments"]["workspaceUri"] for c in calls} == {NOTES}
    assert [c["arguments"].get("noteId") for c in calls[:2]] == [
        report["ids"]["Q1 plans"],
        report["ids"]["Garden"],
    ]
    assert report["detail"] == "Q1 plans\n\nShip the timeline view"


def test_archive_from_the_view_is_a_host_call_the_view_cannot_approve(
    report: dict[str, Any],
) -> None:
    (archive,) = [
        e["params"]
        for e in report["hostLog"]
        if (e.get("params") or {}).get("name") == "notes_archive"
    ]

    assert archive == {
        "name": "notes_archive",
        "arguments": {"workspaceUri": NOTES, "title": "Garden"},
    }
    assert report["archiveStatus"] == "Not archived."  # the host's user declined
    assert report["titlesAfterArchive"] == ["Standup", "Q1 plans", "Garden"]


def test_the_date_range_keeps_only_its_days(report: dict[str, Any]) -> None:
    assert report["fromFiltered"] == ["2026-03-02"]


def test_the_archived_toggle_asks_the_host_for_archived_notes(report: dict[str, Any]) -> None:
    calls = [
        e["params"]["arguments"]
        for e in report["hostLog"]
        if (e.get("params") or {}).get("name") == "notes_timeline"
    ]

    assert calls == [
        {"workspaceUri": NOTES, "includeArchived": True},
        {"workspaceUri": NOTES, "includeArchived": False},
    ]
    assert report["withArchived"] == ["Standup", "Q1 plans", "Garden", "Old idea"]
    assert report["archivedBadges"] == ["archived"]


def test_keyboard_arrows_move_between_notes(report: dict[str, Any]) -> None:
    assert report["focusedAfterArrow"] == "Q1 plans"  # the first note is Standup


def test_the_bridge_handshake_comes_first_and_in_order(report: dict[str, Any]) -> None:
    log = report["hostLog"]

    assert [e.get("method") for e in log[:2]] == ["ui/initialize", "ui/notifications/initialized"]
    assert log[0]["params"]["protocolVersion"] == "2026-01-26"
    assert log[0]["params"]["appInfo"]["name"] == "notes-timeline"
    assert all(e["initialized"] for e in log[2:])


def test_a_forged_message_from_another_origin_is_ignored(report: dict[str, Any]) -> None:
    assert report["forgerySent"] is True
    assert report["afterForgery"] == report["beforeForgery"]
    assert "FORGED NOTE" not in report["afterForgery"]


def test_the_dark_theme_applies_and_the_view_fits_320_px(report: dict[str, Any]) -> None:
    assert report["darkBackground"] == "rgb(22, 24, 29)"
    assert report["narrowOverflow"] == 0
    for name in ("timeline-light.png", "timeline-dark.png", "timeline-narrow.png"):
        assert (Path(report["shots"]) / name).stat().st_size > 10_000  # a blank page is ~3 kB


def test_the_view_loads_nothing_and_breaks_no_policy(report: dict[str, Any]) -> None:
    assert report["refused"] == []
    assert [line for line in report["console"] if "Content Security Policy" in line] == []


def test_teardown_clears_the_view(report: dict[str, Any]) -> None:
    assert report["afterTeardown"] == 0
    assert report["teardownAnswer"] == {}
    assert report["hostLog"][-1]["result"] == {}  # the view answered ui/resource-teardown
