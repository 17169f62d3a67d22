"""The `notes-server` command line, driven through click's CliRunner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from notes_server.cli.main import main
from notes_server.store.migrate import HEAD, sqlite_revision

Run = Callable[..., Result]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str | None]:
    """Keep every command away from the real home and from the caller's configuration."""
    return {
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "NOTES_SERVER_DB": None,
        "NOTES_SERVER_PRINCIPAL": None,
        "NOTES_SERVER_STATE_KEYS": None,
    }


@pytest.fixture
def run(env: dict[str, str | None]) -> Iterator[Run]:
    runner = CliRunner()

    def _run(*args: str, extra_env: dict[str, str] | None = None) -> Result:
        return runner.invoke(main, list(args), env={**env, **(extra_env or {})})

    yield _run


def default_db(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "notes-server" / "notes.db"


# --- migrate -----------------------------------------------------------------------------


def test_migrate_upgrades_once_then_reports_nothing_to_do(run: Run, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"

    first = run("migrate", "--db", url)
    second = run("migrate", "--db", url)

    assert first.exit_code == 0, first.output
    assert f"upgraded from empty to {HEAD}" in first.stdout
    assert second.exit_code == 0, second.output
    assert f"already at revision {HEAD}" in second.stdout
    assert sqlite_revision(tmp_path / "m.db") == HEAD


def test_migrate_takes_the_database_from_the_environment(run: Run, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/from-env.db"

    result = run("migrate", extra_env={"NOTES_SERVER_DB": url})

    assert result.exit_code == 0, result.output
    assert url in result.stdout
    assert sqlite_revision(tmp_path / "from-env.db") == HEAD
    assert not default_db(tmp_path).exists()


def test_the_db_flag_wins_over_the_environment(run: Run, tmp_path: Path) -> None:
    flag, environment = tmp_path / "flag.db", tmp_path / "env.db"

    result = run(
        "migrate",
        "--db",
        f"sqlite:///{flag}",
        extra_env={"NOTES_SERVER_DB": f"sqlite:///{environment}"},
    )

    assert result.exit_code == 0, result.output
    assert sqlite_revision(flag) == HEAD
    assert not environment.exists()


def test_migrate_without_configuration_uses_the_xdg_data_directory(
    run: Run, tmp_path: Path
) -> None:
    result = run("migrate")

    assert result.exit_code == 0, result.output
    assert sqlite_revision(default_db(tmp_path)) == HEAD


# --- workspace ---------------------------------------------------------------------------


def test_grant_stores_the_canonical_uri(run: Run) -> None:
    granted = run("workspace", "grant", "alice", "FILE:///home/alice/%6Eotes")
    listed = run("workspace", "list", "alice")

    assert granted.exit_code == 0, granted.output
    assert "granted: alice may use file:///home/alice/notes (write)" in granted.stdout
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == ["alice\twrite\tfile:///home/alice/notes"]


def test_the_first_grant_creates_the_default_database(run: Run, tmp_path: Path) -> None:
    result = run("workspace", "grant", "alice", "file:///home/alice/notes")

    assert result.exit_code == 0, result.output
    assert sqlite_revision(default_db(tmp_path)) == HEAD


def test_granting_again_updates_the_role(run: Run) -> None:
    run("workspace", "grant", "alice", "file:///home/alice/notes")

    again = run("workspace", "grant", "alice", "file:///home/alice/notes", "--role", "read")

    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("updated:")
    listed = run("workspace", "list")
    assert listed.stdout.splitlines() == ["alice\tread\tfile:///home/alice/notes"]


def test_list_filters_by_principal_and_says_when_there_is_nothing(run: Run) -> None:
    run("workspace", "grant", "alice", "file:///home/alice/notes")
    run("workspace", "grant", "bob", "file:///home/bob/notes")

    everyone = run("workspace", "list")
    nobody = run("workspace", "list", "carol")

    assert everyone.stdout.splitlines() == [
        "alice\twrite\tfile:///home/alice/notes",
        "bob\twrite\tfile:///home/bob/notes",
    ]
    assert nobody.exit_code == 0
    assert nobody.stdout.strip() == "no grants"


@pytest.mark.parametrize(
    "uri",
    [
        "file://host/notes",
        "https://example.com/notes",
        "file:///home/alice/../bob",
        "file:///home/alice/%2e%2e",
        "/home/alice/notes",
    ],
)
def test_a_malformed_workspace_uri_is_a_usage_error(run: Run, uri: str, tmp_path: Path) -> None:
    result = run("workspace", "grant", "alice", uri)

    assert result.exit_code == 2
    assert "not an acceptable workspace URI" in result.output
    assert "file:///home/alice/notes" in result.output
    assert not default_db(tmp_path).exists()


@pytest.mark.parametrize("command", ["grant", "revoke"])
def test_an_empty_principal_is_named_as_missing_not_blamed_on_the_uri(
    run: Run, command: str, tmp_path: Path
) -> None:
    # What `workspace grant "$USER" file:///home/$USER/notes` becomes with $USER unset.
    result = run("workspace", command, "", "file:///home//notes")

    assert result.exit_code == 2
    assert "Invalid value for PRINCIPAL: is empty" in result.output
    assert "$USER" in result.output
    assert "notes-server workspace grant alice file:///home/alice/notes" in result.output
    assert "URI" not in result.output.split("Error:", 1)[1]
    assert not default_db(tmp_path).exists()


def test_an_empty_uri_segment_hints_at_an_unset_shell_variable(run: Run) -> None:
    result = run("workspace", "grant", "alice", "file:///home//notes")

    assert result.exit_code == 2
    assert "empty path segment; an unset shell variable?" in result.output


def test_revoke_removes_a_grant(run: Run) -> None:
    run("workspace", "grant", "alice", "file:///home/alice/notes")

    result = run("workspace", "revoke", "alice", "file:///home/alice/notes")

    assert result.exit_code == 0, result.output
    assert "revoked" in result.stdout
    assert run("workspace", "list").stdout.strip() == "no grants"


def test_revoking_a_missing_grant_fails_with_exit_code_1(run: Run) -> None:
    result = run("workspace", "revoke", "alice", "file:///home/alice/notes")

    assert result.exit_code == 1
    assert "alice had no grant on file:///home/alice/notes" in result.output


# --- help --------------------------------------------------------------------------------


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from command_paths(command, (*prefix, name))
        else:
            yield (*prefix, name)


def test_the_command_walk_covers_the_shipped_commands() -> None:
    paths = set(command_paths(main))

    assert {(), ("serve",), ("migrate",), ("workspace", "grant"), ("workspace", "list")} <= paths


@pytest.mark.parametrize("path", list(command_paths(main)), ids=lambda p: " ".join(p) or "main")
def test_every_help_text_ends_with_an_example(run: Run, path: tuple[str, ...]) -> None:
    result = run(*path, "--help")

    assert result.exit_code == 0, result.output
    # click wraps a long epilog, so the example is the last paragraph, not always one line.
    last_paragraph = result.stdout.strip().split("\n\n")[-1]
    assert last_paragraph.strip().startswith("Example:"), result.stdout
    assert last_paragraph.count("Example:") == 1


def test_version_is_printed(run: Run) -> None:
    result = run("--version")

    assert result.exit_code == 0
    assert result.stdout.startswith("notes-server, version ")
