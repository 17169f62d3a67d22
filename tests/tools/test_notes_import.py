"""notes_import: reads only the folder the operator mirrored for the caller's workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import Engine

from notes_server.cli.main import main
from notes_server.store import folders
from notes_server.store.engine import write_tx
from notes_server.tools.services import utc_now
from tests.helpers import workspace_refusal

Call = Callable[..., dict[str, Any]]
Grant = Callable[..., str]
NOTES = "file:///home/alice/notes"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n", "utf-8")
    (folder / "sub" / "b.md").write_text("---\ntitle: Beta\n---\nbeta\n", "utf-8")
    (folder / "evil.md").symlink_to(tmp_path / "secret.md")
    return folder


def mirror(engine: Engine, principal: str, workspace: str, folder: Path) -> None:
    with write_tx(engine) as conn:
        folders.set_mirror(conn, principal, workspace, str(folder), utc_now())


def result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply
    found: dict[str, Any] = reply["result"]
    return found


def test_notes_import_reads_the_mirrored_folder_and_is_idempotent(
    call_tool: Call, grant: Grant, migrated_engine: Engine, vault: Path
) -> None:
    grant("alice", NOTES)
    mirror(migrated_engine, "alice", NOTES, vault)

    first = result(call_tool("notes_import", {"workspaceUri": NOTES}))
    second = result(call_tool("notes_import", {"workspaceUri": NOTES}))

    assert first["isError"] is False
    assert first["structuredContent"] == {
        "imported": 2,
        "unchanged": 0,
        "skipped": 0,
        "refused": 1,
        "problems": [{"action": "refused", "path": "evil.md", "reason": "symlink (not followed)"}],
    }
    assert (second["structuredContent"]["imported"], second["structuredContent"]["unchanged"]) == (
        0,
        2,
    )
    found = result(call_tool("notes_search", {"workspaceUri": NOTES, "query": "Beta"}))
    assert "sub/b.md" in str(found["structuredContent"])


def test_notes_import_without_a_mirror_says_how_to_configure_one(
    call_tool: Call, grant: Grant
) -> None:
    grant("alice", NOTES)

    reply = result(call_tool("notes_import", {"workspaceUri": NOTES}))

    assert reply["isError"] is True
    assert reply["content"][0]["text"] == (
        "No folder is configured for this workspace; the server's operator can set one with "
        "`notes-server workspace mirror`."
    )


def test_another_principals_mirror_is_never_used(
    call_tool: Call, grant: Grant, migrated_engine: Engine, vault: Path
) -> None:
    grant("alice", NOTES)
    mirror(migrated_engine, "bob", NOTES, vault)

    reply = result(call_tool("notes_import", {"workspaceUri": NOTES}))

    assert reply["isError"] is True


@pytest.mark.parametrize("role", [None, "read"])
def test_notes_import_needs_a_write_grant(
    call_tool: Call, grant: Grant, migrated_engine: Engine, vault: Path, role: str | None
) -> None:
    if role is not None:
        grant("alice", NOTES, role=role)
    mirror(migrated_engine, "alice", NOTES, vault)

    reply = call_tool("notes_import", {"workspaceUri": NOTES})

    assert workspace_refusal(reply["error"])


def test_a_client_cannot_name_a_folder(call_tool: Call, grant: Grant) -> None:
    grant("alice", NOTES)

    reply = call_tool("notes_import", {"workspaceUri": NOTES, "folder": "/etc"})

    assert reply["error"]["code"] == -32602
    assert "folder" in reply["error"]["message"]


def test_a_vanished_mirror_folder_is_reported_without_its_path(
    call_tool: Call, grant: Grant, migrated_engine: Engine, tmp_path: Path
) -> None:
    grant("alice", NOTES)
    mirror(migrated_engine, "alice", NOTES, tmp_path / "gone")

    reply = result(call_tool("notes_import", {"workspaceUri": NOTES}))

    assert reply["isError"] is True
    assert reply["content"][0]["text"] == (
        "The folder configured for this workspace cannot be opened (a folder mirrored after the "
        "server started is readable once the server restarts)."
    )
    assert str(tmp_path) not in str(reply)


def test_workspace_mirror_command_configures_the_folder(tmp_path: Path, vault: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "NOTES_SERVER_DB": None}
    runner = CliRunner()

    first = runner.invoke(main, ["workspace", "mirror", "alice", NOTES, str(vault)], env=env)
    again = runner.invoke(main, ["workspace", "mirror", "alice", NOTES, str(vault)], env=env)
    missing = runner.invoke(
        main, ["workspace", "mirror", "alice", NOTES, str(tmp_path / "x")], env=env
    )

    assert first.exit_code == 0, first.output
    assert first.output == (
        f"mirrored: notes_import for alice on {NOTES} reads {vault}\n"
        "a running server reads it after a restart\n"
    )
    assert again.output.startswith("updated: ")
    assert missing.exit_code == 2
    assert missing.output.endswith("x: no such directory\n")
