"""The README must mention every CLI command and every shipped tool, and its examples must be
copy-pasteable: real commands only, and one principal name throughout."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import click
import pytest

from notes_server.cli.main import main
from notes_server.features.folders.tool import ImportFolder
from notes_server.tools.registry import SHIPPED

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FENCED = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
COMMENT = re.compile(r"\s+#.*$", re.MULTILINE)
# Where the examples name a principal: options, arguments and home directories.
PRINCIPAL_SPOTS = (
    r"--principal (\S+)",
    r'"--principal",\s*"([^"]+)"',
    r"workspace (?:grant|revoke) (\S+)",
    r"token create (\S+)",
    r"file:///home/([^/\s]+)",
)


def _command_paths(group: click.Group, prefix: str) -> list[str]:
    paths: list[str] = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, path))
    return paths


def _code() -> list[str]:
    """Every fenced block (shell comments dropped) and every inline code span of the README."""
    blocks = [COMMENT.sub("", block) for block in FENCED.findall(README)]
    return blocks + re.findall(r"`([^`\n]+)`", FENCED.sub("", README))


def _examples() -> str:
    """The example code, without the command table's placeholders (PRINCIPAL, NAME)."""
    return "\n".join(span for span in _code() if "PRINCIPAL" not in span and "NAME" not in span)


@pytest.mark.parametrize("command", _command_paths(main, "notes-server"))
def test_every_cli_command_is_documented_in_the_readme(command: str) -> None:
    assert f"`{command}" in README, f"README does not document `{command}`"


@pytest.mark.parametrize("command", _command_paths(main, "notes-server"))
def test_every_cli_command_has_a_row_in_the_command_table(command: str) -> None:
    assert f"\n| `{command}" in README, f"the command table lacks `{command}`"


def test_every_command_the_readme_runs_exists() -> None:
    named = {
        match.group(1)
        for span in _code()
        for match in re.finditer(r"(?:notes-server|\$N) ([a-z][a-z-]*)", span)
    }

    assert named, "found no commands in the README"
    assert named <= set(main.commands), f"unknown commands: {sorted(named - set(main.commands))}"


def test_the_readme_examples_use_one_principal_throughout() -> None:
    examples = _examples()
    principals = {name for spot in PRINCIPAL_SPOTS for name in re.findall(spot, examples)}
    # A JWT user is ISSUER|SUBJECT: the same person, named by an identity provider.
    subjects = {name.strip("'\"").rpartition("|")[2] for name in principals}

    assert subjects == {"alice"}


@pytest.mark.parametrize("tool", [cls.name for cls in (*SHIPPED, ImportFolder)])
def test_every_shipped_tool_is_documented_in_the_readme(tool: str) -> None:
    assert f"`{tool}`" in README, f"README does not document the tool {tool}"


def test_the_readme_raw_stdio_request_creates_a_note(tmp_path: Path) -> None:
    (block,) = [b for b in FENCED.findall(README) if b.startswith("printf ")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTES_SERVER_")}
    env["XDG_DATA_HOME"] = str(tmp_path)
    grant = [".venv/bin/notes-server", "workspace", "grant", "alice", "file:///home/alice/notes"]
    subprocess.run(grant, cwd=ROOT, env=env, check=True, capture_output=True, timeout=60)

    result = subprocess.run(
        ["bash", "-c", block], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["result"]["isError"] is False, reply
    assert reply["result"]["structuredContent"]["note"]["title"] == "Hello"


def test_node_requirements_agree_with_scripts_clients() -> None:
    """The README, the skip messages and scripts/clients name one Node floor: the Inspector
    2.x's (>= 22.19), and the README names the Inspector by its working major version."""
    clients = (ROOT / "scripts" / "clients").read_text(encoding="utf-8")
    skip_messages = [
        path.read_text(encoding="utf-8")
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if "run scripts/clients" in path.read_text(encoding="utf-8")
    ]

    readme = " ".join(README.split())

    assert "Node must be >= 22.19" in clients
    assert "elsewhere the system Node must be >= 22.19" in readme
    assert "npx @modelcontextprotocol/inspector@2 --cli" in readme
    assert "Inspector 2.x needs Node >= 22.19" in readme
    for text in [README, clients, *skip_messages]:
        assert not re.search(r"Node (>=|≥) ?18\b", text)
