"""A database the CLI cannot use: one line on stderr and exit status 2, never a traceback.

Real processes on real faults (tests/db_faults.py): a garbage file, a read-only directory (the
immutable attribute binds root too) and a full disk (a filled tmpfs), for every command that
opens the database at start: `migrate`, `workspace grant`, `token create`, `serve` (stdio and
HTTP). A non-SQLite URL that cannot be reached is one line too, without its password.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from notes_server.security.keyring import KeyRing
from notes_server.store import migrate
from notes_server.store.engine import make_engine
from tests.db_faults import fill, read_only, small_disk, write_garbage
from tests.helpers import subprocess_env

RUN_TIMEOUT_S = 60.0
COMMANDS = {
    "migrate": ["migrate"],
    "workspace grant": ["workspace", "grant", "alice", "file:///home/alice/notes"],
    "token create": ["token", "create", "alice"],
    "serve stdio": ["serve", "--principal", "alice"],
    "serve http": ["serve", "--transport", "http", "--auth", "none", "--port", "0"],
}


def run_cli(
    tmp_path: Path, args: list[str], db: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "notes_server", *args, "--db", db],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=subprocess_env(tmp_path, env),
        cwd=tmp_path,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def migrated(path: Path) -> None:
    engine = make_engine(f"sqlite:///{path}")
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()


@pytest.fixture(params=["garbage file", "read-only directory", "full disk"])
def faulty(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(database path, the cause the operator must be told) for one real fault."""
    if request.param == "garbage file":
        write_garbage(tmp_path / "db" / "notes.db")
        yield tmp_path / "db" / "notes.db", "the file is not a database"
    elif request.param == "read-only directory":
        (tmp_path / "db").mkdir()
        migrated(tmp_path / "db" / "notes.db")
        with read_only(tmp_path / "db"):
            yield tmp_path / "db" / "notes.db", "the database file cannot be opened"
    else:
        with small_disk(tmp_path / "db") as disk:
            fill(disk)
            yield disk / "notes.db", "the disk is full"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_database_fault_at_start_is_one_line_and_exit_status_2(
    tmp_path: Path, faulty: tuple[Path, str], command: str
) -> None:
    path, cause = faulty
    url = f"sqlite:///{path}"
    # With keys configured, HTTP needs no state key file beside the database: the database
    # itself is what fails (the key file's own failure is the next test).
    keys = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}

    done = run_cli(tmp_path, COMMANDS[command], url, keys)

    assert done.returncode == 2, done.stderr
    assert done.stderr == f"notes-server: error: cannot use the database {url}: {cause}\n"
    assert done.stdout == ""


def test_http_that_cannot_create_its_state_key_file_beside_the_database_is_one_line(
    tmp_path: Path, faulty: tuple[Path, str]
) -> None:
    path, _ = faulty
    url = f"sqlite:///{path}"

    done = run_cli(tmp_path, COMMANDS["serve http"], url)

    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"notes-server: error: cannot use the database {url}: ")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("command", ["migrate", "serve stdio", "token create"])
def test_an_unreachable_server_database_is_one_line_without_its_password(
    tmp_path: Path, command: str
) -> None:
    done = run_cli(tmp_path, COMMANDS[command], "postgresql://u:s3cret@127.0.0.1:1/notes")

    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "notes-server: error: cannot use the database postgresql://***@127.0.0.1:1/notes: "
    )
    assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n")
    assert "s3cret" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["workspace grant", "token create"])
def test_a_write_to_a_read_only_database_file_is_one_line_and_exit_status_2(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "notes.db"
    migrated(path)
    url = f"sqlite:///{path}"
    with read_only(path):
        done = run_cli(tmp_path, COMMANDS[command], url)

    assert done.returncode == 2, done.stderr
    expected = f"notes-server: error: cannot use the database {url}: the database is read-only\n"
    assert done.stderr == expected
    assert done.stdout == ""
