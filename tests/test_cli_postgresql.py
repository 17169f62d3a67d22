"""The CLI on a PostgreSQL server (runs whenever one is reachable, in either run of the suite):
`migrate` builds the schema the models describe, `serve` never migrates a server database, and
a server that cannot be used is one line and exit status 2 naming the cause, never a password.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine.url import make_url

from notes_server.security.keyring import KeyRing
from notes_server.store import migrate
from notes_server.store.engine import make_engine
from tests import pg_support
from tests.helpers import subprocess_env

RUN_TIMEOUT_S = 60.0
KEYS = {"NOTES_SERVER_STATE_KEYS": KeyRing.generate_spec()}
COMMANDS = {
    "migrate": ["migrate"],
    "workspace grant": ["workspace", "grant", "alice", "file:///home/alice/notes"],
    "token create": ["token", "create", "alice"],
    "audit": ["audit"],
    "serve stdio": ["serve", "--principal", "alice"],
    "serve http": ["serve", "--transport", "http", "--auth", "none", "--port", "0"],
}


@pytest.fixture(autouse=True)
def _server() -> None:
    problem = pg_support.reachable()
    if problem is not None:
        pytest.skip(problem)


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


@pytest.mark.parametrize("command", [name for name in COMMANDS if name != "migrate"])
def test_a_command_on_an_unmigrated_postgresql_database_says_to_migrate_and_changes_nothing(
    tmp_path: Path, command: str
) -> None:
    url = pg_support.database_url(tmp_path, migrated=False)
    done = run_cli(tmp_path, COMMANDS[command], url, KEYS)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.endswith(
        "database schema is at nothing, not "
        f"{migrate.HEAD}: run `notes-server migrate --db URL` first\n"
    ), done.stderr
    assert done.stderr.count("\n") == 1
    engine = make_engine(url)
    try:
        assert migrate.current_revision(engine) is None  # serve did not migrate it
    finally:
        engine.dispose()


def test_migrate_builds_on_postgresql_the_schema_the_models_describe(tmp_path: Path) -> None:
    url = pg_support.database_url(tmp_path, migrated=False)
    done = run_cli(tmp_path, ["migrate"], url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"upgraded from empty to {migrate.HEAD}")
    engine = make_engine(url)
    try:
        migrate.check(engine)  # alembic check: no difference between models and database
        migrate.downgrade(engine, "0007")
        with engine.connect() as conn:
            columns = conn.execute(
                text("SELECT count(*) FROM information_schema.columns WHERE column_name = :c"),
                {"c": "search_vector"},
            ).scalar_one()
        assert columns == 0
        assert migrate.upgrade(engine) == ("0007", migrate.HEAD)
        migrate.check(engine)
    finally:
        engine.dispose()


def _unusable(kind: str) -> tuple[str, str]:
    """(URL, the cause the operator must read) for one unusable server."""
    admin = make_url(pg_support.admin_url())
    if kind == "unreachable":
        url = admin.set(port=1, password="s3cret-pw", database="notes")
        return url.render_as_string(False), "the database server cannot be reached"
    if kind == "bad credentials":
        url = admin.set(username="no_such_role_xyz", password="s3cret-pw")
        return url.render_as_string(False), "the server refused the credentials"
    url = admin.set(database="no_such_database_xyz", password="s3cret-pw")
    return url.render_as_string(False), "the database does not exist on the server"


@pytest.mark.parametrize("kind", ["unreachable", "bad credentials", "missing database"])
@pytest.mark.parametrize("command", ["migrate", "serve stdio", "serve http", "token create"])
def test_an_unusable_postgresql_server_is_one_line_and_exit_2(
    tmp_path: Path, kind: str, command: str
) -> None:
    url, cause = _unusable(kind)
    done = run_cli(tmp_path, COMMANDS[command], url, KEYS)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("notes-server: error: cannot use the database ")
    assert done.stderr.endswith(f": {cause}\n"), done.stderr
    assert "s3cret-pw" not in done.stderr and "no_such_role_xyz" not in done.stderr
    assert "Traceback" not in done.stderr


def test_http_on_postgresql_without_shared_state_keys_is_refused(tmp_path: Path) -> None:
    url = pg_support.database_url(tmp_path)
    done = run_cli(tmp_path, COMMANDS["serve http"], url)
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1
    assert "NOTES_SERVER_STATE_KEYS must be set" in done.stderr
