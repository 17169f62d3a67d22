"""`notes-server call notes_purge` in a real process (which spawns a real stdio `serve`): it
prints the approval URL and relays the server's one-time code on stderr, waits until the page
is completed (here by a real HTTP client), then prints the result; Ctrl-C cancels cleanly."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest
from sqlalchemy import Engine, text

from notes_server.config import Settings
from tests.approval.purge_support import CODE, WS, add_note, csrf_of, form_post, open_link
from tests.helpers import subprocess_env

LINE_WAIT_S = 60.0  # a safety net against a hung child, not a timing assertion
URL_LINE = re.compile(r"^\s+(http://127\.0\.0\.1:\d+/approval\?a=pa-[0-9a-f]+&k=\S+)$")


class Call:
    """A running `notes-server call notes_purge`, its stderr read line by line."""

    def __init__(self, tmp_path: Path, db_url: str) -> None:
        argv = ["call", "notes_purge", "--db", db_url, "--principal", "alice"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "notes_server", *argv, "--arg", f"workspaceUri={WS}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(tmp_path),
            cwd=tmp_path,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stderr,), daemon=True).start()

    def _pump(self, stream: IO[bytes] | None) -> None:
        assert stream is not None
        for raw in iter(stream.readline, b""):
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait_for(self, pattern: re.Pattern[str]) -> re.Match[str]:
        while True:
            try:
                line = self.lines.get(timeout=LINE_WAIT_S)
            except queue.Empty:
                raise AssertionError(f"never printed {pattern.pattern}: {self.seen}") from None
            self.seen.append(line)
            found = pattern.search(line)
            if found is not None:
                return found

    def finish(self) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=LINE_WAIT_S)
        return self.proc.returncode, out.decode()


@pytest.fixture
def start_call(
    tmp_path: Path, settings: Settings, migrated_engine: Engine, grant: Callable[..., str]
) -> Iterator[Callable[[], Call]]:
    grant("alice", WS)
    started: list[Call] = []

    def start() -> Call:
        started.append(Call(tmp_path, settings.db_url))
        return started[-1]

    yield start
    for call in started:
        if call.proc.poll() is None:
            call.proc.kill()
            call.proc.wait()


def test_call_prints_the_url_waits_for_the_page_then_prints_the_purge(
    start_call: Callable[[], Call], migrated_engine: Engine
) -> None:
    old = add_note(migrated_engine, "old.md", "Old", archived=True)
    call = start_call()
    url = call.wait_for(URL_LINE).group(1)
    origin = re.sub(r"/approval\?.*$", "", url)

    with httpx.Client(base_url=origin, timeout=30) as browser:
        assert open_link(browser, url).status_code == 303
        code = call.wait_for(CODE).group(2)  # relayed from the server's stderr
        login = browser.get("/approval")
        assert form_post(browser, {"csrf": csrf_of(login), "token": code}).status_code == 303
        page = browser.get("/approval")
        done = form_post(browser, {"csrf": csrf_of(page), "confirm": "garden"})
    status, out = call.finish()

    assert done.status_code == 200
    assert status == 0
    printed = json.loads(out)
    assert printed["purged"] is True and printed["purgedIds"] == [old.id]
    assert code not in out and url not in out  # stdout carries only the result
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 0


def test_ctrl_c_while_waiting_cancels_and_purges_nothing(
    start_call: Callable[[], Call], migrated_engine: Engine
) -> None:
    add_note(migrated_engine, "old.md", "Old", archived=True)
    call = start_call()
    call.wait_for(re.compile(r"^Waiting for the page to be completed"))

    call.proc.send_signal(signal.SIGINT)
    call.wait_for(re.compile(r"^Cancelled\.$"))
    outcome = json.loads(call.wait_for(re.compile(r"^\{.*\}$")).group(0))
    status, out = call.finish()

    assert status == 130 and out == ""
    assert outcome == {"purged": False, "outcome": "cancelled"}
    with migrated_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM notes")).scalar() == 1
        pending = conn.execute(text("SELECT count(*) FROM purge_approvals")).scalar()
        audited = conn.execute(text("SELECT outcome FROM audit_log")).scalars().all()
    assert pending == 1 and audited == ["cancelled"]  # open for a retry until it expires
