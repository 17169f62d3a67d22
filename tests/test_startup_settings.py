"""Bad settings fail at start, as one line and exit code 2, in every command that reads them;
every spelling of a SQLite URL reaches the same file, the sandbox included."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from notes_server.security.keyring import KeyRing
from notes_server.security.sandbox import abi_version
from tests.helpers import make_request, spawn_server, subprocess_env

NOTES = "file:///home/alice/notes"
COMMANDS = [
    ("serve",),
    ("migrate",),
    ("workspace", "grant", "alice", NOTES),
    ("token", "create", "alice"),
    ("audit",),
]


def _run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notes_server", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=subprocess_env(tmp_path, env),
        timeout=60,
    )


def _assert_one_line_exit_2(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_in_memory_database_url_is_refused_by_every_command(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    done = _run(tmp_path, *command, "--db", "sqlite+pysqlite:///:memory:")

    _assert_one_line_exit_2(done, "--db: an in-memory SQLite database cannot serve")


def test_an_unknown_store_implementation_is_refused_at_start(tmp_path: Path) -> None:
    done = _run(tmp_path, "serve", env={"NOTES_SERVER_STORE_IMPL": "fast"})

    _assert_one_line_exit_2(done, "NOTES_SERVER_STORE_IMPL: expected one of auto, core")


def test_a_password_in_a_refused_url_is_never_printed(tmp_path: Path) -> None:
    done = _run(tmp_path, "migrate", "--db", "mysql://notes:hunter2@db/notes")

    _assert_one_line_exit_2(done, "unsupported database backend 'mysql'")
    assert "hunter2" not in done.stderr


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_malformed_state_keys_stop_serve_before_it_answers_anything(
    tmp_path: Path, transport: str
) -> None:
    secret = "c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0"
    env = {"NOTES_SERVER_STATE_KEYS": f"k1:{secret}"}

    done = _run(tmp_path, "serve", "--transport", transport, "--port", "0", env=env)

    _assert_one_line_exit_2(done, "NOTES_SERVER_STATE_KEYS: state key entry 1")
    assert secret not in done.stderr


def test_valid_state_keys_still_serve(tmp_path: Path) -> None:
    assert _run(tmp_path, "migrate", "--db", f"sqlite:///{tmp_path}/notes.db").returncode == 0
    server = spawn_server(tmp_path, env={"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()})

    reply = server.request("server/discover")

    assert "result" in reply
    assert server.close() == 0


def test_a_percent_in_the_database_url_migrates(tmp_path: Path) -> None:
    folder = tmp_path / "100%25 done"
    folder.mkdir()
    url = f"sqlite:///{tmp_path}/100%2525%20done/notes.db"

    first = _run(tmp_path, "migrate", "--db", url)
    second = _run(tmp_path, "migrate", "--db", url)

    assert first.returncode == 0, first.stderr
    assert "upgraded from empty" in first.stdout
    assert (folder / "notes.db").is_file()
    assert "already at revision" in second.stdout


@pytest.mark.skipif(abi_version() < 4, reason="needs Landlock ABI >= 4 (Linux)")
def test_a_driver_qualified_sqlite_url_keeps_its_database_writable_in_the_sandbox(
    tmp_path: Path,
) -> None:
    url = f"sqlite+pysqlite:///{tmp_path}/data/notes.db"
    assert _run(tmp_path, "migrate", "--db", url).returncode == 0
    assert _run(tmp_path, "workspace", "grant", "alice", NOTES, "--db", url).returncode == 0
    server = spawn_server(tmp_path, "--sandbox", "require", db_url=url)

    server.send(
        make_request(
            "tools/call",
            {"name": "notes_create", "arguments": {"workspaceUri": NOTES, "title": "Kept"}},
        )
    )
    reply = server.read()

    assert reply["result"]["isError"] is False, reply
    assert "landlock" in server.stderr_text().lower()
    assert server.close() == 0


def test_a_malformed_state_audience_stops_serve_before_it_answers_anything(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, "serve", env={"NOTES_SERVER_STATE_AUDIENCE": "two words"})

    _assert_one_line_exit_2(done, "NOTES_SERVER_STATE_AUDIENCE: expected 1-128 characters")


def test_a_malformed_roots_wait_stops_serve_before_it_answers_anything(tmp_path: Path) -> None:
    done = _run(tmp_path, "serve", env={"NOTES_SERVER_ROOTS_WAIT": "forever"})

    _assert_one_line_exit_2(done, "NOTES_SERVER_ROOTS_WAIT: expected seconds from 0.1 to 3600")
