"""The PostgreSQL run: import, export and sync still work with reads confined. New connections
are opened after confinement, so libpq, its TLS probing and name resolution must find what they
read among the places left readable (its own files in $HOME are granted; with this trust-auth
server it reads none of them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from notes_server.security.sandbox import abi_version
from tests.helpers import default_db_url, subprocess_env
from tests.pg_support import on_postgresql

pytestmark = [
    pytest.mark.skipif(abi_version() < 1, reason="needs Landlock"),
    pytest.mark.skipif(not on_postgresql(), reason="the PostgreSQL run of the suite"),
]

NOTES_SERVER = str(Path(sys.executable).with_name("notes-server"))
WS = "file:///home/alice/notes"


def test_folder_commands_run_confined_on_postgresql(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": default_db_url(tmp_path), "HOME": str(home)})
    source, folder = tmp_path / "source", tmp_path / "folder"
    source.mkdir()
    (source / "a.md").write_text("# A\n", "utf-8")
    steps = [
        ["import", str(source), "--workspace", WS],
        ["export", "--workspace", WS, str(folder)],
        ["sync", "--workspace", WS, str(folder)],
    ]

    outputs = [
        subprocess.run(
            [NOTES_SERVER, *step, "--sandbox", "require"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=home,
        )
        for step in steps
    ]

    assert [(o.returncode, o.stdout, o.stderr) for o in outputs] == [
        (0, "1 imported\n", ""),
        (0, "1 exported\n", ""),
        (0, "1 unchanged\n", ""),
    ]
