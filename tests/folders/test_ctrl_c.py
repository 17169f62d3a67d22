"""Ctrl-C in `import`, `export` and `sync` (real processes, a real SIGINT): the command stops
after the file at hand, prints the summary of what was committed, exits 130, and running it
again finishes the job."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.helpers import subprocess_env

WS = "file:///home/alice/notes"
HERE = Path(__file__).resolve().parent
FILES = 10
HELD_AT = 3  # the command is held (and interrupted) at its 3rd counted file
WAIT_S = 60  # a safety net against a hung child, not a timing assertion
NOTES_SERVER = [sys.executable, "-m", "notes_server"]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{tmp_path}/notes.db"})
    subprocess.run([*NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)
    return env


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    for n in range(FILES):
        (folder / f"n{n:02}.md").write_text(f"# Note {n}\nbody {n}\n", "utf-8")
    return folder


class Held:
    """A command held at its `at`-th file until `interrupt` sends SIGINT and lets it go."""

    def __init__(self, args: list[str], env: dict[str, str], at: int = HELD_AT) -> None:
        self.at = at
        read_end, self.gate = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "paused_cli.py"), str(at), str(read_end), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            pass_fds=(read_end,),
        )
        os.close(read_end)
        self.stderr: list[str] = []

    def _line(self, stream: IO[str] | None) -> str:
        assert stream is not None
        line = stream.readline()
        self.stderr.append(line)
        assert line, f"exited {self.proc.wait(WAIT_S)}: {self.stderr}"
        return line

    def wait_for(self, text: str) -> None:
        while text not in self._line(self.proc.stderr):
            pass

    def interrupt(self) -> tuple[int, str, str]:
        self.wait_for(f"paused at {self.at}")
        self.proc.send_signal(signal.SIGINT)
        self.wait_for("stopping after the current file (Ctrl-C again aborts it)")
        os.close(self.gate)
        out, err = self.proc.communicate(timeout=WAIT_S)
        return self.proc.returncode, out, "".join(self.stderr) + err


@pytest.fixture
def held(env: dict[str, str]) -> Iterator[Any]:
    started: list[Held] = []

    def start(*args: str, at: int = HELD_AT) -> Held:
        started.append(Held([*args, "--sandbox", "off"], env, at))
        return started[-1]

    yield start
    for one in started:
        if one.proc.poll() is None:
            one.proc.kill()
            one.proc.wait()


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOTES_SERVER, *args, "--sandbox", "off"],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        stdin=subprocess.DEVNULL,
    )


def note_count(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "notes.db") as conn:
        return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])


INTERRUPTED = "interrupted: stopped after the current file; run the command again to finish"


def test_ctrl_c_in_import_commits_what_it_counted_and_a_rerun_finishes(
    tmp_path: Path, env: dict[str, str], vault: Path, held: Any
) -> None:
    status, out, err = held("import", str(vault), "--workspace", WS).interrupt()

    assert status == 130, err
    assert out.splitlines() == [f"{HELD_AT} imported", INTERRUPTED]
    assert note_count(tmp_path) == HELD_AT
    assert "Traceback" not in err and "Aborted" not in err

    again = run(env, "import", str(vault), "--workspace", WS)
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{FILES - HELD_AT} imported, {HELD_AT} unchanged\n"
    assert note_count(tmp_path) == FILES


def test_ctrl_c_in_import_with_json_says_interrupted(
    tmp_path: Path, vault: Path, held: Any
) -> None:
    status, out, _ = held("import", str(vault), "--workspace", WS, "--json").interrupt()

    assert status == 130
    summary = json.loads(out)
    assert (summary["imported"], summary["interrupted"]) == (HELD_AT, True)
    assert note_count(tmp_path) == HELD_AT


def test_ctrl_c_in_export_stops_after_the_current_file_and_a_rerun_finishes(
    tmp_path: Path, env: dict[str, str], vault: Path, held: Any
) -> None:
    assert run(env, "import", str(vault), "--workspace", WS).returncode == 0
    target = tmp_path / "export"

    status, out, err = held("export", "--workspace", WS, str(target)).interrupt()

    assert status == 130, err
    assert out.splitlines() == [f"{HELD_AT} exported", INTERRUPTED]
    assert len(list(target.glob("*.md"))) == HELD_AT

    again = run(env, "export", "--workspace", WS, str(target))
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{HELD_AT} unchanged, {FILES - HELD_AT} exported\n"
    assert len(list(target.glob("*.md"))) == FILES


def test_ctrl_c_in_sync_commits_the_reconciled_part_and_a_rerun_finishes(
    tmp_path: Path, env: dict[str, str], vault: Path, held: Any
) -> None:
    status, out, err = held("sync", "--workspace", WS, str(vault)).interrupt()

    assert status == 130, err
    assert out.splitlines() == [f"{HELD_AT} imported", INTERRUPTED]
    assert note_count(tmp_path) == HELD_AT

    again = run(env, "sync", "--workspace", WS, str(vault))
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{FILES - HELD_AT} imported, {HELD_AT} unchanged\n"
    assert note_count(tmp_path) == FILES
    assert sorted(p.name for p in vault.iterdir()) == [f"n{n:02}.md" for n in range(FILES)]


def test_ctrl_c_while_sync_reads_the_folder_commits_nothing_and_deletes_nothing(
    tmp_path: Path, env: dict[str, str], vault: Path, held: Any
) -> None:
    assert run(env, "sync", "--workspace", WS, str(vault)).returncode == 0
    (vault / "a-first.md").symlink_to(vault / "n00.md")  # refused, and read before the rest

    status, out, err = held("sync", "--workspace", WS, str(vault), at=1).interrupt()

    assert status == 130, err
    assert out.splitlines() == ["nothing committed", INTERRUPTED]
    assert note_count(tmp_path) == FILES  # the files not read yet were not taken as deleted
    assert len(list(vault.glob("n*.md"))) == FILES
    again = run(env, "sync", "--workspace", WS, str(vault))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"{FILES} unchanged, 1 refused\n")
