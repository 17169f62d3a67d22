"""What an operator sees when `serve` (and `sync --watch`) start, from real processes: one
line per fact, the banner only once the server can be reached, and a refusal that leaves
nothing behind."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from notes_server.store.migrate import HEAD
from tests.helpers import spawn_server, subprocess_env

START_TIMEOUT_S = 60  # a safety net against a hung child, not a timing assertion
BANNER_URL = re.compile(r"MCP 2026-07-28 and 2025-11-25 over (http://127\.0\.0\.1:(\d+)/mcp) \|")


def run(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "notes_server", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        env=subprocess_env(tmp_path, env),
        timeout=START_TIMEOUT_S,
    )
    return done.returncode, done.stdout, done.stderr


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/notes.db"
    assert run(tmp_path, "migrate", "--db", url)[0] == 0
    return url


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_the_first_serve_says_migrated_in_one_line_then_the_banner(tmp_path: Path) -> None:
    server = spawn_server(tmp_path, db_url=None)
    assert server.close() == 0

    database = tmp_path / "xdg" / "notes-server" / "notes.db"
    lines = server.stderr_text().splitlines()
    assert lines[0] == f"database migrated to {HEAD} (was empty): sqlite:///{database}"
    assert lines[1].startswith("notes-server ")
    assert "MCP 2026-07-28 (2025-11-25 after initialize) over stdio" in lines[1]
    assert len(lines) == 2, lines
    assert "alembic" not in server.stderr_text()


def test_alembic_lines_come_back_at_debug(tmp_path: Path) -> None:
    server = spawn_server(tmp_path, db_url=None, env={"NOTES_SERVER_LOG_LEVEL": "DEBUG"})
    assert server.close() == 0

    assert "alembic.runtime.migration: Running upgrade" in server.stderr_text()


def test_http_on_a_taken_port_is_one_line_and_exit_2(
    tmp_path: Path, migrated: str, taken_port: int
) -> None:
    status, out, err = run(
        tmp_path, "serve", "--transport", "http", "--db", migrated, "--port", str(taken_port)
    )

    assert status == 2
    assert out == ""
    assert one_line(err) == f"notes-server: error: port {taken_port} is in use (--port)"


def test_http_on_a_taken_port_creates_nothing_beside_a_fresh_database(
    tmp_path: Path, taken_port: int
) -> None:
    status, _, err = run(tmp_path, "serve", "--transport", "http", "--port", str(taken_port))

    assert status == 2
    assert one_line(err) == f"notes-server: error: port {taken_port} is in use (--port)"
    assert not (tmp_path / "xdg").exists()


def test_the_http_banner_comes_once_listening_and_names_both_eras(
    tmp_path: Path, migrated: str
) -> None:
    command = [sys.executable, "-m", "notes_server", "serve", "--transport", "http"]
    proc = subprocess.Popen(
        [*command, "--db", migrated, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=subprocess_env(tmp_path),
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        found = BANNER_URL.search(banner)
        assert found is not None, banner
        # Connectable the moment the banner is out: it is printed after the socket listens.
        with socket.create_connection(("127.0.0.1", int(found.group(2))), timeout=10):
            pass
    finally:
        proc.terminate()
        proc.communicate(timeout=START_TIMEOUT_S)

    assert banner.startswith("notes-server ")
    assert "| principal from tokens |" in banner


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_serve_on_a_database_that_does_not_exist_leaves_no_file_behind(
    tmp_path: Path, transport: str
) -> None:
    target = tmp_path / "data" / "notes.db"
    target.parent.mkdir()

    status, out, err = run(
        tmp_path, "serve", "--transport", transport, "--port", "0", "--db", f"sqlite:///{target}"
    )

    assert status == 2
    assert out == ""
    assert one_line(err) == (
        f"notes-server: error: database schema is at nothing, not {HEAD}: "
        "run `notes-server migrate --db URL` first"
    )
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [("serve",), ("serve", "--transport", "http"), ("migrate",), ("token", "create", "alice")],
    ids=["serve", "serve-http", "migrate", "token"],
)
def test_a_database_url_naming_a_directory_says_so(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    folder = tmp_path / "somewhere"
    folder.mkdir()

    status, _, err = run(tmp_path, *command, "--db", f"sqlite:///{folder}")

    assert status == 2
    assert one_line(err) == (
        f"notes-server: error: --db: sqlite:///{folder} is a directory, not a database file"
    )
    assert list(folder.iterdir()) == []


def test_sync_watch_without_the_watcher_refuses_before_anything_else(
    tmp_path: Path, migrated: str
) -> None:
    shim = tmp_path / "shim" / "watchfiles"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('raise ImportError("not installed")\n', "utf-8")
    vault = tmp_path / "vault"

    status, out, err = run(
        tmp_path,
        "sync",
        "--watch",
        "--db",
        migrated,
        "--workspace",
        "file:///home/alice/notes",
        str(vault),
        env={"PYTHONPATH": str(shim.parent)},
    )

    assert status == 2
    assert out == ""
    assert one_line(err) == (
        "notes-server: error: --watch needs the watchfiles package: "
        "pip install 'notes-server[watch]'"
    )
    assert not vault.exists()
