"""Several processes starting together on a fresh embedded database: `migrate` and `serve`.

Real processes, released at once by a start gate (gated_cli.py): four `migrate` and three stdio
`serve` processes, each `serve` answering one request that reads the database. Creating the
schema is serialized, so every process succeeds, exactly one (or none, when a `serve` won)
`migrate` reports the upgrade and the others report the schema already current.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from notes_server.store.migrate import HEAD
from tests.helpers import make_request, subprocess_env

GATED_CLI = Path(__file__).with_name("gated_cli.py")
TIMEOUT_S = 120.0
MIGRATED = re.compile(rf"^\S+: upgraded from empty to {HEAD}\n$")
ALREADY = re.compile(rf"^\S+: already at revision {HEAD}; nothing to do\n$")


def gated(
    tmp_path: Path, name: str, args: list[str], fds: tuple[int, int]
) -> subprocess.Popen[str]:
    """Start one gated `notes-server ARGS` with stdin from `<name>.in` (empty for migrate)."""
    stdin = tmp_path / f"{name}.in"
    if not stdin.exists():
        stdin.write_text("")
    with stdin.open("rb") as source:
        return subprocess.Popen(
            [sys.executable, str(GATED_CLI), *map(str, fds), *args],
            stdin=source,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=subprocess_env(tmp_path),
            cwd=tmp_path,
            pass_fds=fds,
        )


def run_together(tmp_path: Path, commands: dict[str, list[str]]) -> dict[str, tuple[int, str, str]]:
    """Start every command, wait until all have loaded, open the gate, collect the results."""
    ready_r, ready_w = os.pipe()
    gate_r, gate_w = os.pipe()
    procs = {
        name: gated(tmp_path, name, args, (ready_w, gate_r)) for name, args in commands.items()
    }
    os.close(ready_w)
    os.close(gate_r)
    loaded = b""
    while len(loaded) < len(procs):
        chunk = os.read(ready_r, len(procs))
        if not chunk:
            break
        loaded += chunk
    os.close(ready_r)
    os.close(gate_w)  # every gated process reads EOF now and starts
    assert len(loaded) == len(procs), "a process died before the start gate"
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=TIMEOUT_S)
        results[name] = (proc.returncode, out, err)
    return results


@pytest.mark.parametrize("round_", [1, 2, 3])
def test_migrate_and_serve_starting_together_on_a_fresh_database_all_succeed(
    tmp_path: Path, round_: int
) -> None:
    request = make_request("resources/list", id=round_)
    commands: dict[str, list[str]] = {f"migrate{i}": ["migrate"] for i in range(4)}
    for i in range(3):
        (tmp_path / f"serve{i}.in").write_text(json.dumps(request) + "\n")
        commands[f"serve{i}"] = ["serve", "--principal", "alice"]

    results = run_together(tmp_path, commands)

    for name, (code, out, err) in results.items():
        assert code == 0, f"{name} exited {code}: {err[-2000:]}"
        assert "Traceback" not in err and "locked" not in err, f"{name}: {err[-2000:]}"
        if name.startswith("serve"):
            reply = json.loads(out)
            assert reply["id"] == round_
            assert reply["result"]["resources"] == []
    migrate_outputs = [out for name, (_, out, _) in results.items() if name.startswith("migrate")]
    upgraded = [out for out in migrate_outputs if MIGRATED.match(out)]
    already = [out for out in migrate_outputs if ALREADY.match(out)]
    assert len(upgraded) <= 1 and len(upgraded) + len(already) == 4, migrate_outputs
    with closing(sqlite3.connect(tmp_path / "xdg" / "notes-server" / "notes.db")) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]
