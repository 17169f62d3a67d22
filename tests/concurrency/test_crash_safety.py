"""A server SIGKILLed at each step of a confirmed mutation leaves all of it or none of it.

The server freezes at a named checkpoint (NOTES_SERVER_TEST_PAUSE_AT) and says so on stderr;
reading that line is the only synchronization. It is then killed with SIGKILL (no cleanup runs),
and the database must show either nothing (killed before commit: note intact, no nonce row, no
audit row) or everything (killed after commit). A fresh server then lets the user finish: the
same state and answer succeed once after a pre-commit crash, and replay the recorded outcome
after a post-commit crash.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.concurrency.harness import (
    WORKSPACE,
    Db,
    Server,
    accept,
    create_note,
    generate_keys,
    prepare_database,
    round1,
    state_nonce,
    stop_servers,
    tool_params,
)
from tests.helpers import default_db_url

STEPS = ("claimed", "applied", "audited", "committed")
TOOLS = {"delete": "notes_delete", "archive": "notes_archive"}
POINTS = [f"{verb}.{step}" for verb in TOOLS for step in STEPS]
TITLE = "crash me"


@pytest.fixture
def keys() -> str:
    return generate_keys()


@pytest.fixture
def url(tmp_path: Path) -> str:
    """The test's database (a SQLite file, or in the PostgreSQL run a throw-away database)."""
    url = default_db_url(tmp_path)
    prepare_database(url)
    return url


def db_for(url: str, tmp_path: Path) -> Db:
    return Db(tmp_path / "notes.db") if url.startswith("sqlite") else Db(url)


@pytest.fixture
def spawn(tmp_path: Path, url: str, keys: str) -> Iterator[Callable[..., Server]]:
    """spawn(pause_at=None) starts a server on the test database; all are reaped at teardown."""
    started: list[Server] = []

    def _spawn(pause_at: str | None = None) -> Server:
        server = Server(url, keys, tmp_path, pause_at=pause_at)
        started.append(server)
        return server

    yield _spawn
    stop_servers(started)


@dataclass(frozen=True)
class Crash:
    """A confirmed mutation whose server was SIGKILLed at a checkpoint."""

    tool: str
    done: str
    note_id: str
    state: str
    nonce: str

    @property
    def arguments(self) -> dict[str, Any]:
        return {"workspaceUri": WORKSPACE, "title": TITLE}

    @property
    def answer(self) -> dict[str, Any]:
        return accept(self.tool, self.note_id)


def crash_at(spawn: Callable[..., Server], keys: str, point: str) -> Crash:
    """Create a note, confirm its deletion/archival on a server frozen at `point`, kill it."""
    verb = point.split(".")[0]
    tool = TOOLS[verb]
    doomed = spawn(pause_at=point)
    note_id = create_note(doomed, TITLE, "crash.md")
    asked = round1(doomed, tool, TITLE)
    crash = Crash(tool, verb + "d", note_id, asked.state, state_nonce(keys, asked.state))
    round2 = tool_params(tool, crash.arguments, state=crash.state, responses=crash.answer)
    doomed.write(doomed.encode("tools/call", round2))
    doomed.wait_for_stderr(f"notes-server paused at {point}")
    assert doomed.sigkill() == -signal.SIGKILL
    return crash


def mutated(db: Db, crash: Crash) -> bool:
    """Whether the note shows the tool's effect; asserts it is in one of the two clean states."""
    note = db.note(crash.note_id)
    if crash.tool == "notes_delete":
        assert note in (None, (1, 0)), note
        return note is None
    assert note in ((1, 0), (2, 1)), note
    return note == (2, 1)


def assert_committed_once(db: Db, crash: Crash) -> None:
    assert mutated(db, crash)
    recorded = db.nonces([crash.nonce])
    assert list(recorded) == [crash.nonce] and recorded[crash.nonce][0] == crash.done
    assert db.audits([crash.nonce]) == [(crash.nonce, crash.done, crash.note_id)]
    remaining = 0 if crash.tool == "notes_delete" else 1
    assert db.counts() == (remaining, 1, 1)


def assert_untouched(db: Db, crash: Crash) -> None:
    assert not mutated(db, crash)
    assert db.nonces([crash.nonce]) == {} and db.audits([crash.nonce]) == []
    assert db.counts() == (1, 0, 0)


def outcome_of(reply: dict[str, Any]) -> dict[str, Any]:
    result = reply["result"]
    assert result["resultType"] == "complete" and result["isError"] is False, reply
    content: dict[str, Any] = result["structuredContent"]
    return content


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_each_checkpoint_is_all_or_nothing_and_retry_completes(
    spawn: Callable[..., Server], tmp_path: Path, keys: str, point: str, url: str
) -> None:
    db = db_for(url, tmp_path)
    crash = crash_at(spawn, keys, point)
    if point.endswith(".committed"):
        assert_committed_once(db, crash)
    else:
        assert_untouched(db, crash)

    fresh = spawn()
    first = fresh.tool(crash.tool, crash.arguments, state=crash.state, responses=crash.answer)
    again = fresh.tool(crash.tool, crash.arguments, state=crash.state, responses=crash.answer)
    outcome = outcome_of(first)
    assert outcome["noteId"] == crash.note_id and outcome[crash.done] is True
    assert outcome_of(again) == outcome, "an exact repeat of a committed accept replays it"
    assert_committed_once(db, crash)
    recorded = db.nonces([crash.nonce])[crash.nonce]
    assert json.loads(recorded[1] or "null") == outcome
    assert fresh.alarms() == [], fresh.stderr_text()
