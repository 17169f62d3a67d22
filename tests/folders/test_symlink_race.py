"""A file and a directory swapped for symlinks to secrets outside the folder, in a tight loop
by another process, while import reads, export writes and sync does both: nothing leaks,
nothing lands outside.

The adversary exchanges names atomically with ``renameat2(RENAME_EXCHANGE)``, so at every
instant ``a.md`` is either the public file or a symlink to the secret file, and ``sub`` is
either the public folder or a symlink to a secret folder. Measured on this machine with the same
adversary and 10,000 attempts (each reads or writes both ``a.md`` and ``sub/b.md``), the naive
approach (``os.path.realpath``, check the prefix, then ``open`` the path) leaked the secret
1,972, 689 and 2,527 times reading (three runs, of 20,000 reads each) and wrote into the secret
files 1,367, 646 and 687 times (of 20,000 writes each). The descriptor-relative walker and
writer: zero (asserted below); the naive read is kept as a control that the adversary races.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from notes_server.features.folders.exporter import export_note
from notes_server.features.folders.importer import drafts
from notes_server.features.folders.summary import Summary
from notes_server.features.folders.walker import Limits, open_root
from notes_server.security.uri import parse_workspace_uri
from notes_server.store.notes import NoteRecord

ATTEMPTS = 10_000
# Each sync walks both swapped names and may write both: 5,000 syncs are 10,000 attempts.
SYNC_ATTEMPTS = 5_000
SECRET = "SECRET-0c1d"
RENAME_EXCHANGE = 2

# Exchange DIR/a.md with DIR/.a-link and DIR/sub with DIR/.sub-link, forever.
ADVERSARY = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
pairs = [(sys.argv[1].encode(), sys.argv[2].encode()), (sys.argv[3].encode(), sys.argv[4].encode())]
print("ready", flush=True)
while True:
    for a, b in pairs:
        libc.renameat2(-100, a, -100, b, 2)
"""


