"""`notes-server host-config --transport http`, as real processes: the entries for Claude
Code, VS Code and Cursor reach a real `serve --transport http` once the host fills in the
token from where it keeps secrets, and no token is ever printed unless passed with --token."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from notes_server.security.tokens import create_token
from notes_server.store.tokens import SqlTokenRecords
from tests.helpers import make_request, subprocess_env
from tests.transports.http_support import HttpServer, mcp_headers, start_http_server

SCRIPT = Path(sys.executable).parent / "notes-server"
SECRET_LOOKALIKE = "nst_fromtheenvironment"


def host_config(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The variable is set here to prove host-config never reads or prints it.
    env = subprocess_env(tmp_path, {"NOTES_SERVER_TOKEN": SECRET_LOOKALIKE})
    return subprocess.run(
        [str(SCRIPT), "host-config", "--transport", "http", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def printed(tmp_path: Path, *args: str) -> str:
    done = host_config(tmp_path, *args)
    assert done.returncode == 0, done.stderr
    assert SECRET_LOOKALIKE not in done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def served(tmp_path: Path, migrated_engine: Any, settings: Any) -> Iterator[tuple[HttpServer, str]]:
    _, token = create_token(SqlTokenRecords(migrated_engine), "alice")
    server = start_http_server(tmp_path, settings.db_url)
    try:
        yield server, token
    finally:
        server.stop()


def tools_list(url: str, headers: dict[str, str]) -> httpx.Response:
    message = make_request("tools/list")
    return httpx.post(url, json=message, headers={**mcp_headers(message), **headers}, timeout=30)


def test_each_hosts_entry_reaches_the_server_once_the_host_supplies_the_token(
    tmp_path: Path, served: tuple[HttpServer, str]
) -> None:
    server, token = served
    url = f"{server.url}/mcp"

    # Claude Code: the shell that runs the printed command expands $NOTES_SERVER_TOKEN.
    command = printed(tmp_path, "--client", "claude", "--url", url).strip()
    assert command.startswith(f"claude mcp add --transport http notes {url} --header ")
    echoed = subprocess.run(
        ["bash", "-c", 'printf "%s\\n" ' + command.removeprefix("claude ")],
        env={**os.environ, "NOTES_SERVER_TOKEN": token},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert echoed[-2:] == ["--header", f"Authorization: Bearer {token}"]
    name, value = echoed[-1].split(": ", 1)

    # VS Code: the promptString input fills ${input:...}.
    vscode = json.loads(printed(tmp_path, "--client", "vscode", "--url", url))
    (prompt,) = vscode["inputs"]
    assert prompt["type"] == "promptString" and prompt["password"] is True
    entry = vscode["servers"]["notes"]
    assert (entry["type"], entry["url"]) == ("http", url)
    filled = entry["headers"]["Authorization"].replace(f"${{input:{prompt['id']}}}", token)

    # Cursor: ${env:NOTES_SERVER_TOKEN} interpolation.
    cursor = json.loads(printed(tmp_path, "--client", "cursor", "--url", url))
    remote = cursor["mcpServers"]["notes"]
    assert set(remote) == {"url", "headers"} and remote["url"] == url
    interpolated = remote["headers"]["Authorization"].replace("${env:NOTES_SERVER_TOKEN}", token)

    for headers in ({name: value}, {"Authorization": filled}, {"Authorization": interpolated}):
        assert headers == {"Authorization": f"Bearer {token}"}
        reply = tools_list(url, headers)
        assert reply.status_code == 200, reply.text
        assert "notes_create" in {tool["name"] for tool in reply.json()["result"]["tools"]}
    assert tools_list(url, {}).status_code == 401


@pytest.mark.parametrize("client", ["claude", "vscode", "cursor"])
def test_an_explicit_token_is_written_into_the_entry_with_a_warning(
    tmp_path: Path, client: str
) -> None:
    done = host_config(tmp_path, "--client", client, "--token", "nst_given")

    assert done.returncode == 0, done.stderr
    assert "Bearer nst_given" in done.stdout
    assert "${" not in done.stdout and "NOTES_SERVER_TOKEN" not in done.stdout
    assert "contains your token" in done.stderr


def test_the_default_url_is_the_default_serve_address_and_a_bare_origin_gets_mcp(
    tmp_path: Path,
) -> None:
    default = json.loads(printed(tmp_path, "--client", "cursor"))
    origin = json.loads(printed(tmp_path, "--client", "cursor", "--url", "https://notes.example"))

    assert default["mcpServers"]["notes"]["url"] == "http://127.0.0.1:8765/mcp"
    assert origin["mcpServers"]["notes"]["url"] == "https://notes.example/mcp"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--url", "https://alice:hunter2@notes.example/mcp"), "must not carry credentials"),
        (("--url", "ftp://notes.example"), "must be an http:// or https:// URL"),
        (("--url", "https://notes.example/mcp?token=hunter2"), "must be a plain URL"),
        (("--db", "sqlite:////tmp/notes.db"), "--db is for --transport stdio"),
    ],
    ids=["credentials", "scheme", "query", "db"],
)
def test_a_bad_http_entry_request_is_refused_without_echoing_secrets(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = host_config(tmp_path, *args)

    assert done.returncode == 2
    assert done.stdout == ""
    assert message in done.stderr
    assert "hunter2" not in done.stderr


def test_url_and_token_need_the_http_transport(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SCRIPT), "host-config", "--token", "nst_given"],
        env=subprocess_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "--url and --token need --transport http" in done.stderr
    assert "nst_given" not in done.stdout


def test_host_config_help_names_the_http_transport(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SCRIPT), "host-config", "--help"], capture_output=True, text=True, timeout=60
    )

    text = " ".join(done.stdout.split())
    assert "--transport [stdio|http]" in text
    assert "--url URL" in text and "--token TOKEN" in text


def test_the_printed_claude_command_quotes_the_url_for_the_shell(tmp_path: Path) -> None:
    command = printed(tmp_path, "--client", "claude", "--url", "https://notes.example/a&b")

    words = shlex.split(command)
    assert words[:6] == ["claude", "mcp", "add", "--transport", "http", "notes"]
    assert words[6] == "https://notes.example/a&b"
