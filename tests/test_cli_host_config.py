"""`notes-server host-config`, run as a real process: the snippet it prints must start this
server on the same database even when the host trims the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import make_request

SCRIPT = Path(sys.executable).parent / "notes-server"
WORKSPACE = "file:///home/alice/notes"
# What the MCP Python SDK's stdio client passes to a server it starts, and nothing else.
HOST_ENV_KEYS = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


@pytest.fixture
def shell_env(tmp_path: Path) -> dict[str, str]:
    """A user's shell that keeps its data under XDG_DATA_HOME, which hosts do not pass on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTES_SERVER_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    env["HOME"] = str(tmp_path / "home")
    return env


def host_config(env: dict[str, str], *args: str, cwd: Path | None = None) -> Any:
    result = subprocess.run(
        [str(SCRIPT), "host-config", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_host_config_prints_a_claude_desktop_entry_with_absolute_paths(
    shell_env: dict[str, str], tmp_path: Path
) -> None:
    config = host_config(shell_env, "--principal", "alice")

    (name,) = config["mcpServers"]
    entry = config["mcpServers"][name]
    command = Path(entry["command"])
    assert command.is_absolute() and os.access(command, os.X_OK)
    db_url = f"sqlite:///{tmp_path / 'xdg' / 'notes-server' / 'notes.db'}"
    assert entry["args"] == ["serve", "--db", db_url, "--principal", "alice"]


def test_host_config_prints_the_vscode_servers_shape_with_a_stdio_type(
    shell_env: dict[str, str],
) -> None:
    config = host_config(shell_env, "--principal", "alice", "--client", "vscode")

    assert list(config) == ["servers"]
    entry = config["servers"]["notes"]
    assert entry["type"] == "stdio"
    assert Path(entry["command"]).is_absolute()
    assert entry["args"][0] == "serve"


def test_host_config_prints_the_cursor_mcp_servers_shape(shell_env: dict[str, str]) -> None:
    config = host_config(shell_env, "--principal", "alice", "--client", "cursor")

    assert list(config) == ["mcpServers"]
    assert set(config["mcpServers"]["notes"]) == {"command", "args"}


def test_host_config_makes_a_relative_sqlite_path_absolute_without_creating_it(
    shell_env: dict[str, str], tmp_path: Path
) -> None:
    config = host_config(
        shell_env, "--principal", "alice", "--db", "sqlite:///rel.db?timeout=5", cwd=tmp_path
    )

    args = config["mcpServers"]["notes"]["args"]
    assert args[args.index("--db") + 1] == f"sqlite:///{tmp_path / 'rel.db'}?timeout=5"
    assert not (tmp_path / "rel.db").exists()


def test_the_printed_entry_serves_the_granted_database_under_a_trimmed_environment(
    shell_env: dict[str, str], tmp_path: Path
) -> None:
    grant = [str(SCRIPT), "workspace", "grant", "alice", WORKSPACE]
    subprocess.run(grant, env=shell_env, check=True, capture_output=True, timeout=60)
    entry = host_config(shell_env, "--principal", "alice")["mcpServers"]["notes"]
    host_env = {k: shell_env[k] for k in HOST_ENV_KEYS if k in shell_env}
    request = make_request(
        "tools/call", {"name": "notes_search", "arguments": {"workspaceUri": WORKSPACE}}
    )

    served = subprocess.run(
        [entry["command"], *entry["args"]],
        input=json.dumps(request) + "\n",
        env=host_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert served.returncode == 0, served.stderr
    reply = json.loads(served.stdout)
    assert "error" not in reply, reply
    assert reply["result"]["structuredContent"]["notes"] == []


@pytest.mark.parametrize("flag", [("--principal", ""), ("--principal", "  ")])
def test_host_config_refuses_an_empty_principal_naming_the_unset_variable(
    shell_env: dict[str, str], flag: tuple[str, str]
) -> None:
    result = subprocess.run(
        [str(SCRIPT), "host-config", *flag], env=shell_env, capture_output=True, text=True
    )

    assert result.returncode == 2
    assert result.stdout == ""
    assert "--principal" in result.stderr and "$USER" in result.stderr
    assert "Traceback" not in result.stderr


def test_host_config_refuses_to_print_a_database_password(shell_env: dict[str, str]) -> None:
    url = "postgresql://notes:s3cret-pw@db.example/notes"

    result = subprocess.run(
        [str(SCRIPT), "host-config", "--principal", "alice", "--db", url],
        env=shell_env,
        capture_output=True,
        text=True,
    )

    assert result.returncode == 2
    assert "s3cret-pw" not in result.stdout + result.stderr
    assert "credentials" in result.stderr
