"""Long commands on a terminal: a progress bar on stderr, then the summary on stdout."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.helpers import subprocess_env

NOTES_SERVER = str(Path(sys.executable).with_name("notes-server"))
WS = "file:///home/alice/notes"


def _big_vault(root: Path, folders: int = 100, per_folder: int = 100) -> None:
    for d in range(folders):
        folder = root / f"d{d:03}"
        folder.mkdir(parents=True)
        for n in range(per_folder):
            (folder / f"n{n:03}.md").write_text(f"# Note {d}-{n}\n\nbody\n", "utf-8")


def _run_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (as a person would see it), stdout on a pipe."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    screen = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=120), out, screen.decode(errors="replace")


def test_a_ten_thousand_file_folder_imports_with_a_progress_bar(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    _big_vault(vault)
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{tmp_path}/notes.db"})
    subprocess.run([NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)

    code, out, screen = _run_on_a_terminal(
        [NOTES_SERVER, "import", str(vault), "--workspace", WS], env
    )

    assert code == 0
    assert out == "10000 imported\n"
    assert "importing" in screen
    assert "10000/10000" in screen
    assert "files/s" in screen and " MB, " in screen


def test_json_output_has_no_progress_bar_even_on_a_terminal(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    _big_vault(vault, folders=2, per_folder=3)
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{tmp_path}/notes.db"})
    subprocess.run([NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)

    code, out, screen = _run_on_a_terminal(
        [NOTES_SERVER, "import", str(vault), "--workspace", WS, "--json"], env
    )

    assert code == 0
    assert json.loads(out)["imported"] == 6
    assert screen == ""


def test_sync_shows_a_progress_bar_on_a_terminal_then_its_summary(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    _big_vault(vault, folders=3, per_folder=100)
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{tmp_path}/notes.db"})
    subprocess.run([NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)

    code, out, screen = _run_on_a_terminal(
        [NOTES_SERVER, "sync", "--workspace", WS, str(vault)], env
    )

    assert code == 0
    assert out == "300 imported\n"
    assert "syncing" in screen and "300/300" in screen
    assert "files/s" in screen and " MB, " in screen


def test_export_shows_a_progress_bar_on_a_terminal_then_its_summary(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    _big_vault(vault, folders=3, per_folder=100)
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{tmp_path}/notes.db"})
    subprocess.run([NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)
    subprocess.run(
        [NOTES_SERVER, "import", str(vault), "--workspace", WS],
        env=env,
        check=True,
        capture_output=True,
    )

    code, out, screen = _run_on_a_terminal(
        [NOTES_SERVER, "export", "--workspace", WS, str(tmp_path / "out")], env
    )

    assert code == 0
    assert out == "300 exported\n"
    assert "exporting" in screen and "300/300" in screen
    assert "files/s" in screen and " MB, " in screen
