"""Import, export and sync confined: the kernel refuses every write except the database's and
those beneath the mirrored folder, and every read except the folder's, the database's and the
interpreter's own (Landlock), each checked in a process of its own."""

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
from notes_server.store.sqlite_file import hold_open_in_wal

db, folder, outside = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
confine("require", policy_for_folder(db, (folder,)), hold_database=hold_open_in_wal)

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


# The real command, with its real confinement, and one spy: just before the command's work
# starts (after confinement), it tries to read secrets outside the folder, list outside, write
# outside, and import modules nothing has loaded yet; then the command goes on as usual.
SPY = """
import importlib, json, os, sys
from pathlib import Path

secrets, outside = [Path(p) for p in sys.argv[1].split(",")], Path(sys.argv[2])

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return os.strerror(exc.errno)
    except ImportError as exc:
        return f"ImportError {exc}"

def probe():
    late = ["xml.dom.minidom", "notes_server.features.folders.watch", "watchfiles"]
    names = ("secret in $HOME", "secret beside the folder", "secret beside the database")
    seen = {name: attempt(secret.read_bytes) for name, secret in zip(names, secrets)}
    seen["list outside"] = attempt(lambda: os.listdir(outside))
    seen["write outside"] = attempt(lambda: (outside / "leak.md").write_text("x"))
    seen["late imports"] = [
        "already loaded" if name in sys.modules else attempt(lambda: importlib.import_module(name))
        for name in late
    ]
    print("PROBE " + json.dumps(seen), file=sys.stderr, flush=True)

def spy(module_name, function):
    module = importlib.import_module(module_name)
    real = getattr(module, function)
    def spied(*args, **kwargs):
        probe()
        return real(*args, **kwargs)
    setattr(module, function, spied)

spy("notes_server.features.folders.importer", "import_folder")
spy("notes_server.features.folders.exporter", "export_workspace")
spy("notes_server.features.folders.sync", "sync_folder")
from notes_server.cli.main import main
main(sys.argv[3:], prog_name="notes-server")
"""


def _spied(
    env: dict[str, str], secrets: str, outside: Path, *command: str, cwd: Path | None = None
) -> tuple[str, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", SPY, secrets, str(outside), *command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    probes = [line for line in done.stderr.splitlines() if line.startswith("PROBE ")]
    assert len(probes) == 1, done.stderr
    return done.stdout, json.loads(probes[0].removeprefix("PROBE "))


@pytest.mark.parametrize("sandbox", ["require", "auto"])
def test_import_export_and_sync_read_nothing_outside_their_folder_yet_work(
    scene: tuple[dict[str, str], Path, Path, Path], tmp_path: Path, sandbox: str
) -> None:
    env, db, folder, outside = scene
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("home secret", "utf-8")
    (outside / "secret.txt").write_text("sibling secret", "utf-8")
    (db.parent / "secret.txt").write_text("beside the database", "utf-8")
    env = {**env, "HOME": str(home)}
    secrets = f"{home / '.ssh' / 'id_ed25519'},{outside / 'secret.txt'},{db.parent / 'secret.txt'}"
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.md").write_text("# A\n", "utf-8")
    steps = [
        ["import", str(source), "--workspace", WS],
        ["export", "--workspace", WS, str(folder)],
        ["sync", "--workspace", WS, str(folder)],
    ]

    # Run from $HOME: `-c` puts the working directory on sys.path, which must not make it
    # readable.
    runs = [_spied(env, secrets, outside, *step, "--sandbox", sandbox, cwd=home) for step in steps]

    assert [stdout for stdout, _probe in runs] == ["1 imported\n", "1 exported\n", "1 unchanged\n"]
    for _stdout, probe in runs:
        assert probe == {
            "secret in $HOME": "Permission denied",
            "secret beside the folder": "Permission denied",
            "secret beside the database": "Permission denied",
            "list outside": "Permission denied",
            "write outside": "Permission denied",
            "late imports": ["ok", "ok", "ok"],
        }
    assert sorted(p.name for p in outside.iterdir()) == ["existing.md", "secret.txt"]


def test_without_the_sandbox_the_same_reads_succeed(
    scene: tuple[dict[str, str], Path, Path, Path], tmp_path: Path
) -> None:
    """The spy can see a read: with `--sandbox off` it reads the secret it is refused above."""
    env, _db, _folder, outside = scene
    (outside / "secret.txt").write_text("sibling secret", "utf-8")
    source = tmp_path / "source"
    source.mkdir()
    secrets = ",".join([str(outside / "secret.txt")] * 3)

    stdout, probe = _spied(
        env, secrets, outside, "import", str(source), "--workspace", WS, "--sandbox", "off"
    )

    assert stdout == "nothing to do\n"
    assert probe["secret beside the folder"] == "ok" and probe["write outside"] == "ok"
