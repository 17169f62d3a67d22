"""Import, export and sync confined: the kernel refuses every write except the database's and
those beneath the mirrored folder (Landlock), each checked in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from notes_server.security.sandbox import abi_version
from tests.helpers import subprocess_env

pytestmark = pytest.mark.skipif(abi_version() < 1, reason="needs Landlock")

NOTES_SERVER = str(Path(sys.executable).with_name("notes-server"))
WS = "file:///home/alice/notes"

# Confine exactly as `export`/`sync` do, then try writes inside and outside the folder.
PROBE = """
import json, os, sqlite3, sys
from pathlib import Path
from notes_server.security.sandbox import confine, policy_for_folder

db, folder, outside = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
confine("require", policy_for_folder(db, (folder,)))

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return os.strerror(exc.errno)

def write(path):
    return lambda: path.write_text("x")

def write_db():
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS probe (x)")
    conn.commit()
    conn.close()

print(json.dumps({
    "file in folder": attempt(write(folder / "note.md")),
    "new subfolder": attempt(lambda: (folder / "sub").mkdir()),
    "file in subfolder": attempt(write(folder / "sub" / "deep.md")),
    "rename in folder": attempt(lambda: os.rename(folder / "note.md", folder / "moved.md")),
    "database": attempt(write_db),
    "file outside": attempt(write(outside / "leak.md")),
    "existing file outside": attempt(write(outside / "existing.md")),
    "beside the database": attempt(write(db.with_name("beside.md"))),
    "symlink in folder": attempt(lambda: os.symlink(outside, folder / "link")),
}))
"""


@pytest.fixture
def scene(tmp_path: Path) -> tuple[dict[str, str], Path, Path, Path]:
    db = tmp_path / "db" / "notes.db"
    db.parent.mkdir()
    env = subprocess_env(tmp_path, {"NOTES_SERVER_DB": f"sqlite:///{db}"})
    subprocess.run([NOTES_SERVER, "migrate"], env=env, check=True, capture_output=True)
    folder, outside = tmp_path / "folder", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    (outside / "existing.md").write_text("untouched", "utf-8")
    return env, db, folder, outside


def test_the_kernel_refuses_writes_outside_the_mirrored_folder(
    scene: tuple[dict[str, str], Path, Path, Path],
) -> None:
    env, db, folder, outside = scene

    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(db), str(folder), str(outside)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert json.loads(completed.stdout) == {
        "file in folder": "ok",
        "new subfolder": "ok",
        "file in subfolder": "ok",
        "rename in folder": "ok",
        "database": "ok",
        "file outside": "Permission denied",
        "existing file outside": "Permission denied",
        "beside the database": "Permission denied",
        "symlink in folder": "Permission denied",
    }
    assert (outside / "existing.md").read_text("utf-8") == "untouched"


def test_export_and_sync_run_confined_with_sandbox_require(
    scene: tuple[dict[str, str], Path, Path, Path], tmp_path: Path
) -> None:
    env, _db, folder, _outside = scene
    source = tmp_path / "source"
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
        )
        for step in steps
    ]

    assert [(o.returncode, o.stdout) for o in outputs] == [
        (0, "1 imported\n"),
        (0, "1 exported\n"),
        (0, "1 unchanged\n"),
    ]
    assert (folder / "a.md").read_text("utf-8").endswith("---\n# A\n")
