"""`notes-server sync --watch` as a real process: a full reconcile at start, then a round per
burst of changes, including an editor's save by rename-over, with inotify and by polling; the
periodic reconcile is an hour away, so only the change itself can start a round."""

from __future__ import annotations

import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.helpers import subprocess_env

pytest.importorskip("watchfiles")

WS = "file:///home/alice/notes"
NOTES_SERVER = str(Path(sys.executable).with_name("notes-server"))


class Watcher:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)

    def next_round(self) -> dict[str, Any]:
        return dict(json.loads(self.lines.get(timeout=60)))


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "a.md").write_text("# A\nfirst\n", "utf-8")
    return folder


@pytest.fixture(params=["inotify", "poll"])
def watcher(request: pytest.FixtureRequest, tmp_path: Path, vault: Path) -> Iterator[Watcher]:
    """`poll` is how a folder on a filesystem without inotify (NFS, SMB, FUSE) is watched."""
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{tmp_path}/notes.db"})
    subprocess.run([NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)
    poll = ["--poll"] if request.param == "poll" else []
    # No periodic reconcile within the test: every round after the first is a change's.
    quiet = ["--interval", "3600"]
    proc = subprocess.Popen(
        [NOTES_SERVER, "sync", "--watch", "--json", *poll, *quiet, "--workspace", WS, str(vault)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield Watcher(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def note_rows(tmp_path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(tmp_path / "notes.db") as conn:
        return conn.execute("SELECT id, path, body FROM notes ORDER BY path").fetchall()


def test_watch_reconciles_at_start_then_follows_a_rename_over_save(
    watcher: Watcher, vault: Path, tmp_path: Path
) -> None:
    first = watcher.next_round()
    assert first["imported"] == 1
    ((note_id, _path, _body),) = note_rows(tmp_path)

    # vim with backupcopy=no: the old file is renamed away, the new one written, the old removed
    os.rename(vault / "a.md", vault / "a.md~")
    (vault / "a.md").write_text("# A\nsecond, saved by vim\n", "utf-8")
    os.unlink(vault / "a.md~")
    edited = watcher.next_round()

    assert (edited["updated"], edited["deleted"], edited["imported"]) == (1, 0, 0)
    assert note_rows(tmp_path) == [(note_id, "a.md", "# A\nsecond, saved by vim\n")]

    # VS Code: a temp file beside it, renamed over the note. Its modification time is the
    # note's own (a second save within the same second looks so to a whole-second poller, and
    # rsync -t or cp -p keep it): the inode and change time still differ.
    (vault / "a.md.tmp-vscode").write_text("# A\nthird\n", "utf-8")
    before = os.stat(vault / "a.md")
    os.utime(vault / "a.md.tmp-vscode", ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(vault / "a.md.tmp-vscode", vault / "a.md")
    again = watcher.next_round()

    assert again["updated"] == 1
    assert note_rows(tmp_path) == [(note_id, "a.md", "# A\nthird\n")]

    watcher.proc.send_signal(signal.SIGINT)
    assert watcher.proc.wait(timeout=30) == 0
