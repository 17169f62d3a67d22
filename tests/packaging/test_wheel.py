"""What `pip install .` (not editable) really ships, proved on the installed wheel.

The rest of the suite imports notes_server from the source tree (an editable install), so a
module the wheel leaves out goes unnoticed there. These tests build the wheel from a copy of the
sources, install it with `--no-deps` into a fresh virtualenv that sees no source tree, no
system site-packages and, of the test environment, only the distributions the wheel's own
`Requires-Dist` pulls in (linked one by one, offline), then run its `notes-server` script as a
real process from an unrelated directory.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "notes_server", "migrations")
JUNK = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
WORKSPACE = "file:///home/alice/notes"
PIP = (sys.executable, "-m", "pip")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    home: Path

    @property
    def script(self) -> Path:
        return self.venv / "bin" / "notes-server"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{self.venv / 'bin'}:/usr/bin:/bin", "HOME": str(self.home)}
        return subprocess.run(
            [str(self.script), *args],
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )


def _build_wheel(tmp: Path) -> Path:
    """Build from a clean copy: setuptools' in-tree build/ dir could otherwise leak stale
    modules from an earlier build into the wheel."""
    src = tmp / "src"
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=JUNK)
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(origin, src / name)
    out = tmp / "dist"
    subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("notes_server-*.whl")
    return wheel


def _runtime_closure(wheel: Path) -> list[metadata.Distribution]:
    """The installed distributions the wheel's declared dependencies need, transitively."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(name).decode()
    prefix = "Requires-Dist:"
    pending = [line[len(prefix) :].strip() for line in text.splitlines() if line.startswith(prefix)]
    found: dict[str, metadata.Distribution] = {}
    while pending:
        req = Requirement(pending.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        dist = metadata.distribution(req.name)
        key = dist.metadata["Name"].lower()
        if key not in found:
            found[key] = dist
            pending.extend(dist.requires or ())
    return list(found.values())


def _link_dependencies(wheel: Path, site: Path) -> None:
    for dist in _runtime_closure(wheel):
        files = dist.files
        assert files is not None, f"{dist.metadata['Name']} has no RECORD"
        for top in {f.parts[0] for f in files if f.parts[0] != ".."}:
            target = site / top
            if not target.exists():
                target.symlink_to(Path(str(dist.locate_file(top))))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [
            *PIP,
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    _link_dependencies(wheel, site)
    home = tmp / "home"
    home.mkdir()
    return Installed(wheel, venv, home)


def _source_files() -> set[str]:
    """Every file the package needs at run time, named as it must appear in the wheel."""
    roots = {"notes_server": ROOT / "notes_server", "notes_server/migrations": ROOT / "migrations"}
    return {
        f"{prefix}/{path.relative_to(root).as_posix()}"
        for prefix, root in roots.items()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_the_wheel_ships_every_module_and_data_file_of_the_package(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as archive:
        shipped = {n for n in archive.namelist() if ".dist-info/" not in n}

    assert shipped == _source_files()
    data = {
        "notes_server/py.typed",
        "notes_server/migrations/script.py.mako",
        "notes_server/features/apps/timeline.html",  # the MCP Apps view (importlib.resources)
    }
    assert data <= shipped


def test_the_installed_package_is_imported_from_the_venv_not_the_sources(
    installed: Installed,
) -> None:
    probe = (
        "import importlib.util, notes_server.cli.client, notes_server.migrations as m;"
        "assert importlib.util.find_spec('pytest') is None, 'dev extras are visible';"
        "print(m.__file__)"
    )
    python = installed.venv / "bin" / "python"

    result = subprocess.run(
        [str(python), "-c", probe], cwd=installed.home, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(installed.venv)


def test_the_installed_script_lists_every_command_in_its_help(installed: Installed) -> None:
    from notes_server.cli.main import main

    result = installed.run("--help")

    assert result.returncode == 0, result.stderr
    for name in main.commands:
        assert f"  {name} " in result.stdout, f"{name} missing from --help"


def test_the_installed_script_migrates_grants_and_serves_a_tool_call(installed: Installed) -> None:
    db = f"sqlite:///{installed.home / 'notes.db'}"
    workspace = ("--arg", f"workspaceUri={WORKSPACE}")
    as_alice = ("--principal", "alice", "--db", db)

    steps = [
        installed.run("migrate", "--db", db),
        installed.run("workspace", "grant", "alice", WORKSPACE, "--db", db),
        installed.run("call", "notes_create", *as_alice, *workspace, "--arg", "title=Wheel"),
    ]
    search = installed.run("call", "notes_search", *as_alice, *workspace, "--arg", "query=wheel")

    for step in [*steps, search]:
        assert step.returncode == 0, step.stderr
    hits = json.loads(search.stdout)
    assert [note["title"] for note in hits["notes"]] == ["Wheel"]