def _exchange_supported(path: Path) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    (path / "x").mkdir()
    (path / "y").symlink_to("x")
    ok = libc.renameat2(-100, bytes(path / "x"), -100, bytes(path / "y"), RENAME_EXCHANGE) == 0
    (path / "x").unlink()
    (path / "y").rmdir()
    return bool(ok)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """tmpfs when there is one: export fsyncs every file, which on a disk turns 20,000 writes
    into minutes; what is tested (which inode a name reaches) does not depend on the disk."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir=shm, prefix="notes-race-") as name:
        yield Path(name)


@pytest.fixture
def arena(scratch: Path) -> Iterator[Path]:
    """DIR with a.md and sub/b.md, secrets outside it, and the adversary running."""
    tmp_path = scratch
    if not _exchange_supported(tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not supported here")
    folder, secrets = tmp_path / "dir", tmp_path / "secrets"
    (folder / "sub").mkdir(parents=True)
    (secrets / "vault").mkdir(parents=True)
    (folder / "a.md").write_text("public a", "utf-8")
    (folder / "sub" / "b.md").write_text("public b", "utf-8")
    (secrets / "secret.md").write_text(SECRET, "utf-8")
    (secrets / "vault" / "b.md").write_text(SECRET, "utf-8")
    (folder / ".a-link").symlink_to(secrets / "secret.md")
    (folder / ".sub-link").symlink_to(secrets / "vault")
    names = [str(folder / n) for n in ("a.md", ".a-link", "sub", ".sub-link")]
    adversary = subprocess.Popen(
        [sys.executable, "-c", ADVERSARY, *names], stdout=subprocess.PIPE, text=True
    )
    try:
        assert adversary.stdout is not None
        assert adversary.stdout.readline() == "ready\n"
        yield folder
    finally:
        adversary.kill()
        adversary.wait()
        adversary.stdout.close()


def test_import_never_reads_a_secret_behind_a_swapped_symlink(arena: Path) -> None:
    workspace = parse_workspace_uri("file:///w")
    fd = open_root(str(arena))
    seen: dict[str, int] = {}
    leaks = 0
    try:
        for _attempt in range(ATTEMPTS):
            summary = Summary()
            for draft in drafts(fd, workspace, Limits(), summary):
                leaks += SECRET in draft.body
                seen[draft.path] = seen.get(draft.path, 0) + 1
            for _action, path, reason in summary.problems:
                seen[f"{path}: {reason}"] = seen.get(f"{path}: {reason}", 0) + 1
    finally:
        os.close(fd)

    assert leaks == 0
    # The adversary really raced: both names were seen as files and as refused symlinks.
    assert seen.get("a.md", 0) > 0
    assert seen.get("sub/b.md", 0) > 0
    assert seen.get("a.md: symlink (not followed)", 0) > 0
    assert seen.get("sub: symlink (not followed)", 0) > 0


def _note(path: str) -> NoteRecord:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    return NoteRecord("note_x", "file:///w", path, "t", "b", moment, moment, 1, False, None)


def test_export_never_writes_outside_through_a_swapped_symlink(arena: Path) -> None:
    secrets = arena.parent / "secrets"
    fd = open_root(str(arena))
    written = 0
    try:
        for attempt in range(ATTEMPTS):
            summary = Summary()
            data = f"public {attempt}".encode()
            written += export_note(fd, _note("a.md"), data, summary)
            written += export_note(fd, _note("sub/b.md"), data, summary)
    finally:
        os.close(fd)

    assert (secrets / "secret.md").read_text("utf-8") == SECRET
    assert sorted(p.name for p in (secrets / "vault").iterdir()) == ["b.md"]
    assert (secrets / "vault" / "b.md").read_text("utf-8") == SECRET
    assert not (secrets / "vault" / "a.md").exists()
    # The adversary really raced: some writes went through, some were refused.
    assert 0 < written < 2 * ATTEMPTS


def test_the_naive_realpath_check_does_leak_under_the_same_adversary(arena: Path) -> None:
    """The control: without it, a quiet adversary would make the tests above pass vacuously."""
    leaks = 0
    for _attempt in range(ATTEMPTS):
        for rel in ("a.md", "sub/b.md"):
            path = os.path.join(arena, rel)
            try:
                # realpath itself can fail mid-swap (readlink of what is no longer a link).
                if not os.path.realpath(path).startswith(f"{arena}{os.sep}"):
                    continue
                with open(path, encoding="utf-8") as file:
                    leaks += SECRET in file.read()
            except OSError:
                continue

    assert leaks > 0


def test_sync_never_imports_a_secret_nor_writes_outside(arena: Path) -> None:
    from notes_server.features.folders.sync import sync_folder
    from notes_server.store import migrate
    from notes_server.store.engine import make_engine

    secrets = arena.parent / "secrets"
    engine = make_engine(f"sqlite:///{arena.parent}/notes.db")
    migrate.upgrade(engine)
    workspace = parse_workspace_uri("file:///w")
    fd = open_root(str(arena))
    refused = 0
    try:
        for attempt in range(SYNC_ATTEMPTS):
            summary = sync_folder(
                engine, fd, workspace, str(arena), datetime(2026, 1, 1, tzinfo=UTC), actor="race"
            )
            refused += summary.counts["refused"]
            if attempt % 50 == 0:
                _edit_every_note(engine, attempt)
        with engine.connect() as conn:
            bodies = [row[0] for row in conn.exec_driver_sql("SELECT body FROM notes")]
    finally:
        os.close(fd)
        engine.dispose()

    assert not [body for body in bodies if SECRET in body]
    assert (secrets / "secret.md").read_text("utf-8") == SECRET
    assert sorted(p.name for p in (secrets / "vault").iterdir()) == ["b.md"]
    assert (secrets / "vault" / "b.md").read_text("utf-8") == SECRET
    assert refused > 0


def _edit_every_note(engine: Any, attempt: int) -> None:
    """Store-side edits, so that sync also has files to write while the adversary swaps."""
    from notes_server.store import folders
    from notes_server.store.engine import write_tx

    with write_tx(engine) as conn:
        for note in folders.live_notes(conn, "file:///w"):
            folders.replace_content(
                conn,
                note,
                title=note.title,
                body=f"edit {attempt}",
                updated=datetime(2026, 1, 2, tzinfo=UTC),
            )
