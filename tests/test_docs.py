"""The README must mention every CLI command and every shipped tool."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from notes_server.cli import main
from notes_server.tools.registry import SHIPPED

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _command_paths(group: click.Group, prefix: str) -> list[str]:
    paths: list[str] = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        paths.append(path)
        if isinstance(command, click.Group):
            paths.extend(_command_paths(command, path))
    return paths


@pytest.mark.parametrize("command", _command_paths(main, "notes-server"))
def test_every_cli_command_is_documented_in_the_readme(command: str) -> None:
    assert f"`{command}" in README, f"README does not document `{command}`"


@pytest.mark.parametrize("tool", [cls.name for cls in SHIPPED])
def test_every_shipped_tool_is_documented_in_the_readme(tool: str) -> None:
    assert f"`{tool}`" in README, f"README does not document the tool {tool}"
